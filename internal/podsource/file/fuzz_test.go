package file

import (
	"bytes"
	"strings"
	"testing"

	"github.com/skiff-sh/skiff/internal/podsource"
)

// FuzzBuildPod decodes arbitrary manifests. Whatever the input, it must
// not panic; a manifest it accepts must give a pod named for the node and
// bound to it, with a UID that depends only on the manifest's content:
// the manifest's canonical JSON decodes to the same canonical JSON, and
// builds the same pod UID, so reformatting a manifest never restarts its
// pod.
func FuzzBuildPod(f *testing.F) {
	f.Add([]byte(goodYAML))
	f.Add([]byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"j"},"spec":{"containers":[{"name":"c","image":"i"}]}}`))
	f.Add([]byte("apiVersion: v1\nkind: List\nitems: []\n"))
	f.Add([]byte("---\n# only a comment\n---\n"))
	f.Add([]byte("apiVersion: v1\nkind: Pod\nmetadata: {name: a, name: b}\n"))
	f.Add([]byte("apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec: {containers: [{name: c, image: i}], bogus: 1}\n"))
	f.Add([]byte("apiVersion: v1\nkind: Pod\nmetadata: {name: a, uid: fixed}\nspec: {containers: [{name: c, image: i, resources: {limits: {cpu: 1e3}}}]}\n"))
	f.Add([]byte("a: &a [*a, *a]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		const path, node = "/etc/kubernetes/manifests/x.yaml", "Node-1"
		pod, err := buildPod(data, path, node)
		if err != nil {
			if pod != nil {
				t.Fatalf("an error (%v) came with a pod", err)
			}
			return
		}
		if !strings.HasSuffix(pod.Name, "-node-1") || pod.Spec.NodeName != node {
			t.Errorf("pod %q on %q: want the name suffixed with the node and the node bound", pod.Name, pod.Spec.NodeName)
		}
		if pod.UID == "" || pod.Annotations[podsource.ConfigHashAnnotation] != string(pod.UID) ||
			pod.Annotations[podsource.ConfigSourceAnnotation] != podsource.File {
			t.Errorf("UID %q and annotations %v do not name the file source", pod.UID, pod.Annotations)
		}
		_, canonical, err := decodeManifest(data)
		if err != nil {
			t.Fatalf("buildPod accepted what decodeManifest refuses: %v", err)
		}
		_, again, err := decodeManifest(canonical)
		if err != nil || !bytes.Equal(again, canonical) {
			t.Fatalf("canonical form not stable: %v\n%s\n%s", err, canonical, again)
		}
		reformatted, err := buildPod(canonical, path, node)
		if err != nil || reformatted.UID != pod.UID {
			t.Errorf("the manifest's canonical JSON gives UID %v (%v), the manifest %v", reformatted, err, pod.UID)
		}
	})
}
