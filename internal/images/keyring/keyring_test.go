package keyring

import (
	"encoding/base64"
	"reflect"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func jsonSecret(name, auths string) v1.Secret {
	return v1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
		Type:       v1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{v1.DockerConfigJsonKey: []byte(`{"auths":` + auths + `}`)},
	}
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// users lists the usernames of the credentials, in order.
func users(cs []Credential) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Username)
	}
	return out
}

func TestLookup(t *testing.T) {
	secrets := []v1.Secret{
		jsonSecret("a", `{
			"registry.example.com": {"username": "host", "password": "p"},
			"https://registry.example.com/v2/team": {"username": "team", "password": "p"},
			"registry.example.com/team/app": {"username": "app", "password": "p"},
			"*.corp.example": {"auth": "`+b64("wild:card")+`"},
			"127.0.0.1:5000": {"auth": "`+strings.TrimRight(b64("local:pw"), "=")+`"},
			"https://index.docker.io/v1/": {"username": "hub", "password": "p"}
		}`),
		{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "old"},
			Type:       v1.SecretTypeDockercfg,
			Data:       map[string][]byte{v1.DockerConfigKey: []byte(`{"registry.example.com": {"username": "legacy", "password": "p"}}`)},
		},
		// Ignored: wrong type for its key, and an opaque secret.
		{Type: v1.SecretTypeDockercfg, Data: map[string][]byte{v1.DockerConfigJsonKey: []byte(`{}`)}},
		{Type: v1.SecretTypeOpaque, Data: map[string][]byte{"x": []byte("y")}},
	}
	k, err := FromSecrets(secrets)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		repo string
		want []string
	}{
		// Every matching key applies, the most specific first; a key's
		// credentials keep the secrets' order.
		{"registry.example.com/team/app", []string{"app", "team", "host", "legacy"}},
		{"registry.example.com/team/other", []string{"team", "host", "legacy"}},
		{"registry.example.com/solo", []string{"host", "legacy"}},
		// The port is part of the host.
		{"registry.example.com:443/solo", nil},
		{"127.0.0.1:5000/x/y", []string{"local"}},
		{"127.0.0.1:5001/x/y", nil},
		// A glob matches one label, not several.
		{"build.corp.example/img", []string{"wild"}},
		{"a.build.corp.example/img", nil},
		{"corp.example/img", nil},
		// Docker Hub credentials for Docker Hub images only.
		{"docker.io/library/busybox", []string{"hub"}},
		{"quay.io/x/y", nil},
	} {
		if got := users(k.Lookup(tt.repo)); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Lookup(%q) = %v, want %v", tt.repo, got, tt.want)
		}
	}
	if c := k.Lookup("build.corp.example/img"); c[0].Password != "card" || c[0].Source != "ns/a" {
		t.Errorf("decoded auth = %+v, want wild/card from ns/a", c[0])
	}
	if c := k.Lookup("127.0.0.1:5000/x"); c[0].Password != "pw" {
		t.Errorf("unpadded auth decoded to %+v", c[0])
	}
}

func TestFromSecretsErrors(t *testing.T) {
	for name, s := range map[string]v1.Secret{
		"not json":       jsonSecret("bad", `nope`),
		"auth no colon":  jsonSecret("bad", `{"r.io": {"auth": "`+b64("nocolon")+`"}}`),
		"auth no base64": jsonSecret("bad", `{"r.io": {"auth": "%%%"}}`),
	} {
		_, err := FromSecrets([]v1.Secret{s})
		if err == nil || !strings.Contains(err.Error(), "ns/bad") {
			t.Errorf("%s: err = %v, want an error naming ns/bad", name, err)
		}
	}
	var nilKeyring *Keyring
	if c := nilKeyring.Lookup("docker.io/library/busybox"); c != nil {
		t.Errorf("nil keyring returned %v", c)
	}
}

func TestDockerHubDefault(t *testing.T) {
	k, err := FromSecrets([]v1.Secret{jsonSecret("hub", `{"index.docker.io": {"username": "u", "password": "p"}}`)})
	if err != nil {
		t.Fatal(err)
	}
	for repo, want := range map[string]bool{
		"docker.io/library/busybox": true,
		"docker.io/user/app":        true,
		"ghcr.io/user/app":          false,
		"localhost:5000/app":        false,
	} {
		if got := len(k.Lookup(repo)) > 0; got != want {
			t.Errorf("Lookup(%q) found=%v, want %v", repo, got, want)
		}
	}
}

func TestMatchesAndValidatePattern(t *testing.T) {
	for _, tt := range []struct {
		pattern, repo string
		want          bool
	}{
		{"*.registry.example", "eu.registry.example/team/app", true},
		{"*.registry.example", "registry.example/app", false},
		{"127.0.0.1:5000", "127.0.0.1:5000/e2e/busybox", true},
		{"127.0.0.1:5000", "127.0.0.1:5001/e2e/busybox", false},
		{"https://reg.example/team", "reg.example/team/app", true},
		{"reg.example/team", "reg.example/other/app", false},
	} {
		if got := Matches(tt.pattern, tt.repo); got != tt.want {
			t.Errorf("Matches(%q, %q) = %v, want %v", tt.pattern, tt.repo, got, tt.want)
		}
	}
	for _, bad := range []string{"", "[.example", "%zz"} {
		if ValidatePattern(bad) == nil {
			t.Errorf("ValidatePattern(%q) accepted", bad)
		}
	}
	if err := ValidatePattern("*.dkr.ecr.*.amazonaws.com"); err != nil {
		t.Errorf("ValidatePattern of an EKS pattern: %v", err)
	}
}

func TestFromCredentials(t *testing.T) {
	k := FromCredentials("plugin p", map[string]Credential{
		"reg.example":      {Username: "host", Password: "a"},
		"reg.example/team": {Username: "team", Password: "b"},
	})
	got := k.Lookup("reg.example/team/app")
	if len(got) != 2 || got[0].Username != "team" || got[1].Username != "host" || got[0].Source != "plugin p" {
		t.Errorf("Lookup = %+v, want team's then host's, from plugin p", got)
	}
}
