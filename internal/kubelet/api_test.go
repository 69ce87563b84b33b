package kubelet

import (
	"errors"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/skiff-sh/skiff/internal/container"
	"github.com/skiff-sh/skiff/internal/podsource"
	"github.com/skiff-sh/skiff/internal/server"
)

func TestAPIPodByNameAndUID(t *testing.T) {
	k := &Kubelet{pods: newPodManager()}
	k.pods.apply(podsource.Update{Source: podsource.File, Pods: []*v1.Pod{staticPodOf("etcd-node", "static-uid")}})
	k.pods.apply(podsource.Update{Source: podsource.APIServer, Pods: []*v1.Pod{mirrorPod("etcd-node", "mirror-uid"), apiPod("web", "web-uid", "1")}})
	for _, tc := range []struct {
		name, uid string
		wantUID   string // "" for not found
	}{
		{"etcd-node", "", "static-uid"},
		{"etcd-node", "static-uid", "static-uid"},
		{"etcd-node", "mirror-uid", "static-uid"}, // the apiserver's UID of a static pod
		{"etcd-node", "other-uid", ""},
		{"web", "", "web-uid"},
		{"web", "web-uid", "web-uid"},
		{"web", "mirror-uid", ""},
		{"nope", "", ""},
	} {
		p, ok := k.Pod("ns", tc.name, types.UID(tc.uid))
		if got := ""; ok {
			got = string(p.UID)
			if got != tc.wantUID {
				t.Errorf("Pod(%s, %q) = %s, want %q", tc.name, tc.uid, got, tc.wantUID)
			}
		} else if tc.wantUID != "" {
			t.Errorf("Pod(%s, %q) not found, want %s", tc.name, tc.uid, tc.wantUID)
		}
	}
}

func TestAPIPickPrefersRunning(t *testing.T) {
	cs := []container.Instance{
		{ID: "old", Name: "main", State: container.StateExited},
		{ID: "new", Name: "main", State: container.StateRunning},
		{ID: "side", Name: "sidecar", State: container.StateExited},
		{ID: "sb", State: container.StateRunning},
	}
	for name, want := range map[string]string{"main": "new", "sidecar": "side", "": "sb"} {
		if id, err := pick(cs, name, name); err != nil || id != want {
			t.Errorf("pick(%q) = %q, %v; want %q", name, id, err, want)
		}
	}
	if _, err := pick(cs, "nope", "container nope"); !errors.Is(err, server.ErrNotFound) {
		t.Errorf("missing container: %v, want ErrNotFound", err)
	}
}
