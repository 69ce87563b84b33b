package payload

import (
	"errors"
	"testing"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/skiff-sh/skiff/internal/volume/atomic"
)

type fakeGetters struct {
	configMaps map[string]*v1.ConfigMap
	secrets    map[string]*v1.Secret
	err        error // returned for every lookup when set
	// notFoundErr makes a missing object an API NotFound error instead
	// of (nil, nil).
	notFoundErr bool
}

func (g *fakeGetters) GetConfigMap(ns, name string) (*v1.ConfigMap, error) {
	if g.err != nil {
		return nil, g.err
	}
	cm := g.configMaps[ns+"/"+name]
	if cm == nil && g.notFoundErr {
		return nil, apierrors.NewNotFound(v1.Resource("configmap"), name)
	}
	return cm, nil
}

func (g *fakeGetters) GetSecret(ns, name string) (*v1.Secret, error) {
	if g.err != nil {
		return nil, g.err
	}
	s := g.secrets[ns+"/"+name]
	if s == nil && g.notFoundErr {
		return nil, apierrors.NewNotFound(v1.Resource("secret"), name)
	}
	return s, nil
}

type tokenCall struct {
	audience string
	exp      int64
}

func fakeTokens(calls *[]tokenCall) TokenFunc {
	return func(audience string, exp int64) (string, error) {
		*calls = append(*calls, tokenCall{audience, exp})
		return "token-for-" + audience, nil
	}
}

func cmProjection(name string, optional *bool, items ...v1.KeyToPath) v1.VolumeProjection {
	return v1.VolumeProjection{ConfigMap: &v1.ConfigMapProjection{
		LocalObjectReference: v1.LocalObjectReference{Name: name}, Optional: optional, Items: items,
	}}
}

func secretProjection(name string, optional *bool, items ...v1.KeyToPath) v1.VolumeProjection {
	return v1.VolumeProjection{Secret: &v1.SecretProjection{
		LocalObjectReference: v1.LocalObjectReference{Name: name}, Optional: optional, Items: items,
	}}
}

func tokenProjection(path, audience string, exp *int64) v1.VolumeProjection {
	return v1.VolumeProjection{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: path, Audience: audience, ExpirationSeconds: exp}}
}

func newGetters() *fakeGetters {
	return &fakeGetters{
		configMaps: map[string]*v1.ConfigMap{
			"shop/kube-root-ca.crt": {Data: map[string]string{"ca.crt": "CA"}},
			"shop/cfg":              {Data: map[string]string{"a": "alpha", "shared": "from-cm"}},
		},
		secrets: map[string]*v1.Secret{
			"shop/creds": {Data: map[string][]byte{"pass": []byte("pw"), "shared": []byte("from-secret")}},
		},
	}
}

// kubeAPIAccess is the volume the apiserver injects into every pod.
func kubeAPIAccess() *v1.ProjectedVolumeSource {
	return &v1.ProjectedVolumeSource{
		DefaultMode: i32(0o644),
		Sources: []v1.VolumeProjection{
			tokenProjection("token", "", i64(3607)),
			cmProjection("kube-root-ca.crt", nil, v1.KeyToPath{Key: "ca.crt", Path: "ca.crt"}),
			{DownwardAPI: &v1.DownwardAPIProjection{Items: []v1.DownwardAPIVolumeFile{fieldItem("namespace", "metadata.namespace")}}},
		},
	}
}

func TestProjectedKubeAPIAccess(t *testing.T) {
	var calls []tokenCall
	got, err := Projected(kubeAPIAccess(), testPod(), Getters{ConfigMaps: newGetters(), Secrets: newGetters()}, fakeTokens(&calls))
	checkErr(t, err, "")
	checkFiles(t, got, map[string]atomic.File{
		"token":     f("token-for-", 0o644),
		"ca.crt":    f("CA", 0o644),
		"namespace": f("shop", 0o644),
	})
	if len(calls) != 1 || calls[0] != (tokenCall{"", 3607}) {
		t.Errorf("token calls = %v", calls)
	}
}

func TestProjected(t *testing.T) {
	withFSGroup := func(p *v1.Pod) {
		p.Spec.SecurityContext = &v1.PodSecurityContext{FSGroup: i64(2000)}
	}
	withUser := func(p *v1.Pod) {
		p.Spec.SecurityContext = &v1.PodSecurityContext{RunAsUser: i64(1000)}
	}
	cases := []struct {
		name      string
		source    *v1.ProjectedVolumeSource
		pod       func(*v1.Pod)
		getters   func(*fakeGetters)
		noTokens  bool
		want      map[string]atomic.File
		wantErr   string
		wantCalls []tokenCall
	}{
		{
			name: "defaultMode and item modes",
			source: &v1.ProjectedVolumeSource{DefaultMode: i32(0o400), Sources: []v1.VolumeProjection{
				cmProjection("cfg", nil, v1.KeyToPath{Key: "a", Path: "conf/a", Mode: i32(0o644)}),
				secretProjection("creds", nil, v1.KeyToPath{Key: "pass", Path: "pass"}),
			}},
			want: map[string]atomic.File{"conf/a": f("alpha", 0o644), "pass": f("pw", 0o400)},
		},
		{
			name:   "unset defaultMode is 0644",
			source: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{secretProjection("creds", nil, v1.KeyToPath{Key: "pass", Path: "p"})}},
			want:   map[string]atomic.File{"p": f("pw", 0o644)},
		},
		{
			name: "later sources win",
			source: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
				cmProjection("cfg", nil), secretProjection("creds", nil),
			}},
			want: map[string]atomic.File{"a": f("alpha", 0o644), "shared": f("from-secret", 0o644), "pass": f("pw", 0o644)},
		},
		{
			name: "token with audience and expiration",
			source: &v1.ProjectedVolumeSource{DefaultMode: i32(0o444), Sources: []v1.VolumeProjection{
				tokenProjection("vault/token", "vault", i64(7200)),
				tokenProjection("default-exp", "other", nil),
			}},
			want:      map[string]atomic.File{"vault/token": f("token-for-vault", 0o444), "default-exp": f("token-for-other", 0o444)},
			wantCalls: []tokenCall{{"vault", 7200}, {"other", 3600}},
		},
		{
			name:   "token with fsGroup is 0600",
			source: &v1.ProjectedVolumeSource{DefaultMode: i32(0o644), Sources: []v1.VolumeProjection{tokenProjection("token", "", nil), cmProjection("cfg", nil)}},
			pod:    withFSGroup,
			want: map[string]atomic.File{
				"token": f("token-for-", 0o600), "a": f("alpha", 0o644), "shared": f("from-cm", 0o644),
			},
			wantCalls: []tokenCall{{"", 3600}},
		},
		{
			name:      "token with one user is 0600 and owned by it",
			source:    &v1.ProjectedVolumeSource{DefaultMode: i32(0o644), Sources: []v1.VolumeProjection{tokenProjection("token", "", nil)}},
			pod:       withUser,
			want:      map[string]atomic.File{"token": {Data: []byte("token-for-"), Mode: 0o600, FsUser: i64(1000)}},
			wantCalls: []tokenCall{{"", 3600}},
		},
		{
			name: "missing optional sources are empty",
			source: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
				cmProjection("nope", yes()), secretProjection("nope", yes(), v1.KeyToPath{Key: "k", Path: "k"}), cmProjection("cfg", nil, v1.KeyToPath{Key: "a", Path: "a"}),
			}},
			want: map[string]atomic.File{"a": f("alpha", 0o644)},
		},
		{
			name:    "missing optional sources, NotFound errors",
			source:  &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{cmProjection("nope", yes()), secretProjection("nope", yes())}},
			getters: func(g *fakeGetters) { g.notFoundErr = true },
			want:    map[string]atomic.File{},
		},
		{
			name:    "missing configmap",
			source:  &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{cmProjection("nope", nil)}},
			wantErr: `configmap "nope" not found`,
		},
		{
			name:    "missing secret, NotFound error",
			source:  &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{secretProjection("nope", no())}},
			getters: func(g *fakeGetters) { g.notFoundErr = true },
			wantErr: `secret "nope" not found`,
		},
		{
			name:    "missing key",
			source:  &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{cmProjection("cfg", nil, v1.KeyToPath{Key: "zz", Path: "z"})}},
			wantErr: "configmap references non-existent config key: zz",
		},
		{
			name:    "getter failure even when optional",
			source:  &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{cmProjection("cfg", yes())}},
			getters: func(g *fakeGetters) { g.err = errors.New("apiserver down") },
			wantErr: "apiserver down",
		},
		{
			name: "every failure reported",
			source: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
				cmProjection("nope", nil), secretProjection("creds", nil, v1.KeyToPath{Key: "zz", Path: "z"}),
			}},
			wantErr: `[configmap "nope" not found, references non-existent secret key: zz]`,
		},
		{
			name:     "no token source",
			source:   &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{tokenProjection("t", "", nil)}},
			noTokens: true,
			wantErr:  "no token source",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := testPod()
			if tc.pod != nil {
				tc.pod(pod)
			}
			g := newGetters()
			if tc.getters != nil {
				tc.getters(g)
			}
			var calls []tokenCall
			tokens := fakeTokens(&calls)
			if tc.noTokens {
				tokens = nil
			}
			got, err := Projected(tc.source, pod, Getters{ConfigMaps: g, Secrets: g, NodeAllocatable: testAllocatable}, tokens)
			if !checkErr(t, err, tc.wantErr) {
				return
			}
			checkFiles(t, got, tc.want)
			if len(calls) != len(tc.wantCalls) {
				t.Fatalf("token calls = %v, want %v", calls, tc.wantCalls)
			}
			for i := range calls {
				if calls[i] != tc.wantCalls[i] {
					t.Errorf("token call %d = %v, want %v", i, calls[i], tc.wantCalls[i])
				}
			}
		})
	}
}

func TestProjectedUnsupportedIsMatchable(t *testing.T) {
	src := &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
		{PodCertificate: &v1.PodCertificateProjection{SignerName: "x/y"}},
	}}
	_, err := Projected(src, testPod(), Getters{}, nil)
	if !errors.Is(err, ErrPodCertificateUnsupported) {
		t.Fatalf("err = %v", err)
	}
}

func TestProjectedNoGetters(t *testing.T) {
	src := &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{cmProjection("cfg", nil), secretProjection("s", nil)}}
	_, err := Projected(src, testPod(), Getters{}, nil)
	checkErr(t, err, "no configmap getter")
	checkErr(t, err, "no secret getter")
}

func TestGetterFuncs(t *testing.T) {
	var g Getters
	g.ConfigMaps = ConfigMapGetterFunc(func(ns, name string) (*v1.ConfigMap, error) {
		return &v1.ConfigMap{Data: map[string]string{"k": ns + "/" + name}}, nil
	})
	g.Secrets = SecretGetterFunc(func(string, string) (*v1.Secret, error) { return nil, nil })
	src := &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{cmProjection("cfg", nil), secretProjection("s", yes())}}
	got, err := Projected(src, testPod(), g, nil)
	checkErr(t, err, "")
	checkFiles(t, got, map[string]atomic.File{"k": f("shop/cfg", 0o644)})
}
