package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const header = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLoadErrors(t *testing.T) {
	tests := []struct {
		name    string
		file    string
		content string
		// every string must appear in the error
		want []string
	}{
		{
			name:    "unknown field",
			content: header + "readOnlyPrt: 0\n",
			want:    []string{`unknown field "readOnlyPrt"`},
		},
		{
			name:    "unknown nested field",
			content: header + "authentication:\n  webhook:\n    enabeld: true\n",
			want:    []string{`unknown field "authentication.webhook.enabeld"`},
		},
		{
			name:    "field names are case sensitive",
			content: header + "Port: 10250\n",
			want:    []string{`unknown field "Port"`},
		},
		{
			name:    "all strict errors are reported",
			content: header + "foo: 1\nbar: 2\n",
			want:    []string{`unknown field "foo"`, `unknown field "bar"`},
		},
		{
			name:    "duplicate field yaml",
			content: header + "port: 1\nport: 2\n",
			want:    []string{`duplicate field "port" (line 4)`},
		},
		{
			name:    "duplicate field json",
			file:    "c.json",
			content: `{"apiVersion":"kubelet.config.k8s.io/v1beta1","kind":"KubeletConfiguration","port":1,"port":2}`,
			want:    []string{`duplicate field "port"`},
		},
		{
			name:    "wrong type",
			content: header + "port: abc\n",
			want:    []string{`field "port": cannot unmarshal string into int32`},
		},
		{
			name:    "wrong nested type",
			content: header + "authentication:\n  webhook:\n    cacheTTL: [1]\n",
			want:    []string{`field "authentication.webhook.cacheTTL": cannot unmarshal array into string`},
		},
		{
			name:    "bad duration names the field",
			content: header + "maxPods: 5\nsyncFrequency: soon\n",
			want:    []string{`field "syncFrequency"`, `invalid duration "soon"`},
		},
		{
			name:    "every bad field is reported alongside unknown ones",
			content: header + "readOnlyPrt: 1\nport: x\nsyncFrequency: soon\n",
			want: []string{`unknown field "readOnlyPrt"`, `field "port": cannot unmarshal string into int32`,
				`field "syncFrequency"`},
		},
		{
			name:    "wrong kind",
			content: "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeProxyConfiguration\n",
			want:    []string{`kind "KubeProxyConfiguration" is not supported, want "KubeletConfiguration"`},
		},
		{
			name:    "wrong apiVersion",
			content: "apiVersion: kubelet.config.k8s.io/v1alpha1\nkind: KubeletConfiguration\n",
			want:    []string{`apiVersion "kubelet.config.k8s.io/v1alpha1" is not supported, want "kubelet.config.k8s.io/v1beta1"`},
		},
		{
			name:    "missing apiVersion and kind",
			content: "port: 10250\n",
			want:    []string{"apiVersion is missing", "kind is missing"},
		},
		{
			name:    "empty file",
			content: "\n  \n",
			want:    []string{"file is empty"},
		},
		{
			name:    "not yaml",
			content: header + "port: [\n",
			want:    []string{"parse:"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name := tt.file
			if name == "" {
				name = "c.yaml"
			}
			path := writeFile(t, name, tt.content)
			c, err := Load(path)
			if err == nil {
				t.Fatalf("Load succeeded, want error; got %+v", c)
			}
			msg := err.Error()
			for _, w := range append([]string{"config file " + path + ": "}, tt.want...) {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not contain %q", msg, w)
				}
			}
		})
	}
}

func TestLoadExampleMessage(t *testing.T) {
	path := writeFile(t, "x.yaml", header+"readOnlyPrt: 0\n")
	_, err := Load(path)
	want := "config file " + path + `: unknown field "readOnlyPrt"`
	if err == nil || err.Error() != want {
		t.Fatalf("got %v, want %q", err, want)
	}
}

func TestLoadMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nope.yaml")
	_, err := Load(path)
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), path) {
		t.Fatalf("got %v, want a not-exist error naming %s", err, path)
	}
}

func TestLoadValid(t *testing.T) {
	tests := []struct {
		name, file, content string
	}{
		{
			name:    "yaml",
			file:    "c.yaml",
			content: header + "port: 10260\nsyncFrequency: 30s\nevictionHard:\n  memory.available: 1Gi\n",
		},
		{
			name:    "json",
			file:    "c.json",
			content: `{"apiVersion":"kubelet.config.k8s.io/v1beta1","kind":"KubeletConfiguration","port":10260,"syncFrequency":"30s","evictionHard":{"memory.available":"1Gi"}}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Load(writeFile(t, tt.file, tt.content))
			if err != nil {
				t.Fatal(err)
			}
			if c.Port != 10260 || c.SyncFrequency.Duration != 30*time.Second || c.EvictionHard["memory.available"] != "1Gi" {
				t.Errorf("decoded wrongly: port=%d sync=%v evictionHard=%v", c.Port, c.SyncFrequency, c.EvictionHard)
			}
			// Load must not apply defaults.
			if c.HealthzPort != nil || c.MaxPods != 0 {
				t.Errorf("Load applied defaults: healthzPort=%v maxPods=%d", c.HealthzPort, c.MaxPods)
			}
		})
	}
}

func TestDecodeEqualsLoad(t *testing.T) {
	if _, err := Decode([]byte(header + "bogus: 1\n")); err == nil || !strings.Contains(err.Error(), `unknown field "bogus"`) {
		t.Fatalf("Decode: got %v", err)
	}
}

func TestLoadResolvesRelativePaths(t *testing.T) {
	path := writeFile(t, "c.yaml", header+
		"staticPodPath: manifests\ntlsCertFile: /abs/cert.pem\ntlsPrivateKeyFile: key.pem\nresolvConf: \"\"\n")
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Dir(path)
	if c.StaticPodPath != filepath.Join(dir, "manifests") {
		t.Errorf("staticPodPath = %q", c.StaticPodPath)
	}
	if c.TLSCertFile != "/abs/cert.pem" || c.TLSPrivateKeyFile != filepath.Join(dir, "key.pem") {
		t.Errorf("tls files = %q, %q", c.TLSCertFile, c.TLSPrivateKeyFile)
	}
	if c.ResolverConfig == nil || *c.ResolverConfig != "" {
		t.Errorf("empty resolvConf changed to %v", c.ResolverConfig)
	}
}
