package nodestatus

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
)

// runtimeDownThreshold is how long after the last good runtime status the
// runtime counts as down (upstream's maxWaitForContainerRuntime).
const runtimeDownThreshold = 30 * time.Second

// runtimeState is what the last CRI Status and Version calls said, kept the
// way upstream's runtimeState keeps it: a failed Status call changes
// nothing, so the node turns NotReady only once the last good status is
// older than runtimeDownThreshold.
type runtimeState struct {
	rt     RuntimeStatus
	clock  clock.Clock
	checks []HealthCheck

	mu         sync.Mutex
	lastSync   time.Time // last Status with RuntimeReady=true
	runtimeErr error
	networkErr error
	handlers   []v1.NodeRuntimeHandler
	features   *v1.NodeFeatures
	name       string // from Version; kept across failures
	version    string // "Unknown" while Version fails
	logged     string // the runtime problem last logged
}

func newRuntimeState(rt RuntimeStatus, c clock.Clock, checks []HealthCheck) *runtimeState {
	return &runtimeState{rt: rt, clock: c, checks: checks, version: "Unknown"}
}

// update asks the runtime for its status and version.
func (s *runtimeState) update(ctx context.Context) {
	v, verr := s.rt.Version(ctx, "v1")
	s.mu.Lock()
	if verr != nil {
		s.version = "Unknown"
	} else {
		s.name, s.version = v.GetRuntimeName(), v.GetRuntimeVersion()
	}
	s.mu.Unlock()
	resp, err := s.rt.Status(ctx, false)
	if err != nil {
		s.logProblem(ctx, err, "Container runtime sanity check failed")
		return
	}
	if resp.GetStatus() == nil {
		s.logProblem(ctx, errors.New("container runtime status is nil"), "Container runtime sanity check failed")
		return
	}
	var netCond, rtCond *runtimeapi.RuntimeCondition
	for _, c := range resp.GetStatus().GetConditions() {
		switch c.GetType() {
		case runtimeapi.NetworkReady:
			netCond = c
		case runtimeapi.RuntimeReady:
			rtCond = c
		}
	}
	s.mu.Lock()
	s.networkErr, s.runtimeErr = nil, nil
	if netCond == nil || !netCond.GetStatus() {
		s.networkErr = fmt.Errorf("container runtime network not ready: %s", conditionString(netCond))
	}
	if rtCond == nil || !rtCond.GetStatus() {
		s.runtimeErr = fmt.Errorf("container runtime not ready: %s", conditionString(rtCond))
	} else {
		s.handlers = runtimeHandlers(resp.GetRuntimeHandlers())
		s.features = nil
		if f := resp.GetFeatures(); f != nil {
			s.features = &v1.NodeFeatures{SupplementalGroupsPolicy: ptr.To(f.GetSupplementalGroupsPolicy())}
		}
		s.lastSync = s.clock.Now()
	}
	problem := utilerrors.NewAggregate([]error{s.runtimeErr, s.networkErr})
	s.mu.Unlock()
	s.logProblem(ctx, problem, "Container runtime not ready")
}

// logProblem logs a runtime problem when it is new (status is checked up to
// ten times a second while the node starts) and the recovery from one.
func (s *runtimeState) logProblem(ctx context.Context, err error, msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	logger := klog.FromContext(ctx)
	switch {
	case err == nil && s.logged != "":
		logger.Info("Container runtime is ready again")
		s.logged = ""
	case err != nil && err.Error() != s.logged:
		logger.Error(err, msg)
		s.logged = err.Error()
	}
}

// conditionString formats a CRI condition as upstream's RuntimeCondition
// String does, "<nil>" when the runtime did not report it.
func conditionString(c *runtimeapi.RuntimeCondition) string {
	if c == nil {
		return "<nil>"
	}
	return fmt.Sprintf("%s=%t reason:%s message:%s", c.GetType(), c.GetStatus(), c.GetReason(), c.GetMessage())
}

func runtimeHandlers(hs []*runtimeapi.RuntimeHandler) []v1.NodeRuntimeHandler {
	if len(hs) == 0 {
		return nil
	}
	out := make([]v1.NodeRuntimeHandler, 0, len(hs))
	for _, h := range hs {
		out = append(out, v1.NodeRuntimeHandler{
			Name: h.GetName(),
			Features: &v1.NodeRuntimeHandlerFeatures{
				RecursiveReadOnlyMounts: ptr.To(h.GetFeatures().GetRecursiveReadOnlyMounts()),
				UserNamespaces:          ptr.To(h.GetFeatures().GetUserNamespaces()),
			},
		})
	}
	return out
}

// errors is why the node is not ready, as far as the runtime goes: runtime
// errors first, then network errors, as upstream orders them.
func (s *runtimeState) errors() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	switch {
	case s.lastSync.IsZero():
		errs = append(errs, errors.New("container runtime status check may not have completed yet"))
	case !s.lastSync.Add(runtimeDownThreshold).After(s.clock.Now()):
		errs = append(errs, errors.New("container runtime is down"))
	}
	for _, hc := range s.checks {
		if err := hc.Check(); err != nil {
			errs = append(errs, fmt.Errorf("%s is not healthy: %w", hc.Name, err))
		}
	}
	if s.runtimeErr != nil {
		errs = append(errs, s.runtimeErr)
	}
	if s.networkErr != nil {
		errs = append(errs, s.networkErr)
	}
	return utilerrors.NewAggregate(errs)
}

// info returns what the node status shows of the runtime.
func (s *runtimeState) info() (version string, handlers []v1.NodeRuntimeHandler, features *v1.NodeFeatures) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.name + "://" + s.version, s.handlers, s.features
}
