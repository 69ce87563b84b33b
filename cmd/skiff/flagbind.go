package main

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/spf13/pflag"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cliflag "k8s.io/component-base/cli/flag"
	logsapi "k8s.io/component-base/logs/api/v1"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/skiff-sh/skiff/internal/config"
)

// registerFlags adds every flag of flagTable to fs: flag-only settings bound
// to o, configuration flags bound to the fields of kc, each with upstream's
// deprecation message where upstream has one.
func registerFlags(fs *pflag.FlagSet, o *options, kc *kubeletconfigv1beta1.KubeletConfiguration) {
	logsapi.AddFlags(&kc.Logging, fs)
	for _, d := range flagTable {
		switch {
		case d.syntax == byLogsapi:
			if fs.Lookup(d.name) == nil {
				panic(fmt.Sprintf("logsapi registered no flag --%s", d.name))
			}
			fs.Lookup(d.name).Usage += " " + fieldUsage(d.field)
		case d.field != "":
			bindField(fs, d, kc)
		default:
			usage := d.usage
			if d.noEffect != "" {
				usage += " (No effect in Skiff: " + d.noEffect + ".)"
			}
			d.bind(fs, o, d.name, usage)
		}
		f := fs.Lookup(d.name)
		switch {
		case d.deprecated != "":
			f.Deprecated = d.deprecated
		case d.field != "" && !currentConfigFlags[d.name]:
			f.Deprecated = deprecatedConfigFlag
		}
		// Upstream lists deprecated flags in --help too.
		f.Hidden = false
	}
}

// fieldUsage describes a configuration flag by its field and handling.
func fieldUsage(path string) string {
	f, ok := config.FieldByPath(path)
	if !ok {
		panic(fmt.Sprintf("flag for unknown config field %q", path))
	}
	s := "Overrides the config field " + path + "."
	if f.Handling != config.Honoured {
		s += " In Skiff: " + f.Handling.String()
		if f.Note != "" {
			s += ", " + f.Note
		}
		s += "."
	}
	return s
}

// bindField registers a flag on the field at d.field of kc, with a value
// that fits the field's type and d.syntax.
func bindField(fs *pflag.FlagSet, d flagDef, kc *kubeletconfigv1beta1.KubeletConfiguration) {
	usage := fieldUsage(d.field)
	addr := fieldAddr(reflect.ValueOf(kc).Elem(), d.field).Addr().Interface()
	var value pflag.Value
	switch p := addr.(type) {
	case *string:
		if d.syntax == ip {
			value = ipValue{p}
		} else {
			fs.StringVar(p, d.name, *p, usage)
		}
	case *kubeletconfigv1beta1.KubeletAuthorizationMode:
		fs.StringVar((*string)(p), d.name, string(*p), usage)
	case *bool:
		fs.BoolVar(p, d.name, *p, usage)
	case *int32:
		fs.Int32Var(p, d.name, *p, usage)
	case *int64:
		fs.Int64Var(p, d.name, *p, usage)
	case *metav1.Duration:
		fs.DurationVar(&p.Duration, d.name, p.Duration, usage)
	case *[]string:
		fs.StringSliceVar(p, d.name, *p, usage)
	case **bool:
		value = boolPtr{p}
	case **int32:
		value = int32Ptr{p}
	case **int64:
		value = int64Ptr{p}
	case **string:
		value = stringPtr{p}
	case **metav1.Duration:
		value = durationPtr{p}
	case *map[string]bool:
		value = cliflag.NewMapStringBool(p)
	case *map[string][]string:
		value = cliflag.NewColonSeparatedMultimapStringString(p)
	case *map[string]string:
		value = mapValue(p, d.syntax)
	case *[]v1.Taint:
		value = &taintsValue{p: p}
	case *[]kubeletconfigv1beta1.MemoryReservation:
		value = &reservedMemoryValue{p: p}
	default:
		panic(fmt.Sprintf("flag --%s: no flag value for field %s of type %T", d.name, d.field, addr))
	}
	if value != nil {
		fs.Var(value, d.name, usage)
		if value.Type() == "bool" {
			fs.Lookup(d.name).NoOptDefVal = "true"
		}
	}
}

func mapValue(p *map[string]string, s syntax) pflag.Value {
	switch s {
	case mapLangle:
		return cliflag.NewLangleSeparatedMapStringString(p)
	case mapKVNoSplt:
		return cliflag.NewMapStringStringNoSplit(p)
	case mapKV:
		return cliflag.NewMapStringString(p)
	}
	panic("map flag without a syntax")
}

// fieldAddr finds a field by its JSON path, allocating nil struct pointers
// on the way.
func fieldAddr(v reflect.Value, path string) reflect.Value {
	name, rest, nested := strings.Cut(path, ".")
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		tag, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if tag != name {
			continue
		}
		f := v.Field(i)
		if !nested {
			return f
		}
		if f.Kind() == reflect.Pointer {
			if f.IsNil() {
				f.Set(reflect.New(f.Type().Elem()))
			}
			f = f.Elem()
		}
		return fieldAddr(f, rest)
	}
	panic(fmt.Sprintf("no field %q in %s", name, t))
}
