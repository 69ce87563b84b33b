//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

const (
	// kubeletIdleTimeout is upstream's IdleTimeout of the kubelet API,
	// which has no knob: the test waits the real one.
	kubeletIdleTimeout = 90 * time.Second
	// longSession is how long the exec, port-forward and logs -f
	// sessions stay silent before their last exchange.
	longSession = 10 * time.Minute
)

// The kubelet API closes keep-alive connections idle for 90 s, while a
// kubectl exec and a kubectl port-forward, both through the apiserver,
// stay silent for 10 minutes and still carry traffic at the end. (A
// followed log outliving the server's timeouts is shown by the server's
// unit tests, with short timeouts.)
func TestKubeletAPIIdleTimeoutAndLongStreams(t *testing.T) {
	quietLong(t)
	cn := newPrivateClusterNode(t)
	cn.start()
	web := busyboxPod("web", "mkdir -p /www && echo long-lived > /www/index.html && httpd -p 8080 -h /www && "+sleeper)
	cn.createPod(t, web)
	cn.waitPod(t, cn.ns, "web", 90*time.Second, "Running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })

	// Concurrently, to share the wait: each part returns its failure.
	url := cn.kubeletURL(t, "/healthz")
	parts := map[string]func() error{
		"idle connection": func() error { return checkIdleClosed(t, url) },
		"exec":            func() error { return longExec(t, cn) },
		"port-forward":    func() error { return longPortForward(t, cn) },
	}
	var wg sync.WaitGroup
	for name, f := range parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		}()
	}
	wg.Wait()
}

// checkIdleClosed makes one request on a keep-alive connection to url,
// then waits: the server closes the connection after the idle timeout,
// not before.
func checkIdleClosed(t *testing.T, url string) error {
	host := strings.TrimPrefix(url, "https://")
	host = host[:strings.Index(host, "/")]
	c, err := tls.Dial("tcp", host, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}})
	if err != nil {
		return fmt.Errorf("dial %s: %w", host, err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: %s\r\n\r\n", host)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return fmt.Errorf("request: %w", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.Close {
		return fmt.Errorf("the server closed the connection after the request (%s)", resp.Status)
	}
	idleSince := time.Now()
	_ = c.SetReadDeadline(idleSince.Add(kubeletIdleTimeout + 2*time.Minute))
	_, err = br.ReadByte()
	idle := time.Since(idleSince)
	switch {
	case !errors.Is(err, io.EOF):
		return fmt.Errorf("idle connection after %s: read %v, want EOF (closed by the server)", idle.Round(time.Second), err)
	case idle < kubeletIdleTimeout-time.Second:
		return fmt.Errorf("idle connection closed after %s, before the idle timeout %s", idle.Round(time.Second), kubeletIdleTimeout)
	}
	t.Logf("idle connection closed by the server after %s", idle.Round(time.Second))
	return nil
}

// longExec runs a shell that echoes its input through kubectl exec -i,
// exchanges a line, stays silent for longSession, and exchanges another.
func longExec(t *testing.T, cn *clusterNode) error {
	ctx, cancel := context.WithTimeout(context.Background(), longSession+5*time.Minute)
	defer cancel()
	kc := kubectl(cn.c, "-n", cn.ns, "exec", "-i", "web", "--", "sh", "-c", "while read l; do echo got:$l; done")
	cmd := exec.CommandContext(ctx, kc.Path, kc.Args[1:]...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	lines, err := startLines(cmd)
	if err != nil {
		return err
	}
	defer func() { _ = stdin.Close(); _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	say := func(word string, every time.Duration) error {
		deadline := time.Now().Add(90 * time.Second)
		for time.Now().Before(deadline) {
			if _, err := io.WriteString(stdin, word+"\n"); err != nil {
				return fmt.Errorf("write %q: %w", word, err)
			}
			if waitLine(lines, "got:"+word, every) {
				return nil
			}
		}
		return fmt.Errorf("no answer to %q through kubectl exec", word)
	}
	if err := say("first", time.Second); err != nil {
		return err
	}
	start := time.Now()
	time.Sleep(longSession)
	if err := say("last", 90*time.Second); err != nil { // said once: the answer proves the session
		return fmt.Errorf("after %s of silence: %w", time.Since(start).Round(time.Second), err)
	}
	t.Logf("exec session answered after %s of silence", time.Since(start).Round(time.Second))
	return nil
}

// longPortForward fetches a page through kubectl port-forward, stays
// silent for longSession, and fetches it again through the same session.
func longPortForward(t *testing.T, cn *clusterNode) error {
	ctx, cancel := context.WithTimeout(context.Background(), longSession+5*time.Minute)
	defer cancel()
	kc := kubectl(cn.c, "-n", cn.ns, "port-forward", "pod/web", ":8080")
	cmd := exec.CommandContext(ctx, kc.Path, kc.Args[1:]...)
	lines, err := startLines(cmd)
	if err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	defer func() { _ = cmd.Process.Kill(); <-exited }()
	re := regexp.MustCompile(`Forwarding from 127\.0\.0\.1:(\d+) -> 8080`)
	var port string
	timeout := time.After(90 * time.Second)
	for port == "" {
		select {
		case l, ok := <-lines:
			if !ok {
				return errors.New("kubectl port-forward exited before forwarding")
			}
			if m := re.FindStringSubmatch(l); m != nil {
				port = m[1]
			}
		case <-timeout:
			return errors.New("kubectl port-forward printed no local port")
		}
	}
	get := func() (string, error) {
		c := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
		var body string
		err := wait.PollUntilContextTimeout(ctx, time.Second, 60*time.Second, true, func(context.Context) (bool, error) {
			resp, err := c.Get("http://127.0.0.1:" + port + "/")
			if err != nil {
				return false, nil
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			body = string(b)
			return true, nil
		})
		return body, err
	}
	if got, err := get(); err != nil || got != "long-lived\n" {
		return fmt.Errorf("first page: %q %v", got, err)
	}
	start := time.Now()
	select {
	case <-exited:
		return fmt.Errorf("kubectl port-forward exited after %s of silence", time.Since(start).Round(time.Second))
	case <-time.After(longSession):
	}
	if got, err := get(); err != nil || got != "long-lived\n" {
		return fmt.Errorf("page after %s of silence: %q %v", time.Since(start).Round(time.Second), got, err)
	}
	t.Logf("port-forward served a page after %s of silence", time.Since(start).Round(time.Second))
	return nil
}

// startLines starts cmd and sends its stdout and stderr lines to the
// channel, which is closed when both end.
func startLines(cmd *exec.Cmd) (<-chan string, error) {
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	errOut, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	lines := make(chan string, 1024)
	var wg sync.WaitGroup
	for _, r := range []io.Reader{out, errOut} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sc := bufio.NewScanner(r)
			for sc.Scan() {
				lines <- sc.Text()
			}
		}()
	}
	go func() { wg.Wait(); close(lines) }()
	return lines, nil
}

// waitLine waits up to d for the line want.
func waitLine(lines <-chan string, want string, d time.Duration) bool {
	timeout := time.After(d)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				return false
			}
			if strings.TrimSpace(l) == want {
				return true
			}
		case <-timeout:
			return false
		}
	}
}
