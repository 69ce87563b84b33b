package url

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/skiff-sh/skiff/internal/podsource"
)

const podYAML = `apiVersion: v1
kind: Pod
metadata: {name: web, namespace: ns1}
spec:
  containers: [{name: c, image: busybox}]
`

const podListJSON = `{"apiVersion":"v1","kind":"PodList","items":[
 {"metadata":{"name":"a"},"spec":{"containers":[{"name":"c","image":"busybox"}]}},
 {"metadata":{"name":"b","uid":"fixed-uid"},"spec":{"containers":[{"name":"c","image":"busybox"}]}}]}`

// server serves whatever body is set, and records the headers it got.
type server struct {
	mu     sync.Mutex
	status int
	body   string
	header http.Header
}

func (s *server) set(status int, body string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status, s.body = status, body
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.header = r.Header.Clone()
	w.WriteHeader(s.status)
	_, _ = w.Write([]byte(s.body))
}

func next(t *testing.T, ch <-chan podsource.Update) podsource.Update {
	t.Helper()
	select {
	case u := <-ch:
		return u
	case <-time.After(10 * time.Second):
		t.Fatal("no update")
	}
	return podsource.Update{}
}

func TestSourceFollowsTheURL(t *testing.T) {
	srv := &server{status: http.StatusOK, body: podYAML}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := make(chan podsource.Update)
	src := New(Config{URL: ts.URL, NodeName: "node1", Period: 50 * time.Millisecond,
		Header: map[string][]string{"Authorization": {"Bearer x"}, "X-Multi": {"1", "2"}}})
	done := make(chan struct{})
	go func() { src.Run(ctx, out); close(done) }()

	u := next(t, out)
	if u.Source != podsource.HTTP || len(u.Pods) != 1 {
		t.Fatalf("update %+v", u)
	}
	p := u.Pods[0]
	if p.Name != "web-node1" || p.Namespace != "ns1" || p.Spec.NodeName != "node1" || p.UID == "" ||
		p.Annotations[podsource.ConfigSourceAnnotation] != "http" || p.Annotations[podsource.ConfigHashAnnotation] != string(p.UID) ||
		p.Annotations[podsource.ConfigSeenAnnotation] == "" {
		t.Errorf("pod %s/%s uid %q node %q annotations %v", p.Namespace, p.Name, p.UID, p.Spec.NodeName, p.Annotations)
	}
	firstUID := p.UID
	srv.mu.Lock()
	h := srv.header
	srv.mu.Unlock()
	if h.Get("Authorization") != "Bearer x" || len(h.Values("X-Multi")) != 2 {
		t.Errorf("headers sent: %v", h)
	}

	// A bad answer or an error status keeps the last pods: nothing is sent.
	srv.set(http.StatusOK, "kind: Pod\napiVersion: v1\nmetadata: {name: x}\nspec: {containerz: []}\n")
	srv.set(http.StatusNotFound, "")
	select {
	case u := <-out:
		t.Fatalf("update after a failed fetch: %+v", u)
	case <-time.After(300 * time.Millisecond):
	}

	srv.set(http.StatusOK, podListJSON)
	u = next(t, out)
	if len(u.Pods) != 2 || u.Pods[0].Namespace != "default" || u.Pods[1].UID != "fixed-uid" || u.Pods[0].UID == firstUID {
		t.Fatalf("pod list update: %d pods %+v", len(u.Pods), u.Pods)
	}

	srv.set(http.StatusOK, "")
	if u = next(t, out); len(u.Pods) != 0 {
		t.Errorf("empty answer gave %d pods", len(u.Pods))
	}
	cancel()
	<-done
}

func TestDecodePodsRefuses(t *testing.T) {
	for name, body := range map[string]string{
		"unknown field": "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec: {containers: [{name: c, image: i}], bogus: 1}\n",
		"no name":       "apiVersion: v1\nkind: Pod\nspec: {containers: [{name: c, image: i}]}\n",
		"wrong kind":    "apiVersion: v1\nkind: Service\nmetadata: {name: a}\n",
		"invalid pod":   "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec: {containers: []}\n",
		"bad list item": `{"apiVersion":"v1","kind":"PodList","items":[{"metadata":{"name":"a"},"spec":{"containers":[{"name":"c","image":"i"}]}},{"metadata":{"name":"b"}}]}`,
	} {
		if pods, err := decodePods([]byte(body), "http://x", "n"); err == nil {
			t.Errorf("%s: accepted, %d pods", name, len(pods))
		}
	}
	// The same pod from the same URL keeps its UID, whatever the formatting.
	a, err := decodePods([]byte(podYAML), "http://x", "n")
	if err != nil {
		t.Fatal(err)
	}
	b, err := decodePods([]byte(`{"kind":"Pod","apiVersion":"v1","metadata":{"namespace":"ns1","name":"web"},"spec":{"containers":[{"image":"busybox","name":"c"}]}}`), "http://x", "n")
	if err != nil {
		t.Fatal(err)
	}
	c, err := decodePods([]byte(podYAML), "http://y", "n")
	if err != nil {
		t.Fatal(err)
	}
	if a[0].UID != b[0].UID || a[0].UID == c[0].UID {
		t.Errorf("UIDs %s %s %s", a[0].UID, b[0].UID, c[0].UID)
	}
}
