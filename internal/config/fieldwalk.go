package config

import (
	"reflect"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	logsapi "k8s.io/component-base/logs/api/v1"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// Struct types that are one value in the file, not a group of fields.
var leafStructs = map[reflect.Type]bool{
	reflect.TypeOf(metav1.Duration{}):            true,
	reflect.TypeOf(resource.QuantityValue{}):     true,
	reflect.TypeOf(resource.Quantity{}):          true,
	reflect.TypeOf(logsapi.TimeOrMetaDuration{}): true,
	reflect.TypeOf(metav1.TypeMeta{}):            true,
	reflect.TypeOf(metav1.Time{}):                true,
}

// leaf is one field of a KubeletConfiguration: its JSON path and, for a
// given object, its value (invalid when a parent pointer is nil).
type leaf struct {
	path  string
	value reflect.Value
}

// FieldPaths lists the JSON path of every field of the v1beta1
// KubeletConfiguration type, nested structs included, in declaration order.
func FieldPaths() []string {
	var out []string
	for _, l := range leaves(reflect.ValueOf(&kubeletconfigv1beta1.KubeletConfiguration{}).Elem()) {
		out = append(out, l.path)
	}
	return out
}

func leaves(v reflect.Value) []leaf {
	var out []leaf
	walkLeaves(v.Type(), v, "", &out)
	return out
}

// walkLeaves descends into nested structs (through pointers, which may be
// nil: their fields then have invalid values) and inline structs.
func walkLeaves(t reflect.Type, v reflect.Value, prefix string, out *[]leaf) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		var fv reflect.Value
		if v.IsValid() {
			fv = v.Field(i)
		}
		if f.Anonymous && f.Type == reflect.TypeOf(metav1.TypeMeta{}) {
			continue // apiVersion and kind
		}
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
			if fv.IsValid() {
				fv = fv.Elem() // invalid when nil
			}
		}
		path := name
		if prefix != "" {
			path = prefix + "." + name
		}
		switch {
		case ft.Kind() == reflect.Struct && f.Anonymous && name == "":
			walkLeaves(ft, fv, prefix, out) // inlined
		case ft.Kind() == reflect.Struct && !leafStructs[ft]:
			walkLeaves(ft, fv, path, out)
		default:
			*out = append(*out, leaf{path: path, value: fv})
		}
	}
}

// Warning is a field set to something other than its default that Skiff
// does not (fully) honour.
type Warning struct {
	Field
}

// Unhonoured compares a defaulted configuration with the defaults and
// returns the fields that differ whose handling is NoEffect or Partly.
// Refused fields are left to Validate.
func Unhonoured(c *kubeletconfigv1beta1.KubeletConfiguration) []Warning {
	defaults := &kubeletconfigv1beta1.KubeletConfiguration{FeatureGates: c.FeatureGates}
	SetDefaults(defaults)
	want := leaves(reflect.ValueOf(defaults).Elem())
	got := leaves(reflect.ValueOf(c).Elem())
	var out []Warning
	for i, l := range got {
		f, ok := FieldByPath(l.path)
		if !ok || (f.Handling != NoEffect && f.Handling != Partly) {
			continue
		}
		if !sameValue(l.value, want[i].value) {
			out = append(out, Warning{f})
		}
	}
	return out
}

// sameValue treats a nil pointer's fields, a nil map or slice and an empty
// one alike: none of them says anything.
func sameValue(a, b reflect.Value) bool {
	if empty(a) && empty(b) {
		return true
	}
	if !a.IsValid() || !b.IsValid() {
		return false
	}
	return reflect.DeepEqual(a.Interface(), b.Interface())
}

func empty(v reflect.Value) bool {
	if !v.IsValid() {
		return true
	}
	switch v.Kind() {
	case reflect.Map, reflect.Slice:
		return v.Len() == 0
	case reflect.Pointer:
		return v.IsNil()
	}
	return false
}
