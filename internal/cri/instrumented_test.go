package cri

import (
	"context"
	"errors"
	"testing"

	critest "k8s.io/cri-api/pkg/apis/testing"

	"github.com/skiff-sh/skiff/internal/metrics"
)

// counter reads kubelet_runtime_operations_<suffix>{operation_type=op}.
func counter(t *testing.T, reg *metrics.Registry, name, op string) float64 {
	t.Helper()
	mfs, err := reg.Gatherers().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetLabel()[0].GetValue() != op {
				continue
			}
			if h := m.GetHistogram(); h != nil {
				return float64(h.GetSampleCount())
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

func TestInstrumentedCallsAreCounted(t *testing.T) {
	ctx := context.Background()
	fake := critest.NewFakeRuntimeService()
	images := critest.NewFakeImageService()
	reg := metrics.New()
	rs, is := instrumentedRuntime{fake, &reg.Runtime}, instrumentedImages{images, &reg.Runtime}

	for _, tc := range []struct {
		op   string
		call func() error
		fail func(error)
	}{
		{"list_podsandbox", func() error { _, err := rs.ListPodSandbox(ctx, nil); return err },
			func(e error) { fake.InjectError("ListPodSandbox", e) }},
		{"list_containers", func() error { _, err := rs.ListContainers(ctx, nil); return err },
			func(e error) { fake.InjectError("ListContainers", e) }},
		{"image_fs_info", func() error { _, err := is.ImageFsInfo(ctx); return err },
			func(e error) { images.InjectError("ImageFsInfo", e) }},
	} {
		total := counter(t, reg, "kubelet_runtime_operations_total", tc.op)
		errs := counter(t, reg, "kubelet_runtime_operations_errors_total", tc.op)
		hist := counter(t, reg, "kubelet_runtime_operations_duration_seconds", tc.op)
		if err := tc.call(); err != nil {
			t.Fatalf("%s: %v", tc.op, err)
		}
		tc.fail(errors.New("injected"))
		if err := tc.call(); err == nil {
			t.Fatalf("%s: injected error not returned", tc.op)
		}
		if got := counter(t, reg, "kubelet_runtime_operations_total", tc.op) - total; got != 2 {
			t.Errorf("%s: operations %v, want 2", tc.op, got)
		}
		if got := counter(t, reg, "kubelet_runtime_operations_duration_seconds", tc.op) - hist; got != 2 {
			t.Errorf("%s: duration observations %v, want 2", tc.op, got)
		}
		if got := counter(t, reg, "kubelet_runtime_operations_errors_total", tc.op) - errs; got != 1 {
			t.Errorf("%s: errors %v, want 1", tc.op, got)
		}
	}
}
