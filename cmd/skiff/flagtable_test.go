package main

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// kubeadm's KubeletVersion preflight check parses `kubelet --version`
// with this expression.
var kubeadmKubeletVersion = regexp.MustCompile(`^\s*Kubernetes v((0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)([-\w.+]*)?)\s*$`)

func TestVersionParsesAsKubeadmDoes(t *testing.T) {
	for _, v := range []string{skiffVersion, "v0.1.0", "v1.2.3-rc.1"} {
		old := skiffVersion
		skiffVersion = v
		var out, errOut bytes.Buffer
		code := run([]string{"--version"}, &out, &errOut)
		skiffVersion = old
		if code != 0 {
			t.Fatalf("--version exited %d: %s", code, errOut.String())
		}
		m := kubeadmKubeletVersion.FindStringSubmatch(out.String())
		if m == nil {
			t.Fatalf("skiff version %s: kubeadm cannot parse %q", v, out.String())
		}
		if m[2] != "1" || m[3] != "34" || m[4] != "4" {
			t.Errorf("kubeadm reads version %s, want 1.34.4", m[1])
		}
	}
}

func readFlagList(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile("testdata/kubelet-v1.34.4-flags.txt")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line != "" && !strings.HasPrefix(line, "#") {
			names = append(names, line)
		}
	}
	return names
}

// TestFlagTableHasEveryUpstreamFlag walks upstream's complete flag list:
// each is in the table and registered; every other flag is Skiff's own.
func TestFlagTableHasEveryUpstreamFlag(t *testing.T) {
	upstream := readFlagList(t)
	if len(upstream) < 140 {
		t.Fatalf("only %d upstream flags in testdata", len(upstream))
	}
	fs := newFlagSet(&options{}, defaultConfig(), nil)
	inTable := map[string]flagDef{}
	for _, d := range flagTable {
		if _, dup := inTable[d.name]; dup {
			t.Errorf("flag --%s twice in the table", d.name)
		}
		inTable[d.name] = d
	}
	isUpstream := map[string]bool{}
	for _, name := range upstream {
		isUpstream[name] = true
		if name == "help" {
			continue // pflag's own
		}
		if _, ok := inTable[name]; !ok {
			t.Errorf("upstream flag --%s is not in Skiff's flag table", name)
		}
		if fs.Lookup(name) == nil {
			t.Errorf("upstream flag --%s is not registered", name)
		}
	}
	for _, d := range flagTable {
		if !isUpstream[d.name] && !d.skiffOnly {
			t.Errorf("flag --%s is neither upstream's nor marked Skiff's own", d.name)
		}
		if isUpstream[d.name] && d.skiffOnly {
			t.Errorf("flag --%s is upstream's but marked Skiff's own", d.name)
		}
	}
}

// TestUpstreamKubeletHelpMatchesTestdata checks the committed list against
// the upstream kubelet binary the tools build makes.
func TestUpstreamKubeletHelpMatchesTestdata(t *testing.T) {
	bin, err := filepath.Abs("../../_output/bin/kubelet")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("upstream kubelet not built: %v", err)
	}
	out, err := exec.Command(bin, "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("kubelet --help: %v\n%s", err, out)
	}
	flagLine := regexp.MustCompile(`^\s+(?:-[a-z], )?--([a-z0-9-]+)`)
	var got []string
	for _, line := range strings.Split(string(out), "\n") {
		if m := flagLine.FindStringSubmatch(line); m != nil {
			got = append(got, m[1])
		}
	}
	want := readFlagList(t)
	sort.Strings(got)
	sort.Strings(want)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("kubelet --help lists\n%s\n\ntestdata lists\n%s", strings.Join(got, " "), strings.Join(want, " "))
	}
}

func TestDeprecatedFlagsCarryUpstreamMessages(t *testing.T) {
	fs := newFlagSet(&options{}, defaultConfig(), nil)
	for name, want := range map[string]string{
		"pod-manifest-path":                deprecatedConfigFlag,
		"eviction-hard":                    deprecatedConfigFlag,
		"logging-format":                   deprecatedConfigFlag,
		"maximum-dead-containers":          deprecatedGCFlag,
		"boot-id-file":                     deprecatedCadvisor,
		"pod-infra-container-image":        deprecatedPauseImage,
		"provider-id":                      "",
		"fail-cgroupv1":                    "",
		"v":                                "",
		"node-labels":                      "",
		"image-credential-provider-config": "",
	} {
		if got := fs.Lookup(name).Deprecated; got != want {
			t.Errorf("--%s deprecated %q, want %q", name, got, want)
		}
	}
	// Using one prints the message, as pflag does for upstream.
	var out bytes.Buffer
	if _, err := parse([]string{"--hostname-override=n", "--max-pods=20"}, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "--max-pods has been deprecated") {
		t.Errorf("no deprecation notice for --max-pods: %q", out.String())
	}
}
