package cri

import (
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	critest "k8s.io/cri-api/pkg/apis/testing"

	"github.com/skiff-sh/skiff/internal/metrics"
)

func TestCgroupDriverFromRuntime(t *testing.T) {
	runtimeConfigRetry = 0
	unimplemented := status.Error(codes.Unimplemented, "unknown method RuntimeConfig")
	unavailable := status.Error(codes.Unavailable, "starting")
	for _, tc := range []struct {
		name       string
		linux      *runtimeapi.LinuxRuntimeConfiguration
		errs       []error
		configured string
		want       string
		wantErr    bool
		calls      int
	}{
		{name: "runtime says systemd", linux: &runtimeapi.LinuxRuntimeConfiguration{CgroupDriver: runtimeapi.CgroupDriver_SYSTEMD},
			configured: "cgroupfs", want: "systemd", calls: 1},
		{name: "runtime says cgroupfs", linux: &runtimeapi.LinuxRuntimeConfiguration{CgroupDriver: runtimeapi.CgroupDriver_CGROUPFS},
			configured: "systemd", want: "cgroupfs", calls: 1},
		{name: "unimplemented falls back", errs: []error{unimplemented}, configured: "systemd", want: "systemd", calls: 1},
		{name: "no linux config falls back", configured: "cgroupfs", want: "cgroupfs", calls: 1},
		{name: "transient error retried", errs: []error{unavailable, unavailable},
			linux:      &runtimeapi.LinuxRuntimeConfiguration{CgroupDriver: runtimeapi.CgroupDriver_SYSTEMD},
			configured: "cgroupfs", want: "systemd", calls: 3},
		{name: "persistent error", errs: []error{unavailable, unavailable, unavailable},
			configured: "cgroupfs", wantErr: true, calls: 3},
		{name: "unknown driver", linux: &runtimeapi.LinuxRuntimeConfiguration{CgroupDriver: 7},
			configured: "cgroupfs", wantErr: true, calls: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := critest.NewFakeRuntimeService()
			fake.FakeLinuxConfiguration = tc.linux
			for _, err := range tc.errs {
				fake.InjectError("RuntimeConfig", err)
			}
			// Through the instrumented client, as Skiff calls it.
			got, err := CgroupDriver(context.Background(), instrumentedRuntime{fake, &metrics.New().Runtime}, tc.configured)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Errorf("got %q, %v; want %q (error: %v)", got, err, tc.want, tc.wantErr)
			}
			calls := 0
			for _, c := range fake.Called {
				if c == "RuntimeConfig" {
					calls++
				}
			}
			if calls != tc.calls {
				t.Errorf("%d RuntimeConfig calls, want %d", calls, tc.calls)
			}
		})
	}
}

func TestCgroupDriverStopsWithContext(t *testing.T) {
	runtimeConfigRetry = time.Hour
	defer func() { runtimeConfigRetry = 0 }()
	fake := critest.NewFakeRuntimeService()
	fake.InjectError("RuntimeConfig", status.Error(codes.Unavailable, "starting"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := CgroupDriver(ctx, fake, "cgroupfs"); !errors.Is(err, context.Canceled) {
		t.Errorf("error %v, want the context's", err)
	}
}
