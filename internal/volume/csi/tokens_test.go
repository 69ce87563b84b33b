package csi

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/internal/pluginwatcher"
	"github.com/skiff-sh/skiff/internal/volume/mountinfo"
	"github.com/skiff-sh/skiff/internal/volume/payload"
)

// tokenAPI answers TokenRequests as the apiserver does, with a token
// naming its audiences, expiring expirationSeconds (default 3600) after
// now, and keeps the requests.
func tokenAPI(now time.Time) (*fake.Clientset, *[]*authenticationv1.TokenRequest) {
	var reqs []*authenticationv1.TokenRequest
	client := fake.NewClientset()
	client.PrependReactor("create", "serviceaccounts", func(a k8stesting.Action) (bool, runtime.Object, error) {
		c := a.(k8stesting.CreateActionImpl)
		tr := c.GetObject().(*authenticationv1.TokenRequest).DeepCopy()
		reqs = append(reqs, tr.DeepCopy())
		exp := ptr.Deref(tr.Spec.ExpirationSeconds, 3600)
		tr.Spec.ExpirationSeconds = &exp
		tr.Status = authenticationv1.TokenRequestStatus{
			Token:               c.GetNamespace() + "/" + c.Name + ":" + strings.Join(tr.Spec.Audiences, ","),
			ExpirationTimestamp: metav1.NewTime(now.Add(time.Duration(exp) * time.Second)),
		}
		return true, tr, nil
	})
	return client, &reqs
}

// withTokenSource registers the fixture's driver again in a registry
// that takes tokens from the token API.
func (f *fixture) withTokenSource(t *testing.T, tokens TokenSource) {
	t.Helper()
	obj, err := f.d.cfg.CSIDrivers.Get(context.Background(), testDriver, metav1.GetOptions{})
	must(t, err)
	client := fake.NewClientset(obj)
	f.d = New(Config{NodeName: "n1", RootDir: f.root, CSIDrivers: client.StorageV1().CSIDrivers(), Tokens: tokens})
	must(t, f.d.Register(context.Background(), pluginwatcher.Info{Name: testDriver, Endpoint: f.sock, Versions: []string{"1.0.0"}}))
}

// A CSIDriver's tokenRequests: one token per audience ("" for the
// apiserver's own), bound to the pod, of its service account, with the
// asked lifetime, in the publish request's volume context under
// upstream's key, as upstream's JSON of TokenRequestStatus by audience.
// The stage request gets none, as upstream's.
func TestTokenRequestsInVolumeContext(t *testing.T) {
	spec := *hostpathLike
	spec.TokenRequests = []storagev1.TokenRequest{{Audience: "vault", ExpirationSeconds: ptr.To[int64](600)}, {Audience: ""}}
	f := newFixture(t, &spec)
	now := time.Now().Truncate(time.Second)
	client, reqs := tokenAPI(now)
	f.withTokenSource(t, payload.New(client.CoreV1(), nil))
	pod := testPod("tk")
	vol := Volume{SpecName: "pv-t", Driver: testDriver, Handle: "vol-t"}
	_, err := f.d.SetUp(context.Background(), pod, f.podDir(pod), vol)
	must(t, err)

	pub := f.srv.last("NodePublishVolume").(*csipb.NodePublishVolumeRequest)
	var got map[string]authenticationv1.TokenRequestStatus
	must(t, json.Unmarshal([]byte(pub.VolumeContext["csi.storage.k8s.io/serviceAccount.tokens"]), &got))
	want := map[string]authenticationv1.TokenRequestStatus{
		"vault": {Token: "ns/sa:vault", ExpirationTimestamp: metav1.NewTime(now.Add(600 * time.Second))},
		"":      {Token: "ns/sa:", ExpirationTimestamp: metav1.NewTime(now.Add(3600 * time.Second))},
	}
	for aud, w := range want {
		g, ok := got[aud]
		if !ok || g.Token != w.Token || !g.ExpirationTimestamp.Time.Equal(w.ExpirationTimestamp.Time) {
			t.Errorf("token for audience %q: %+v, want %+v", aud, g, w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("tokens for audiences %v, want 2", got)
	}
	if pub.VolumeContext["csi.storage.k8s.io/pod.name"] != "p-tk" {
		t.Errorf("the pod's information lost beside the tokens: %v", pub.VolumeContext)
	}
	if len(*reqs) != 2 {
		t.Fatalf("token requests %d, want 2", len(*reqs))
	}
	for _, r := range *reqs {
		ref := r.Spec.BoundObjectRef
		if ref == nil || ref.Kind != "Pod" || ref.Name != "p-tk" || ref.UID != pod.UID {
			t.Errorf("token not bound to the pod: %+v", r.Spec)
		}
	}
	if stage := f.srv.last("NodeStageVolume").(*csipb.NodeStageVolumeRequest); stage.VolumeContext[tokensKey] != "" {
		t.Errorf("the stage request got tokens: %v", stage.VolumeContext)
	}
}

// Without an apiserver there are no tokens: a driver that wants them is
// not called, and the error says why.
func TestTokenRequestsWithoutAnAPIServerFail(t *testing.T) {
	spec := *hostpathLike
	spec.TokenRequests = []storagev1.TokenRequest{{Audience: "vault"}}
	f := newFixture(t, &spec)
	pod := testPod("nt")
	_, err := f.d.SetUp(context.Background(), pod, f.podDir(pod), Volume{SpecName: "v", Driver: testDriver, Inline: true})
	if err == nil || !strings.Contains(err.Error(), "service account tokens need an apiserver") {
		t.Errorf("set up without a token source: %v", err)
	}
	if f.srv.last("NodePublishVolume") != nil {
		t.Error("the driver was asked to publish without its tokens")
	}
}

// requiresRepublish: every setup of a published volume publishes it
// again (with fresh tokens, if due), never stages it again; without it a
// published volume is left alone; a driver not registered (after a
// restart) leaves it as it is.
func TestRequiresRepublishPublishesAgain(t *testing.T) {
	for _, republish := range []bool{true, false} {
		spec := *hostpathLike
		spec.RequiresRepublish = ptr.To(republish)
		f := newFixture(t, &spec)
		pod := testPod("rp")
		vol := Volume{SpecName: "pv-r", Driver: testDriver, Handle: "vol-r"}
		for range 3 {
			target, err := f.d.SetUp(context.Background(), pod, f.podDir(pod), vol)
			must(t, err)
			if want := filepath.Join(f.podDir(pod), "volumes/kubernetes.io~csi/pv-r/mount"); target != want {
				t.Errorf("target %s", target)
			}
		}
		if got := f.d.RequiresRepublish(context.Background(), testDriver); got != republish {
			t.Errorf("RequiresRepublish %v, want %v", got, republish)
		}
		publishes, stages := count(f.srv.calls(), "NodePublishVolume"), count(f.srv.calls(), "NodeStageVolume")
		if want := map[bool]int{true: 3, false: 1}[republish]; publishes != want || stages != 1 {
			t.Errorf("requiresRepublish %v: %d publishes and %d stages, want %d and 1", republish, publishes, stages, want)
		}
		unregistered := New(Config{NodeName: "n1", RootDir: f.root, CSIDrivers: f.d.cfg.CSIDrivers})
		before := len(f.srv.calls())
		if _, err := unregistered.SetUp(context.Background(), pod, f.podDir(pod), vol); err != nil || len(f.srv.calls()) != before {
			t.Errorf("requiresRepublish %v, driver not registered: %v, calls %v", republish, err, f.srv.calls()[before:])
		}
	}
}

// A republish whose fsGroup cannot be applied fails, and leaves the
// volume published: the pod's containers use it.
func TestFailedRepublishLeavesTheVolumePublished(t *testing.T) {
	spec := *hostpathLike
	spec.RequiresRepublish = ptr.To(true)
	spec.FSGroupPolicy = ptr.To(storagev1.FileFSGroupPolicy)
	f := newFixture(t, &spec)
	pod := testPod("fg")
	pod.Spec.SecurityContext = &v1.PodSecurityContext{FSGroup: ptr.To[int64](3456)}
	vol := Volume{SpecName: "pv-g", Driver: testDriver, Handle: "vol-g", AccessMode: v1.ReadWriteOnce}
	target, err := f.d.SetUp(context.Background(), pod, f.podDir(pod), vol)
	must(t, err)
	// A tree deeper than the walk goes: applying the group fails.
	must(t, os.MkdirAll(filepath.Join(f.srv.data, strings.Repeat("d/", 600)), 0o750))
	if _, err := f.d.SetUp(context.Background(), pod, f.podDir(pod), vol); err == nil || !strings.Contains(err.Error(), "applyFSGroup failed") {
		t.Fatalf("republish of a tree too deep: %v", err)
	}
	if !mountinfo.IsMountPoint(target) || count(f.srv.calls(), "NodeUnpublishVolume") != 0 {
		t.Errorf("a failed republish unpublished the volume: mounted %v, calls %v", mountinfo.IsMountPoint(target), f.srv.calls())
	}
}
