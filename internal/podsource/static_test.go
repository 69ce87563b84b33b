package podsource

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func staticTestPod() *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: map[string]string{"app": "web"}},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "busybox"}}},
		Status:     v1.PodStatus{Phase: v1.PodRunning, Message: "from the manifest"},
	}
}

// Both static sources get the same defaults; only pods from files get the
// NoExecute toleration, as upstream's applyDefaults (isFile).
func TestMakeStaticPerSource(t *testing.T) {
	noExecute := v1.Toleration{Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute}
	for _, tt := range []struct {
		source      string
		tolerations []v1.Toleration
	}{
		{File, []v1.Toleration{noExecute}},
		{HTTP, nil},
	} {
		t.Run(tt.source, func(t *testing.T) {
			pod := staticTestPod()
			if err := MakeStatic(pod, tt.source, "node-1", "the-uid"); err != nil {
				t.Fatal(err)
			}
			if pod.Name != "web-node-1" || pod.Namespace != "default" || pod.Spec.NodeName != "node-1" {
				t.Errorf("got %s/%s on %q, want default/web-node-1 on node-1", pod.Namespace, pod.Name, pod.Spec.NodeName)
			}
			if pod.UID != "the-uid" || pod.Annotations[ConfigHashAnnotation] != "the-uid" ||
				pod.Annotations[ConfigSourceAnnotation] != tt.source {
				t.Errorf("UID %q, annotations %v", pod.UID, pod.Annotations)
			}
			if _, ok := pod.Annotations[ConfigSeenAnnotation]; ok {
				t.Errorf("config.seen set: it is the caller's")
			}
			if pod.Spec.RestartPolicy != v1.RestartPolicyAlways || pod.Spec.DNSPolicy != v1.DNSClusterFirst {
				t.Errorf("not defaulted: restartPolicy %q, dnsPolicy %q", pod.Spec.RestartPolicy, pod.Spec.DNSPolicy)
			}
			if pod.Status.Phase != v1.PodPending || pod.Status.Message != "" {
				t.Errorf("status %+v, want only phase Pending", pod.Status)
			}
			if len(pod.Spec.Tolerations) != len(tt.tolerations) ||
				(len(tt.tolerations) == 1 && pod.Spec.Tolerations[0] != tt.tolerations[0]) {
				t.Errorf("tolerations %+v, want %+v", pod.Spec.Tolerations, tt.tolerations)
			}
		})
	}
}

func TestMakeStaticKeepsWhatThePodSays(t *testing.T) {
	pod := staticTestPod()
	pod.UID, pod.Namespace = "manifest-uid", "kube-system"
	pod.Spec.Tolerations = []v1.Toleration{{Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute}}
	if err := MakeStatic(pod, File, "n", "hashed-uid"); err != nil {
		t.Fatal(err)
	}
	if pod.UID != "manifest-uid" || pod.Annotations[ConfigHashAnnotation] != "manifest-uid" || pod.Namespace != "kube-system" {
		t.Errorf("UID %q, hash %q, namespace %q; want the manifest's", pod.UID, pod.Annotations[ConfigHashAnnotation], pod.Namespace)
	}
	if len(pod.Spec.Tolerations) != 1 {
		t.Errorf("toleration added again: %+v", pod.Spec.Tolerations)
	}
}

func TestMakeStaticRefuses(t *testing.T) {
	for name, tt := range map[string]struct {
		mutate  func(*v1.Pod)
		source  string
		wantErr string
	}{
		"no name":     {func(p *v1.Pod) { p.Name = "" }, File, "metadata.name: Required value"},
		"invalid pod": {func(p *v1.Pod) { p.Spec.Containers = nil }, HTTP, "spec.containers: Required value"},
		"api source":  {func(*v1.Pod) {}, APIServer, "not a static pod source"},
		"bad label":   {func(p *v1.Pod) { p.Labels["a b"] = "x" }, File, "metadata.labels"},
	} {
		t.Run(name, func(t *testing.T) {
			pod := staticTestPod()
			tt.mutate(pod)
			err := MakeStatic(pod, tt.source, "n", "u")
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error %v, want it to contain %q", err, tt.wantErr)
			}
		})
	}
}
