package podruntime

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/skiff-sh/skiff/internal/container"
	"github.com/skiff-sh/skiff/internal/cri"
)

func TestTerminationMessageMount(t *testing.T) {
	root := t.TempDir()
	m := New(Config{PodDir: func(uid types.UID) string { return filepath.Join(root, string(uid)) }})
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "u1"}}
	c := &v1.Container{Name: "app", TerminationMessagePath: "/dev/termination-log"}
	first, second := m.terminationMessageMount(pod, c), m.terminationMessageMount(pod, c)
	if first == nil || second == nil {
		t.Fatal("no mount")
	}
	if first.ContainerPath != "/dev/termination-log" || filepath.Dir(first.HostPath) != filepath.Join(root, "u1", "containers", "app") {
		t.Errorf("mount %+v", first)
	}
	if first.HostPath == second.HostPath {
		t.Errorf("two attempts share the file %s", first.HostPath)
	}
	fi, err := os.Stat(first.HostPath)
	if err != nil || fi.Mode().Perm() != 0o666 || fi.Size() != 0 {
		t.Errorf("file: %v %v", fi, err)
	}
	if tm := m.terminationMessageMount(pod, &v1.Container{Name: "none"}); tm != nil {
		t.Errorf("a container without terminationMessagePath got %+v", tm)
	}
}

func TestAddTerminationMessage(t *testing.T) {
	dir := t.TempDir()
	var logLines strings.Builder
	for i := range 100 {
		stream := "stdout"
		if i%2 == 1 {
			stream = "stderr"
		}
		fmt.Fprintf(&logLines, "2025-03-01T10:00:%02dZ %s F line %d\n", i%60, stream, i)
	}
	logPath := filepath.Join(dir, "0.log")
	if err := os.WriteFile(logPath, []byte(logLines.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	// Termination files where Skiff makes them: <pod dir>/containers/app/<8 hex>.
	podDir := filepath.Join(dir, "pod")
	termDir := filepath.Join(podDir, "containers", "app")
	if err := os.MkdirAll(termDir, 0o750); err != nil {
		t.Fatal(err)
	}
	files := 0
	write := func(content string) string {
		files++
		p := filepath.Join(termDir, fmt.Sprintf("%08x", files))
		if err := os.WriteFile(p, []byte(content), 0o666); err != nil {
			t.Fatal(err)
		}
		return p
	}
	big := strings.Repeat("a", 100) + strings.Repeat("b", MaxTerminationMessageLength)
	for _, tc := range []struct {
		name      string
		file      string // termination file content; "-" for no file mounted, "missing" for one gone
		policy    v1.TerminationMessagePolicy
		state     runtimeapi.ContainerState
		exit      int32
		reason    string
		runtime   string // the runtime's message
		want      string
		wantStart string // for long messages: the prefix, with len == want's length
	}{
		{name: "file written", file: "all done", policy: v1.TerminationMessageReadFile, state: exited, want: "all done"},
		{name: "last 4 KiB of a long file", file: big, policy: v1.TerminationMessageReadFile, state: exited, want: big[100:]},
		{name: "empty file", file: "", policy: v1.TerminationMessageReadFile, state: exited, exit: 1, want: ""},
		{name: "fallback: empty file, failed", file: "", policy: v1.TerminationMessageFallbackToLogsOnError, state: exited, exit: 2,
			wantStart: "line 20\nline 21\n"},
		{name: "fallback: file written wins", file: "from the file", policy: v1.TerminationMessageFallbackToLogsOnError, state: exited, exit: 2, want: "from the file"},
		{name: "fallback: succeeded", file: "", policy: v1.TerminationMessageFallbackToLogsOnError, state: exited, exit: 0, want: ""},
		{name: "fallback: no file mounted", file: "-", policy: v1.TerminationMessageFallbackToLogsOnError, state: exited, exit: 1, wantStart: "line 20\n"},
		{name: "fallback: file gone", file: "missing", policy: v1.TerminationMessageFallbackToLogsOnError, state: exited, exit: 1, wantStart: "line 20\n"},
		{name: "fallback: never started", file: "", policy: v1.TerminationMessageFallbackToLogsOnError, state: exited, exit: 128,
			reason: ReasonStartError, runtime: "exec: not found", want: "exec: not found"},
		{name: "runtime message first", file: "bye", policy: v1.TerminationMessageReadFile, state: exited, exit: 137,
			reason: "OOMKilled", runtime: "oom", want: "oom: bye"},
		{name: "running: nothing read", file: "early", policy: v1.TerminationMessageReadFile, state: runtimeapi.ContainerState_CONTAINER_RUNNING, want: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &runtimeapi.ContainerStatus{
				Metadata: &runtimeapi.ContainerMetadata{Name: "app"},
				State:    tc.state, ExitCode: tc.exit, Reason: tc.reason, Message: tc.runtime, LogPath: logPath,
				Annotations: map[string]string{
					cri.TerminationMessagePathAnno:   "/dev/termination-log",
					cri.TerminationMessagePolicyAnno: string(tc.policy),
				},
				Mounts: []*runtimeapi.Mount{{ContainerPath: "/data", HostPath: dir}},
			}
			switch tc.file {
			case "-":
			case "missing":
				s.Mounts = append(s.Mounts, &runtimeapi.Mount{ContainerPath: "/dev/termination-log", HostPath: filepath.Join(termDir, "ffffffff")})
			default:
				s.Mounts = append(s.Mounts, &runtimeapi.Mount{ContainerPath: "/dev/termination-log", HostPath: write(tc.file)})
			}
			cs := toContainerStatus(s)
			addTerminationMessage(context.Background(), podDir, s, cs)
			if tc.wantStart != "" {
				// The last 80 lines, then the last 2 KiB of those.
				if !strings.HasSuffix(cs.Message, "line 99\n") || len(cs.Message) > MaxTerminationMessageLogLength ||
					(len("line 20\n")*80 < MaxTerminationMessageLogLength && !strings.HasPrefix(cs.Message, tc.wantStart)) {
					t.Errorf("message %q", cs.Message)
				}
				return
			}
			if cs.Message != tc.want {
				t.Errorf("message %q, want %q", cs.Message, tc.want)
			}
		})
	}
}

const exited = runtimeapi.ContainerState_CONTAINER_EXITED

func TestRemoveContainerFiles(t *testing.T) {
	dir := t.TempDir()
	podDir, logsDir := filepath.Join(dir, "pod"), filepath.Join(dir, "logs")
	for _, d := range []string{"pod/containers/app", "logs/ns_p_u/app"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o750); err != nil {
			t.Fatal(err)
		}
	}
	var files []string
	for _, f := range []string{"logs/ns_p_u/app/1.log", "logs/ns_p_u/app/1.log.20250301-100000.gz", "logs/ns_p_u/app/1.log.20250301-100010",
		"pod/containers/app/0badcafe", "logs/ns_p_u/app/2.log", "pod/containers/app/00000001", "other", "0badcafe", "1.log"} {
		p := filepath.Join(dir, f)
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, p)
	}
	removeContainerFiles(podDir, logsDir, &container.ContainerStatus{Name: "app", LogPath: files[0], TerminationMessageFile: files[3]})
	check := func(removed int) {
		t.Helper()
		for i, f := range files {
			_, err := os.Stat(f)
			if gone := os.IsNotExist(err); gone != (i < removed) {
				t.Errorf("%s: removed=%v (%v)", f, gone, err)
			}
		}
	}
	check(4)
	// A file elsewhere, named as a termination file or a log or not, is
	// never Skiff's.
	for _, f := range files[6:] {
		removeContainerFiles(podDir, logsDir, &container.ContainerStatus{Name: "app", LogPath: files[8], TerminationMessageFile: f})
	}
	check(4)
}
