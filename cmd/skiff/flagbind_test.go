package main

import (
	"io"
	"reflect"
	"testing"
)

// sampleValue is a value of a flag's type, to see where it lands.
func sampleValue(typ string, d flagDef) string {
	switch typ {
	case "bool":
		return "" // toggled below
	case "int32", "int", "int64":
		return "7"
	case "duration":
		return "7s"
	case "ip":
		return "127.0.0.9"
	case "strings":
		return "a,b"
	case "mapStringBool":
		return "SomeGate=true"
	case "colonSeparatedMultimapStringString":
		return "a:b"
	case "[]v1.Taint":
		return "k=v:NoSchedule"
	case "reserved-memory":
		return "0:memory=1Gi"
	case "mapStringString":
		if d.syntax == mapLangle {
			return "memory.available<1Gi"
		}
		return "cpu=1"
	}
	return "sample"
}

// TestEveryConfigFlagSetsItsField parses each configuration flag alone and
// checks that its field, and only its field, changed.
func TestEveryConfigFlagSetsItsField(t *testing.T) {
	for _, d := range flagTable {
		if d.field == "" || d.syntax == byLogsapi {
			continue
		}
		kc := defaultConfig()
		fs := newFlagSet(&options{}, kc, io.Discard)
		f := fs.Lookup(d.name)
		arg := "--" + d.name + "=" + sampleValue(f.Value.Type(), d)
		if f.Value.Type() == "bool" {
			arg = "--" + d.name + "=" + map[string]string{"true": "false", "false": "true", "": "true"}[f.Value.String()]
		}
		if err := fs.Parse([]string{arg}); err != nil {
			t.Errorf("%s: %v", arg, err)
			continue
		}
		def := defaultConfig()
		got := fieldAddr(reflect.ValueOf(kc).Elem(), d.field).Interface()
		want := fieldAddr(reflect.ValueOf(def).Elem(), d.field).Interface()
		if reflect.DeepEqual(got, want) {
			t.Errorf("%s left %s at its default %v", arg, d.field, want)
		}
		// Nothing else moved.
		fieldAddr(reflect.ValueOf(kc).Elem(), d.field).Set(fieldAddr(reflect.ValueOf(def).Elem(), d.field))
		if !reflect.DeepEqual(kc, def) {
			t.Errorf("%s changed more than %s", arg, d.field)
		}
	}
}
