package file

import (
	"regexp"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/internal/podsource"
)

func TestBuildPod(t *testing.T) {
	pod, err := buildPod([]byte(goodYAML), "/etc/kubernetes/manifests/web.yaml", "node-1")
	if err != nil {
		t.Fatal(err)
	}
	if pod.Name != "web-node-1" || pod.Namespace != "default" || pod.Spec.NodeName != "node-1" {
		t.Errorf("got %s/%s on %q, want default/web-node-1 on node-1", pod.Namespace, pod.Name, pod.Spec.NodeName)
	}
	if !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(string(pod.UID)) {
		t.Errorf("UID %q is not a hex md5", pod.UID)
	}
	wantAnn := map[string]string{
		podsource.ConfigHashAnnotation:   string(pod.UID),
		podsource.ConfigSourceAnnotation: "file",
	}
	for k, v := range wantAnn {
		if pod.Annotations[k] != v {
			t.Errorf("annotation %s = %q, want %q", k, pod.Annotations[k], v)
		}
	}
	if pod.Labels["app"] != "web" {
		t.Errorf("labels = %v", pod.Labels)
	}
	if want := (v1.Toleration{Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute}); len(pod.Spec.Tolerations) != 1 || pod.Spec.Tolerations[0] != want {
		t.Errorf("tolerations = %+v, want the NoExecute toleration", pod.Spec.Tolerations)
	}
	// podspec.Default ran.
	if pod.Spec.RestartPolicy != v1.RestartPolicyAlways || pod.Spec.Containers[0].Ports[0].Protocol != v1.ProtocolTCP {
		t.Errorf("pod was not defaulted: %+v", pod.Spec)
	}
	if pod.Status.Phase != v1.PodPending {
		t.Errorf("phase = %q, want Pending", pod.Status.Phase)
	}
}

func TestBuildPodKeepsManifestUIDAndToleration(t *testing.T) {
	data := strings.Replace(goodYAML, "  name: web\n", "  name: web\n  uid: my-uid\n", 1) +
		"  tolerations:\n  - operator: Exists\n    effect: NoExecute\n"
	pod, err := buildPod([]byte(data), "/m/web.yaml", "n")
	if err != nil {
		t.Fatal(err)
	}
	if pod.UID != "my-uid" || pod.Annotations[podsource.ConfigHashAnnotation] != "my-uid" {
		t.Errorf("UID %q, hash %q; want the manifest's my-uid for both", pod.UID, pod.Annotations[podsource.ConfigHashAnnotation])
	}
	if len(pod.Spec.Tolerations) != 1 {
		t.Errorf("toleration added twice: %+v", pod.Spec.Tolerations)
	}
}

func TestBuildPodErrors(t *testing.T) {
	tests := []struct {
		name, data, node, wantErr string
	}{
		{"no name", strings.Replace(goodYAML, "  name: web\n", "", 1), "n", "metadata.name: Required value"},
		{"no image", strings.Replace(goodYAML, "image: nginx:1.27", `image: ""`, 1), "n", "spec.containers[0].image: Required value"},
		{"bad name", strings.Replace(goodYAML, "name: web", "name: Web", 1), "n", "metadata.name: Invalid value"},
		{"node name not a DNS subdomain", goodYAML, "Node_1", "spec.nodeName: Invalid value"},
		{"list", "apiVersion: v1\nkind: List\n", "n", "kind List is not supported"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := buildPod([]byte(tt.data), "/m/x.yaml", tt.node)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error = %v, want it to contain %q", err, tt.wantErr)
			}
		})
	}
}

// TestManifestUIDStable pins the UID of a known manifest. If this changes,
// every static pod restarts when nodes upgrade Skiff: change it only on
// purpose. The value is, independently of this code:
//
//	printf '%s' 'host:node-1file:/etc/kubernetes/manifests/web.yaml{"apiVersion":"v1","kind":"Pod",'\
//	'"metadata":{"labels":{"app":"web"},"name":"web"},"spec":{"containers":[{"image":"nginx:1.27",'\
//	'"name":"nginx","ports":[{"containerPort":80}]}]}}' | md5sum
func TestManifestUIDStable(t *testing.T) {
	const golden = "c266a73a310e6d3a26e599d61dba7dcc"
	uid := func(data, path, node string) string {
		t.Helper()
		pod, err := buildPod([]byte(data), path, node)
		if err != nil {
			t.Fatal(err)
		}
		return string(pod.UID)
	}
	const path, node = "/etc/kubernetes/manifests/web.yaml", "node-1"
	base := uid(goodYAML, path, node)
	if base != golden {
		t.Errorf("UID of the reference manifest = %s, want %s", base, golden)
	}

	// Formatting, comments, key order and JSON-vs-YAML do not matter.
	reformatted := `{"kind": "Pod", "apiVersion": "v1",
	  "spec": {"containers": [{"image": "nginx:1.27", "name": "nginx", "ports": [{"containerPort": 80}]}]},
	  "metadata": {"labels": {"app": "web"}, "name": "web"}}`
	if got := uid(reformatted, path, node); got != base {
		t.Errorf("reformatted manifest UID %s, want %s", got, base)
	}
	// Content, path and node do.
	for name, got := range map[string]string{
		"content": uid(strings.Replace(goodYAML, "nginx:1.27", "nginx:1.28", 1), path, node),
		"path":    uid(goodYAML, "/etc/kubernetes/manifests/web2.yaml", node),
		"node":    uid(goodYAML, path, "node-2"),
	} {
		if got == base {
			t.Errorf("changing the %s kept UID %s", name, got)
		}
	}
}
