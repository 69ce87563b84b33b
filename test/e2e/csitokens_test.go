//go:build e2e

package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// publishContext is the volume context of a NodePublishVolume request
// line of the driver's log.
func publishContext(t *testing.T, line string) map[string]string {
	t.Helper()
	_, js, ok := strings.Cut(line, "GRPC request: ")
	if !ok {
		t.Fatalf("no request in %q", line)
	}
	var req struct {
		VolumeContext map[string]string `json:"volume_context"`
	}
	must(t, json.Unmarshal([]byte(js), &req))
	return req.VolumeContext
}

// A CSIDriver with tokenRequests and requiresRepublish, with the real
// hostpath driver (which logs every request): NodePublishVolume gets, in
// the volume context, a token of the pod's service account for the
// audience, bound to the pod and with the asked lifetime, which the
// apiserver authenticates; while the pod runs, every sync of it
// publishes the volume again (sync every 3 s here), never staging it
// again.
func TestCSITokenRequestsAndRequiresRepublish(t *testing.T) {
	n := newCSINode(t, false)
	audience := "skiff-e2e-" + n.ns
	drv, err := n.admin.StorageV1().CSIDrivers().Get(n.ctx(), n.driver, metav1.GetOptions{})
	must(t, err)
	drv.Spec.TokenRequests = []storagev1.TokenRequest{{Audience: audience, ExpirationSeconds: ptr.To[int64](3600)}}
	drv.Spec.RequiresRepublish = ptr.To(true)
	_, err = n.admin.StorageV1().CSIDrivers().Update(n.ctx(), drv, metav1.UpdateOptions{})
	must(t, err)
	n.stop()
	n.args = append(n.args, "--sync-frequency=3s")
	n.start()
	n.register(t)

	_, p := n.csiClaimPod(t, "holder", sleeper)
	p.Spec.RestartPolicy = v1.RestartPolicyAlways
	n.createPod(t, p)
	n.waitPod(t, n.ns, "holder", 60*time.Second, "Running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })
	asked := time.Now()

	publishes := n.grpcRequests(t, "/csi.v1.Node/NodePublishVolume")
	var tokens map[string]authenticationv1.TokenRequestStatus
	must(t, json.Unmarshal([]byte(publishContext(t, publishes[0])["csi.storage.k8s.io/serviceAccount.tokens"]), &tokens))
	tok, ok := tokens[audience]
	if !ok || len(tokens) != 1 {
		t.Fatalf("tokens in the volume context: %v", tokens)
	}
	if exp := tok.ExpirationTimestamp.Time; exp.Before(asked.Add(50*time.Minute)) || exp.After(asked.Add(61*time.Minute)) {
		t.Errorf("token expires at %v, want about an hour after %v", exp, asked)
	}
	review, err := n.admin.AuthenticationV1().TokenReviews().Create(n.ctx(), &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: tok.Token, Audiences: []string{audience}}}, metav1.CreateOptions{})
	must(t, err)
	st := review.Status
	if !st.Authenticated || st.User.Username != "system:serviceaccount:"+n.ns+":default" ||
		strings.Join(st.User.Extra["authentication.kubernetes.io/pod-name"], ",") != "holder" {
		t.Errorf("the token's review: %+v", st)
	}

	waitFor(t, 60*time.Second, "the volume published again on later syncs", func() (bool, error) {
		return len(n.grpcRequests(t, "/csi.v1.Node/NodePublishVolume")) >= 3, nil
	})
	publishes = n.grpcRequests(t, "/csi.v1.Node/NodePublishVolume")
	if last := publishContext(t, publishes[len(publishes)-1]); last["csi.storage.k8s.io/serviceAccount.tokens"] == "" {
		t.Errorf("a republish without the tokens: %v", last)
	}
	if got := n.grpcRequests(t, "/csi.v1.Node/NodeStageVolume"); len(got) != 1 {
		t.Errorf("NodeStageVolume %d times, want once", len(got))
	}
	n.waitPod(t, n.ns, "holder", 5*time.Second, "still Running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })
}
