package volume

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	testclock "k8s.io/utils/clock/testing"

	"github.com/skiff-sh/skiff/internal/volume/payload"
)

// A projected service account token is
// re-requested once 80 % of its lifetime has passed, and the pod's sync
// rewrites the file in the volume. The clock is fake; the TokenRequest
// API answers like the apiserver (lifetime as asked, a new token each time).
func TestProjectedTokenFileRewrittenAt80Percent(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("projected volumes are tmpfs mounts: needs root")
	}
	clk := testclock.NewFakeClock(time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC))
	client := fake.NewClientset()
	var issued atomic.Int32
	client.PrependReactor("create", "serviceaccounts", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "token" {
			return false, nil, nil
		}
		tr := a.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenRequest).DeepCopy()
		n := issued.Add(1)
		tr.Status = authenticationv1.TokenRequestStatus{
			Token:               fmt.Sprintf("token-%d", n),
			ExpirationTimestamp: metav1.NewTime(clk.Now().Add(time.Duration(*tr.Spec.ExpirationSeconds) * time.Second)),
		}
		return true, tr, nil
	})
	m := New(Config{RootDir: t.TempDir(), Client: client, Tokens: payload.New(client.CoreV1(), clk)})
	exp := int64(600)
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u1"},
		Spec: v1.PodSpec{ServiceAccountName: "default", Volumes: []v1.Volume{{Name: "tok", VolumeSource: v1.VolumeSource{
			Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{{
				ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: &exp},
			}}},
		}}}},
	}
	ctx := context.Background()
	t.Cleanup(func() { _ = m.TearDown(ctx, pod.UID) })
	// sync is what the pod worker does on every sync of the pod.
	sync := func() string {
		t.Helper()
		got, err := m.SetUp(ctx, pod)
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(got["tok"].HostPath, "token"))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}

	if got := sync(); got != "token-1" {
		t.Fatalf("first sync wrote %q", got)
	}
	// 469 s of 600 (78 %, and before 80 % less the up to 10 s of jitter):
	// syncs keep the token; no new request.
	clk.Step(469 * time.Second)
	if got := sync(); got != "token-1" || issued.Load() != 1 {
		t.Fatalf("at 78%%: file %q after %d token requests", got, issued.Load())
	}
	// 481 s (past 80 %): the sync requests a new token and rewrites the file.
	clk.Step(12 * time.Second)
	if got := sync(); got != "token-2" || issued.Load() != 2 {
		t.Fatalf("past 80%%: file %q after %d token requests", got, issued.Load())
	}
	// And the new token's own clock starts over.
	clk.Step(400 * time.Second)
	if got := sync(); got != "token-2" {
		t.Fatalf("400 s into the second token: file %q", got)
	}
	clk.Step(100 * time.Second)
	if got := sync(); got != "token-3" {
		t.Fatalf("past 80%% of the second token: file %q", got)
	}
}
