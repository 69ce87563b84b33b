//go:build e2e

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A container uses the token of its injected
// kube-api-access volume (and its ca.crt, verifying the apiserver) to
// list the pods of its own namespace through the apiserver: refused
// (403, as its service account) until an RBAC Role allows it, then
// answered. The client is a small static Go program (testdata/kubeget)
// mounted into a busybox container: busybox's wget cannot verify TLS
// certificates. It dials the apiserver's advertise address, since the
// test cluster runs no kube-proxy for the kubernetes Service VIP.
func TestPodListsPodsWithItsServiceAccountToken(t *testing.T) {
	cn := sharedNode(t)
	bin := filepath.Join(t.TempDir(), "kubeget")
	build := exec.Command("go", "build", "-o", bin, "./testdata/kubeget")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building kubeget: %v\n%s", err, out)
	}

	p := busyboxPod("sa-client", "while true; do kubeget; sleep 1; done")
	p.Spec.AutomountServiceAccountToken = nil // the apiserver injects kube-api-access-*
	fileType := v1.HostPathFile
	p.Spec.Volumes = []v1.Volume{{Name: "kubeget", VolumeSource: v1.VolumeSource{
		HostPath: &v1.HostPathVolumeSource{Path: bin, Type: &fileType}}}}
	c := &p.Spec.Containers[0]
	c.VolumeMounts = []v1.VolumeMount{{Name: "kubeget", MountPath: "/bin/kubeget", ReadOnly: true}}
	c.Env = []v1.EnvVar{{Name: "APISERVER", Value: strings.TrimPrefix(cn.c.APIServerURL(), "https://")}}
	created := cn.createPod(t, p)
	cn.waitPod(t, cn.ns, p.Name, 60*time.Second, "ready", isReady)
	logFile := filepath.Join(podLogsRoot, cn.ns+"_"+p.Name+"_"+string(created.UID), "main", "0.log")
	lastLine := func() string {
		b, _ := os.ReadFile(logFile)
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		return lines[len(lines)-1]
	}

	// Authenticated as the pod's service account, not yet authorized.
	sa := "system:serviceaccount:" + cn.ns + ":default"
	waitFor(t, 20*time.Second, "403 for the service account", func() (bool, error) {
		l := lastLine()
		return strings.Contains(l, "HTTP 403") && strings.Contains(l, sa), nil
	})

	ctx := cn.ctx()
	_, err := cn.admin.RbacV1().Roles(cn.ns).Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "pod-reader"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list"}}},
	}, metav1.CreateOptions{})
	must(t, err)
	_, err = cn.admin.RbacV1().RoleBindings(cn.ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "pod-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "pod-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "default", Namespace: cn.ns}},
	}, metav1.CreateOptions{})
	must(t, err)
	waitFor(t, 30*time.Second, "the pod listing its namespace's pods", func() (bool, error) {
		// CRI log lines: "<time> stdout F <line>".
		return strings.HasSuffix(lastLine(), " F kubeget ok: namespace="+cn.ns+" pods="+p.Name), nil
	})
}
