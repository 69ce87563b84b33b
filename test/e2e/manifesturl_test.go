//go:build e2e

package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// manifestServer serves static pods the way a provisioning service would,
// only to requests with the agreed header.
type manifestServer struct {
	mu   sync.Mutex
	body string
}

func (s *manifestServer) set(body string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.body = body
}

func (s *manifestServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("X-Node-Token") != "t0ken" {
		http.Error(w, "no token", http.StatusForbidden)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.body == "" {
		http.NotFound(w, r)
		return
	}
	_, _ = w.Write([]byte(s.body))
}

// urlPod is a busybox pod as JSON, for a PodList's items.
func urlPod(name, script string) string {
	return fmt.Sprintf(`{"metadata":{"name":%q,"labels":{%q:"true"}},"spec":{"terminationGracePeriodSeconds":5,`+
		`"containers":[{"name":"main","image":%q,"imagePullPolicy":"Never","command":["sh","-c",%q]}]}}`,
		name, testLabel, busybox, script)
}

// TestManifestURLPods: pods from staticPodURL (sent with
// staticPodURLHeader, fetched every httpCheckFrequency) run and follow the
// URL's answer; a failing URL keeps them. The same Skiff logs in JSON
// (logging.format) and caps the restart back-off at
// crashLoopBackOff.maxContainerRestartPeriod, and sets its own
// oom_score_adj.
func TestManifestURLPods(t *testing.T) {
	srv := &manifestServer{}
	srv.set(staticPod("from-url", "exec sleep 3600", ""))
	ts := httptest.NewServer(srv)
	defer ts.Close()

	n := newPrivateNode(t)
	f, err := os.OpenFile(n.config, os.O_APPEND|os.O_WRONLY, 0)
	must(t, err)
	_, err = fmt.Fprintf(f, `staticPodURL: %s/pods
staticPodURLHeader:
  X-Node-Token: [t0ken]
httpCheckFrequency: 2s
logging:
  format: json
featureGates:
  KubeletCrashLoopBackOffMax: true
crashLoopBackOff:
  maxContainerRestartPeriod: 1s
oomScoreAdj: 500
`, ts.URL)
	must(t, err)
	must(t, f.Close())
	n.start()

	// Raising a process's own oom_score_adj needs no privilege.
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/oom_score_adj", n.cmd.Process.Pid)); err != nil || strings.TrimSpace(string(b)) != "500" {
		t.Errorf("Skiff's oom_score_adj %q (%v), want 500", b, err)
	}

	p := n.waitRunning("from-url-"+nodeName, 60*time.Second)
	if p.Annotations["kubernetes.io/config.source"] != "http" || p.Spec.NodeName != nodeName {
		t.Errorf("pod from the URL: source %q node %q", p.Annotations["kubernetes.io/config.source"], p.Spec.NodeName)
	}

	// The answer becomes a PodList: the first pod goes, the list's come.
	srv.set(`{"apiVersion":"v1","kind":"PodList","items":[` + urlPod("second", "exec sleep 3600") + "," +
		urlPod("crasher", "exit 3") + `]}`)
	n.waitRunning("second-"+nodeName, 60*time.Second)
	waitFor(t, 60*time.Second, "from-url removed", func() (bool, error) {
		p, err := n.pod("from-url-" + nodeName)
		return err == nil && p == nil, nil
	})

	// With the default back-off (10 s doubling) a fifth restart comes
	// after 150 s; capped at 1 s it comes within seconds.
	waitFor(t, 60*time.Second, "crasher restarted 5 times", func() (bool, error) {
		p, err := n.pod("crasher-" + nodeName)
		if err != nil || p == nil || len(p.Status.ContainerStatuses) == 0 {
			return false, nil
		}
		return p.Status.ContainerStatuses[0].RestartCount >= 5, nil
	})

	// A failing URL keeps the pods of the last good answer.
	srv.set("")
	time.Sleep(6 * time.Second) // three fetches
	if p, err := n.pod("second-" + nodeName); err != nil || p == nil || p.Status.Phase != v1.PodRunning {
		t.Errorf("after the URL failed: pod %v, err %v", p, err)
	}

	checkJSONLog(t, n.log())
}

// checkJSONLog parses Skiff's log lines as component-base's JSON format
// writes them: every log line after start-up is a JSON object with a
// timestamp and a message.
func checkJSONLog(t *testing.T, log string) {
	t.Helper()
	var parsed int
	sc := bufio.NewScanner(strings.NewReader(log))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "{") {
			continue // flag deprecation notices come before logging starts
		}
		var entry map[string]any
		if err := json.Unmarshal([]byte(line), &entry); err != nil {
			t.Errorf("log line is not JSON: %v: %s", err, line)
			continue
		}
		if _, ok := entry["ts"]; !ok {
			t.Errorf("JSON log line without ts: %s", line)
		}
		if _, ok := entry["msg"]; !ok {
			t.Errorf("JSON log line without msg: %s", line)
		}
		parsed++
	}
	if parsed < 5 {
		t.Errorf("only %d JSON log lines in:\n%s", parsed, tail(log, 30))
	}
}
