//go:build e2e

package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// A required ConfigMap or key that is missing keeps the container waiting
// with CreateContainerConfigError and upstream's message; once the object
// exists, the container starts.
func TestEnvMissingReference(t *testing.T) {
	cn := sharedNode(t)
	ctx := context.Background()
	no := false
	ref := func(name, key string) *v1.EnvVarSource {
		return &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: name}, Key: key, Optional: &no}}
	}
	_, err := cn.admin.CoreV1().ConfigMaps(cn.ns).Create(ctx, &v1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "present"}, Data: map[string]string{"a": "1"},
	}, metav1.CreateOptions{})
	must(t, err)
	cases := []struct{ pod, cm, key, msg string }{
		{"no-cm", "later", "k", `configmap "later" not found`},
		{"no-key", "present", "k", "couldn't find key k in ConfigMap " + cn.ns + "/present"},
	}
	for _, c := range cases {
		p := busyboxPod(c.pod, sleeper)
		p.Spec.Containers[0].Env = []v1.EnvVar{{Name: "X", ValueFrom: ref(c.cm, c.key)}}
		cn.createPod(t, p)
	}
	for _, c := range cases {
		cn.waitPod(t, cn.ns, c.pod, 60*time.Second, "CreateContainerConfigError: "+c.msg, func(p *v1.Pod) bool {
			for _, cs := range p.Status.ContainerStatuses {
				if w := cs.State.Waiting; w != nil && w.Reason == "CreateContainerConfigError" && w.Message == c.msg {
					return true
				}
			}
			return false
		})
	}
	// The missing ConfigMap appears: the next sync starts the container.
	_, err = cn.admin.CoreV1().ConfigMaps(cn.ns).Create(ctx, &v1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "later"}, Data: map[string]string{"k": "v"},
	}, metav1.CreateOptions{})
	must(t, err)
	cn.waitPod(t, cn.ns, "no-cm", 60*time.Second, "running once the ConfigMap exists", isReady)
	if p := cn.getPod(t, "no-key"); isReady(p) {
		t.Error("no-key must still wait for its key")
	}
}

// A static pod runs without the apiserver, so one that needs a ConfigMap
// is refused when its manifest is read, as upstream 1.34
// (PreventStaticPodAPIReferences): it never runs, and the log names its
// file. The pod beside it runs.
func TestStaticPodReferringToConfigMapIsRefused(t *testing.T) {
	n := newNode(t)
	n.start()
	n.writeManifest("cm.yaml", staticPod("needs-cm", sleeper, "")+`    env:
    - name: X
      valueFrom:
        configMapKeyRef: {name: conf, key: k}
`)
	n.writeManifest("plain.yaml", staticPod("plain", sleeper, ""))
	n.waitRunning("plain-"+nodeName, 30*time.Second)
	waitFor(t, 10*time.Second, "cm.yaml reported in the log", func() (bool, error) {
		return strings.Contains(n.log(), "cm.yaml"), nil
	})
	if p, err := n.pod("needs-cm-" + nodeName); err != nil || p != nil {
		t.Errorf("the pod that needs a ConfigMap must not exist: %v, %v", p, err)
	}
	sbs, err := runtimeSvc.ListPodSandbox(t.Context(), &runtimeapi.PodSandboxFilter{
		LabelSelector: map[string]string{"io.kubernetes.pod.name": "needs-cm-" + nodeName}})
	must(t, err)
	if len(sbs) > 0 {
		t.Errorf("the refused pod has %d sandboxes", len(sbs))
	}
}

// Image ENTRYPOINT and CMD as documented: no command and no args run the
// image's; args alone replace CMD; a command replaces both.
func TestEntrypointAndCmdFromImage(t *testing.T) {
	const image = "skiff.local/entrypoint-test:1"
	importImage(t, image, "--add", "/bin/busybox:/bin/busybox", "--busybox-links",
		"--entrypoint", "/bin/echo", "--entrypoint", "EP", "--cmd", "CMD-DEFAULT", "--env", "FROM_IMAGE=img")
	n := newNode(t)
	n.start()
	pod := `apiVersion: v1
kind: Pod
metadata:
  name: ep
  labels: {` + testLabel + `: "true"}
spec:
  restartPolicy: Never
  containers:
  - {name: defaults, image: ` + image + `, imagePullPolicy: Never}
  - {name: args, image: ` + image + `, imagePullPolicy: Never, args: ["A1", "$(V)"], env: [{name: V, value: v}]}
  - {name: command, image: ` + image + `, imagePullPolicy: Never, command: ["/bin/echo", "C1"]}
  - {name: both, image: ` + image + `, imagePullPolicy: Never, command: ["/bin/echo", "C1"], args: ["A1"]}
  - {name: env, image: ` + image + `, imagePullPolicy: Never, command: ["/bin/env"]}
`
	n.writeManifest("ep.yaml", pod)
	var p *v1.Pod
	waitFor(t, 60*time.Second, "pod ep Succeeded", func() (bool, error) {
		var err error
		p, err = n.pod("ep-" + nodeName)
		return err == nil && p != nil && p.Status.Phase == v1.PodSucceeded, nil
	})
	dir := filepath.Join(podLogsRoot, "default_"+p.Name+"_"+string(p.UID))
	want := map[string]string{"defaults": "EP CMD-DEFAULT", "args": "EP A1 v", "command": "C1", "both": "C1 A1"}
	for name, w := range want {
		if got := containerLogLines(t, filepath.Join(dir, name, "0.log")); len(got) != 1 || got[0] != w {
			t.Errorf("container %s printed %q, want %q", name, got, w)
		}
	}
	if env := containerLogEnv(t, filepath.Join(dir, "env", "0.log")); env["FROM_IMAGE"] != "img" {
		t.Errorf("the image's ENV must reach the container: FROM_IMAGE = %q", env["FROM_IMAGE"])
	}
}

// importImage builds an image with hack/ociimage and imports it into the
// dev containerd, as hack/containerd.sh does for busybox.
func importImage(t *testing.T, name string, args ...string) {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "ociimage")
	run := func(name string, args ...string) {
		t.Helper()
		out, err := exec.Command(name, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
	}
	run("go", "build", "-o", bin, "../../hack/ociimage")
	tar := filepath.Join(dir, "image.tar")
	run(bin, append([]string{"--name", name, "-o", tar}, args...)...)
	// The dev containerd's snapshotter: native when its root is on
	// overlayfs, else overlayfs (hack/containerd.sh; both versions' roots
	// are in one directory).
	snap := "overlayfs"
	if out, err := exec.Command("stat", "-f", "-c", "%T", "/var/lib/skiff-dev").Output(); err == nil && strings.TrimSpace(string(out)) == "overlayfs" {
		snap = "native"
	}
	run(ctrBin(t), "--address", strings.TrimPrefix(criEndpoint, "unix://"), "-n", "k8s.io", "images", "import", "--snapshotter", snap, tar)
	_ = os.Remove(tar)
}
