package credentialprovider

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	kubeletconfigv1 "k8s.io/kubelet/config/v1"
	"k8s.io/utils/clock"

	credentialproviderv1 "k8s.io/kubelet/pkg/apis/credentialprovider/v1"
)

// okResponse is a valid plugin answer, for scripts.
const okResponse = `{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","kind":"CredentialProviderResponse","cacheKeyType":"Registry","auth":{}}`

// runScript runs a shell-script plugin once through exec and returns
// what it gave; the test fails if the run does not return within a
// minute and a half (execTimeout and then some: a hang, not a timing).
func runScript(t *testing.T, script string) (*credentialproviderv1.CredentialProviderResponse, error) {
	t.Helper()
	bin := t.TempDir()
	writePlugin(t, bin, "plugin", script)
	p := newPlugin(kubeletconfigv1.CredentialProvider{Name: "plugin"}, bin, clock.RealClock{})
	type result struct {
		resp *credentialproviderv1.CredentialProviderResponse
		err  error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := p.exec(context.Background(), "127.0.0.1:5000/app")
		done <- result{resp, err}
	}()
	select {
	case r := <-done:
		return r.resp, r.err
	case <-time.After(execTimeout + 30*time.Second):
		t.Fatalf("the plugin run did not return")
		return nil, nil
	}
}

// processGone reports whether pid has exited (gone, or a zombie).
func processGone(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(fields) > 0 && fields[0] == "Z"
}

// A plugin that answers, exits and leaves a child holding its stdout
// cannot hang the pull: the run fails once WaitDelay has passed, and the
// child (in the plugin's process group) is killed.
func TestPluginChildHoldingStdout(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "child.pid")
	_, err := runScript(t, `cat >/dev/null
echo '`+okResponse+`'
sleep 1000 &
echo $! > `+pidFile+`
`)
	if !errors.Is(err, errOutputHeld) {
		t.Fatalf("run with a child holding stdout: %v, want %v", err, errOutputHeld)
	}
	b, rerr := os.ReadFile(pidFile)
	if rerr != nil {
		t.Fatal(rerr)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	deadline := time.Now().Add(10 * time.Second)
	for !processGone(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("the plugin's child %d still runs", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A plugin that answers with gigabytes is cut off at maxResponseSize:
// the run fails with errResponseTooLarge, without reading the rest.
func TestPluginHugeResponse(t *testing.T) {
	for name, script := range map[string]string{
		"head": "cat >/dev/null\nhead -c 8589934592 /dev/zero\n",
		"yes":  "cat >/dev/null\nyes\n",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := runScript(t, script)
			if !errors.Is(err, errResponseTooLarge) {
				t.Fatalf("a plugin writing gigabytes: %v, want %v", err, errResponseTooLarge)
			}
		})
	}
}

// A plugin's stderr is kept only up to maxStderr for the error message.
func TestPluginStderrIsBounded(t *testing.T) {
	_, err := runScript(t, "cat >/dev/null\nhead -c 100000000 /dev/zero | tr '\\0' x >&2\nexit 1\n")
	if err == nil || len(err.Error()) > maxStderr+500 {
		t.Fatalf("a plugin failing with 100 MB of stderr: error of %d bytes", len(err.Error()))
	}
	if !strings.Contains(err.Error(), "exit status 1") || !strings.Contains(err.Error(), "xxxx") {
		t.Errorf("error %.300q, want the exit status and the start of stderr", err)
	}
}
