package nodestatus

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

var errShuttingDown = errors.New("node is shutting down")

func TestNotReadyComesAfterTheRuntimesReasons(t *testing.T) {
	var pleg error
	env := newTestController(t, nil, func(c *Config) {
		c.HealthChecks = []HealthCheck{{Name: "PLEG", Check: func() error { return pleg }}}
		c.NotReady = func() error { return errShuttingDown }
	})
	ctx := context.Background()
	env.c.runtime.update(ctx)
	node := &v1.Node{}
	env.c.setNodeStatus(ctx, node)
	if c := condition(t, node, v1.NodeReady); c.Status != v1.ConditionFalse || c.Reason != "KubeletNotReady" || c.Message != "node is shutting down" {
		t.Errorf("Ready = %s %s %q, want False KubeletNotReady %q", c.Status, c.Reason, c.Message, "node is shutting down")
	}
	pleg = errDown
	env.c.setNodeStatus(ctx, node)
	if c, want := condition(t, node, v1.NodeReady), "[PLEG is not healthy: "+errDown.Error()+", node is shutting down]"; c.Message != want {
		t.Errorf("message = %q, want %q", c.Message, want)
	}
}

// SyncNow posts a change at once, well before nodeStatusUpdateFrequency.
func TestSyncNowPostsAtOnce(t *testing.T) {
	client := fake.NewClientset()
	giveUIDs(client)
	var down atomic.Bool
	env := newTestController(t, client, func(c *Config) {
		c.NotReady = func() error {
			if down.Load() {
				return errShuttingDown
			}
			return nil
		}
	})
	env.realClock()
	env.c.kc.NodeStatusUpdateFrequency = metav1.Duration{Duration: time.Hour}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); env.c.Run(ctx) }()
	defer func() { cancel(); wg.Wait() }()

	ready := func(want v1.ConditionStatus) func() bool {
		return func() bool {
			n, err := client.CoreV1().Nodes().Get(ctx, "node-a", metav1.GetOptions{})
			return err == nil && condition(t, n, v1.NodeReady).Status == want
		}
	}
	waitFor(t, "Ready", ready(v1.ConditionTrue))
	down.Store(true)
	env.c.SyncNow()
	waitFor(t, "NotReady posted", ready(v1.ConditionFalse))
	down.Store(false)
	env.c.SyncNow()
	waitFor(t, "Ready again", ready(v1.ConditionTrue))
}
