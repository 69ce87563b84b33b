//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The kube-api-access-* volume the
// apiserver injects works: the container sees the namespace and CA files,
// and its token is one the apiserver accepts, bound to this pod.
func TestServiceAccountTokenVolume(t *testing.T) {
	cn := sharedNode(t)
	p := busyboxPod("sa", `while true; do
  echo "ns=$(cat /var/run/secrets/kubernetes.io/serviceaccount/namespace) ca=$(grep -c 'BEGIN CERTIFICATE' /var/run/secrets/kubernetes.io/serviceaccount/ca.crt) token=$(wc -c < /var/run/secrets/kubernetes.io/serviceaccount/token)"
  sleep 1
done`)
	p.Spec.AutomountServiceAccountToken = nil // let the apiserver inject its volume
	created := cn.createPod(t, p)
	var volName string
	for _, v := range created.Spec.Volumes {
		if strings.HasPrefix(v.Name, "kube-api-access-") && v.Projected != nil {
			volName = v.Name
		}
	}
	if volName == "" {
		t.Fatalf("the apiserver injected no kube-api-access volume: %+v", created.Spec.Volumes)
	}
	cn.waitPod(t, cn.ns, "sa", 60*time.Second, "ready", isReady)

	logFile := filepath.Join(podLogsRoot, cn.ns+"_sa_"+string(created.UID), "main", "0.log")
	waitFor(t, 15*time.Second, "service account files inside the container", func() (bool, error) {
		b, _ := os.ReadFile(logFile)
		return strings.Contains(string(b), "ns="+cn.ns+" ca=1 token="), nil
	})

	token, err := os.ReadFile(filepath.Join(cn.root, "pods", string(created.UID), "volumes", "kubernetes.io~projected", volName, "token"))
	must(t, err)
	review, err := cn.admin.AuthenticationV1().TokenReviews().Create(cn.ctx(), &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: string(token)},
	}, metav1.CreateOptions{})
	must(t, err)
	st := review.Status
	if !st.Authenticated || st.User.Username != "system:serviceaccount:"+cn.ns+":default" {
		t.Fatalf("token review: %+v", st)
	}
	if pods := st.User.Extra["authentication.kubernetes.io/pod-name"]; len(pods) != 1 || pods[0] != "sa" {
		t.Errorf("token is not bound to the pod: extra %v", st.User.Extra)
	}
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	if !strings.Contains(string(mounts), filepath.Join(string(created.UID), "volumes", "kubernetes.io~projected", volName)) {
		t.Error("the token volume is not on a tmpfs of its own")
	}
}
