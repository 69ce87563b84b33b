package file

import (
	"strings"
	"testing"
)

const goodYAML = `# a static pod
apiVersion: v1
kind: Pod
metadata:
  name: web
  labels: {app: web}
spec:
  containers:
  - name: nginx
    image: nginx:1.27
    ports:
    - containerPort: 80
`

func TestDecodeManifest(t *testing.T) {
	tests := []struct {
		name    string
		data    string
		wantErr string // substring; "" means success
	}{
		{name: "yaml", data: goodYAML},
		{name: "json", data: `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web"},"spec":{"containers":[{"name":"c","image":"x"}]}}`},
		{name: "leading separator and trailing comment doc", data: "---\n" + goodYAML + "---\n# nothing\n"},
		{name: "empty", data: "", wantErr: "manifest is empty"},
		{name: "only comments", data: "# nothing here\n", wantErr: "manifest is empty"},
		{name: "bad yaml", data: "apiVersion: v1\nkind: Pod\nmetadata: [unclosed\n", wantErr: "invalid YAML"},
		{name: "not an object", data: "- a\n- b\n", wantErr: "not a YAML or JSON object"},
		{name: "unknown field", data: strings.Replace(goodYAML, "    image:", "    imagePolicy: x\n    image:", 1),
			wantErr: `unknown field "spec.containers[0].imagePolicy"`},
		{name: "wrong case field", data: strings.Replace(goodYAML, "    image:", "    Image:", 1),
			wantErr: `unknown field "spec.containers[0].Image"`},
		{name: "duplicate key", data: strings.Replace(goodYAML, "  name: web\n", "  name: web\n  name: web2\n", 1),
			wantErr: "invalid YAML"},
		{name: "wrong type", data: strings.Replace(goodYAML, "containerPort: 80", "containerPort: eighty", 1),
			wantErr: "decoding pod"},
		{name: "no kind", data: "apiVersion: v1\nmetadata: {name: x}\n", wantErr: "no kind"},
		{name: "List", data: "apiVersion: v1\nkind: List\nitems: []\n", wantErr: "kind List is not supported: put each pod in its own manifest file"},
		{name: "PodList", data: "apiVersion: v1\nkind: PodList\nitems: []\n", wantErr: "kind PodList is not supported"},
		{name: "Deployment", data: "apiVersion: apps/v1\nkind: Deployment\n", wantErr: "kind Deployment is not supported"},
		{name: "wrong apiVersion", data: "apiVersion: v2\nkind: Pod\n", wantErr: `apiVersion "v2" is not supported`},
		{name: "two documents", data: goodYAML + "---\n" + goodYAML, wantErr: "holds 2 YAML documents"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod, _, err := decodeManifest([]byte(tt.data))
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				if pod.Name != "web" {
					t.Fatalf("decoded name %q, want web", pod.Name)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error = %v, want it to contain %q", err, tt.wantErr)
			}
		})
	}
}
