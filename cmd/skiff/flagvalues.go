package main

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// pflag values for the KubeletConfiguration v1beta1 field types pflag has
// no value for: optional (pointer) scalars, and upstream's own flag syntaxes.

type boolPtr struct{ p **bool }

func (v boolPtr) Set(s string) error {
	b, err := strconv.ParseBool(s)
	if err != nil {
		return err
	}
	*v.p = &b
	return nil
}
func (v boolPtr) String() string {
	if *v.p == nil {
		return ""
	}
	return strconv.FormatBool(**v.p)
}
func (v boolPtr) Type() string     { return "bool" }
func (v boolPtr) IsBoolFlag() bool { return true }

type int32Ptr struct{ p **int32 }

func (v int32Ptr) Set(s string) error {
	n, err := strconv.ParseInt(s, 0, 32)
	if err != nil {
		return err
	}
	i := int32(n)
	*v.p = &i
	return nil
}
func (v int32Ptr) String() string {
	if *v.p == nil {
		return ""
	}
	return strconv.FormatInt(int64(**v.p), 10)
}
func (v int32Ptr) Type() string { return "int32" }

type int64Ptr struct{ p **int64 }

func (v int64Ptr) Set(s string) error {
	n, err := strconv.ParseInt(s, 0, 64)
	if err != nil {
		return err
	}
	*v.p = &n
	return nil
}
func (v int64Ptr) String() string {
	if *v.p == nil {
		return ""
	}
	return strconv.FormatInt(**v.p, 10)
}
func (v int64Ptr) Type() string { return "int" }

type stringPtr struct{ p **string }

func (v stringPtr) Set(s string) error { *v.p = &s; return nil }
func (v stringPtr) String() string {
	if *v.p == nil {
		return ""
	}
	return **v.p
}
func (v stringPtr) Type() string { return "string" }

type durationPtr struct{ p **metav1.Duration }

func (v durationPtr) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*v.p = &metav1.Duration{Duration: d}
	return nil
}
func (v durationPtr) String() string {
	if *v.p == nil {
		return ""
	}
	return (*v.p).Duration.String()
}
func (v durationPtr) Type() string { return "duration" }

// ipValue takes one IP address, as upstream's --address.
type ipValue struct{ p *string }

func (v ipValue) Set(s string) error {
	if net.ParseIP(strings.TrimSpace(s)) == nil {
		return fmt.Errorf("%q is not a valid IP address", s)
	}
	*v.p = strings.TrimSpace(s)
	return nil
}
func (v ipValue) String() string { return *v.p }
func (v ipValue) Type() string   { return "ip" }

// taintsValue reads <key>=<value>:<effect>[,...], replacing what the file
// said on the first use and adding on later ones.
type taintsValue struct {
	p   *[]v1.Taint
	set bool
}

func (v *taintsValue) Set(s string) error {
	var specs []string
	for _, spec := range strings.Split(s, ",") {
		if spec = strings.TrimSpace(spec); spec != "" {
			specs = append(specs, spec)
		}
	}
	taints, err := parseTaints(specs)
	if err != nil {
		return err
	}
	if !v.set {
		*v.p, v.set = nil, true
	}
	*v.p = append(*v.p, taints...)
	return nil
}
func (v *taintsValue) String() string {
	var out []string
	for _, t := range *v.p {
		out = append(out, fmt.Sprintf("%s=%s:%s", t.Key, t.Value, t.Effect))
	}
	return strings.Join(out, ",")
}
func (v *taintsValue) Type() string { return "[]v1.Taint" }

// reservedMemoryValue reads upstream's --reserved-memory syntax:
// <numa node>:<type>=<quantity>[,<type>=<quantity>...][;...], repeatable.
type reservedMemoryValue struct {
	p   *[]kubeletconfigv1beta1.MemoryReservation
	set bool
}

func (v *reservedMemoryValue) Set(s string) error {
	if !v.set {
		*v.p, v.set = nil, true
	}
	if s == "" {
		return nil
	}
	for _, node := range strings.Split(s, ";") {
		id, types, ok := strings.Cut(node, ":")
		if !ok {
			return fmt.Errorf("the reserved memory has incorrect format, expected numaNodeID:type=quantity[,type=quantity...], got %s", node)
		}
		n, err := strconv.ParseInt(id, 10, 32)
		if err != nil {
			return fmt.Errorf("NUMA node ID %q is not an integer", id)
		}
		r := kubeletconfigv1beta1.MemoryReservation{NumaNode: int32(n), Limits: v1.ResourceList{}}
		for _, kv := range strings.Split(types, ",") {
			name, q, ok := strings.Cut(kv, "=")
			if !ok {
				return fmt.Errorf("the reserved limit has incorrect value, expected type=quantity, got %s", kv)
			}
			if name != string(v1.ResourceMemory) && !strings.HasPrefix(name, v1.ResourceHugePagesPrefix) {
				return fmt.Errorf("memory type conversion error, unknown type: %q", name)
			}
			qty, err := resource.ParseQuantity(q)
			if err != nil {
				return fmt.Errorf("reserved memory %s: %w", name, err)
			}
			r.Limits[v1.ResourceName(name)] = qty
		}
		*v.p = append(*v.p, r)
	}
	return nil
}
func (v *reservedMemoryValue) String() string { return fmt.Sprint(*v.p) }
func (v *reservedMemoryValue) Type() string   { return "reserved-memory" }
