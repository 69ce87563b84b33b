package podruntime

//lint:file-ignore SA1019 the tests check the deprecated seccomp field that older runtimes read

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"
)

func TestContainerSecurity(t *testing.T) {
	seccompRoot := t.TempDir()
	if err := os.WriteFile(filepath.Join(seccompRoot, "audit.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	unmasked := v1.UnmaskedProcMount
	cases := []struct {
		name    string
		psc     *v1.PodSecurityContext
		sc      *v1.SecurityContext
		def     bool // seccompDefault
		check   func(*testing.T, *runtimeapi.LinuxContainerSecurityContext)
		wantErr string
	}{
		{name: "defaults: masked paths, unconfined seccomp, image user", check: func(t *testing.T, s *runtimeapi.LinuxContainerSecurityContext) {
			if s.RunAsUser != nil || s.Privileged || s.NoNewPrivs || s.ReadonlyRootfs {
				t.Errorf("unexpected settings: %+v", s)
			}
			if !reflect.DeepEqual(s.MaskedPaths, defaultMaskedPaths) || !reflect.DeepEqual(s.ReadonlyPaths, defaultReadonlyPaths) {
				t.Errorf("masked %v readonly %v", s.MaskedPaths, s.ReadonlyPaths)
			}
			if s.Seccomp.ProfileType != runtimeapi.SecurityProfile_Unconfined || s.SeccompProfilePath != "unconfined" {
				t.Errorf("seccomp %v %q", s.Seccomp, s.SeccompProfilePath)
			}
		}},
		{name: "seccompDefault gives RuntimeDefault", def: true, check: func(t *testing.T, s *runtimeapi.LinuxContainerSecurityContext) {
			if s.Seccomp.ProfileType != runtimeapi.SecurityProfile_RuntimeDefault || s.SeccompProfilePath != "runtime/default" {
				t.Errorf("seccomp %v", s.Seccomp)
			}
		}},
		{name: "pod fields apply, container overrides",
			psc: &v1.PodSecurityContext{RunAsUser: ptr.To[int64](1000), RunAsGroup: ptr.To[int64](2000), SupplementalGroups: []int64{5}, FSGroup: ptr.To[int64](7),
				SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeRuntimeDefault}},
			sc: &v1.SecurityContext{RunAsUser: ptr.To[int64](65534), ReadOnlyRootFilesystem: ptr.To(true), AllowPrivilegeEscalation: ptr.To(false),
				Capabilities: &v1.Capabilities{Add: []v1.Capability{"NET_ADMIN"}, Drop: []v1.Capability{"ALL"}}},
			check: func(t *testing.T, s *runtimeapi.LinuxContainerSecurityContext) {
				if s.RunAsUser.GetValue() != 65534 || s.RunAsGroup.GetValue() != 2000 || !s.ReadonlyRootfs || !s.NoNewPrivs {
					t.Errorf("user/group/rootfs/nnp: %+v", s)
				}
				if !reflect.DeepEqual(s.SupplementalGroups, []int64{5, 7}) {
					t.Errorf("supplemental groups %v, want [5 7] (fsGroup added)", s.SupplementalGroups)
				}
				if !reflect.DeepEqual(s.Capabilities.AddCapabilities, []string{"NET_ADMIN"}) || !reflect.DeepEqual(s.Capabilities.DropCapabilities, []string{"ALL"}) {
					t.Errorf("caps %v", s.Capabilities)
				}
				if s.Seccomp.ProfileType != runtimeapi.SecurityProfile_RuntimeDefault {
					t.Errorf("pod seccomp not inherited: %v", s.Seccomp)
				}
			}},
		{name: "privileged: no masked paths", sc: &v1.SecurityContext{Privileged: ptr.To(true)}, check: func(t *testing.T, s *runtimeapi.LinuxContainerSecurityContext) {
			if !s.Privileged || s.MaskedPaths != nil || s.ReadonlyPaths != nil {
				t.Errorf("privileged %v masked %v", s.Privileged, s.MaskedPaths)
			}
		}},
		{name: "unmasked procMount", sc: &v1.SecurityContext{ProcMount: &unmasked}, check: func(t *testing.T, s *runtimeapi.LinuxContainerSecurityContext) {
			if s.MaskedPaths != nil || s.ReadonlyPaths != nil {
				t.Errorf("masked %v", s.MaskedPaths)
			}
		}},
		{name: "allowPrivilegeEscalation true keeps privileges", sc: &v1.SecurityContext{AllowPrivilegeEscalation: ptr.To(true)}, check: func(t *testing.T, s *runtimeapi.LinuxContainerSecurityContext) {
			if s.NoNewPrivs {
				t.Error("no_new_privs set")
			}
		}},
		{name: "localhost seccomp under the root", sc: &v1.SecurityContext{SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr.To("audit.json")}},
			check: func(t *testing.T, s *runtimeapi.LinuxContainerSecurityContext) {
				want := filepath.Join(seccompRoot, "audit.json")
				if s.Seccomp.ProfileType != runtimeapi.SecurityProfile_Localhost || s.Seccomp.LocalhostRef != want || s.SeccompProfilePath != "localhost/"+want {
					t.Errorf("seccomp %v %q", s.Seccomp, s.SeccompProfilePath)
				}
			}},
		{name: "missing localhost profile", sc: &v1.SecurityContext{SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr.To("nope.json")}}, wantErr: "no such file"},
		{name: "escaping localhost profile", sc: &v1.SecurityContext{SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr.To("../x.json")}}, wantErr: "relative path inside"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := &v1.Pod{Spec: v1.PodSpec{SecurityContext: tc.psc, Containers: []v1.Container{{Name: "c", SecurityContext: tc.sc}}}}
			s, err := Security{SeccompDefault: tc.def, SeccompRoot: seccompRoot}.containerSecurity(pod, &pod.Spec.Containers[0])
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, s)
		})
	}
}

func TestSandboxSecurity(t *testing.T) {
	pod := &v1.Pod{Spec: v1.PodSpec{
		HostPID: true, HostIPC: true,
		SecurityContext: &v1.PodSecurityContext{RunAsUser: ptr.To[int64](1), FSGroup: ptr.To[int64](9),
			Sysctls: []v1.Sysctl{{Name: "net.ipv4.tcp_syncookies", Value: "0"}}},
		InitContainers: []v1.Container{{Name: "i", SecurityContext: &v1.SecurityContext{Privileged: ptr.To(true)}}},
		Containers:     []v1.Container{{Name: "c"}},
	}}
	s := Security{}.sandboxSecurity(pod)
	if !s.Privileged {
		t.Error("a privileged init container needs a privileged sandbox")
	}
	if s.RunAsUser.GetValue() != 1 || !reflect.DeepEqual(s.SupplementalGroups, []int64{9}) {
		t.Errorf("user %v groups %v", s.RunAsUser, s.SupplementalGroups)
	}
	if s.NamespaceOptions.Pid != runtimeapi.NamespaceMode_NODE || s.NamespaceOptions.Ipc != runtimeapi.NamespaceMode_NODE {
		t.Errorf("namespaces %v", s.NamespaceOptions)
	}
	if got := sysctls(pod); got["net.ipv4.tcp_syncookies"] != "0" || len(got) != 1 {
		t.Errorf("sysctls %v", got)
	}
}

// runAsNonRoot is checked against runAsUser, else the image's user.
func TestRunAsNonRoot(t *testing.T) {
	cases := []struct {
		name     string
		runAs    *int64
		uid      *runtimeapi.Int64Value
		username string
		want     string // "" = starts
	}{
		{name: "image without user runs as root", want: "container has runAsNonRoot and image will run as root"},
		{name: "image uid 0", uid: &runtimeapi.Int64Value{Value: 0}, want: "image will run as root"},
		{name: "image uid 1000", uid: &runtimeapi.Int64Value{Value: 1000}},
		{name: "image user name", username: "nobody", want: "non-numeric user (nobody)"},
		{name: "runAsUser 0", runAs: ptr.To[int64](0), want: "runAsUser breaks non-root policy"},
		{name: "runAsUser overrides a root image", runAs: ptr.To[int64](65534)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, v1.RestartPolicyAlways)
			f.img.Images["busybox:1"].Uid = tc.uid
			f.img.Images["busybox:1"].Username = tc.username
			f.pod.Spec.SecurityContext = &v1.PodSecurityContext{RunAsNonRoot: ptr.To(true)}
			f.pod.Spec.Containers[0].SecurityContext = &v1.SecurityContext{RunAsUser: tc.runAs}
			res := f.sync()
			w := res.Waiting["app"]
			if tc.want == "" {
				if w != nil {
					t.Fatalf("container waits: %v", w)
				}
				return
			}
			if w == nil || w.Reason != ReasonCreateContainerConfig || !strings.Contains(w.Message, tc.want) || !strings.Contains(w.Message, "p_ns(uid-1)") {
				t.Fatalf("waiting %v, want CreateContainerConfigError %q", w, tc.want)
			}
			if len(f.rt.Containers) != 0 {
				t.Errorf("%d containers created", len(f.rt.Containers))
			}
		})
	}
}

func TestUserNamespacesRefused(t *testing.T) {
	f := newFixture(t, v1.RestartPolicyAlways)
	f.pod.Spec.HostUsers = ptr.To(false)
	res := f.sync()
	if res.Err == nil || !strings.Contains(res.Err.Error(), "hostUsers: false (user namespaces) is not supported") {
		t.Fatalf("sync error %v", res.Err)
	}
	if len(f.rt.Sandboxes) != 0 {
		t.Errorf("%d sandboxes made", len(f.rt.Sandboxes))
	}
}
