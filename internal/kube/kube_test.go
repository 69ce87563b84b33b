package kube

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
)

// The clients of all six groups share one HTTP client and user agent.
func TestNewForConfig(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Method+" "+r.URL.Path+" "+r.UserAgent())
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`))
	}))
	defer srv.Close()
	c, err := NewForConfig(&rest.Config{Host: srv.URL, UserAgent: "skiff-test", QPS: 5, Burst: 10})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	_, _ = c.CoreV1().Pods("ns").Get(ctx, "p", metav1.GetOptions{})
	_, _ = c.CoordinationV1().Leases("kube-node-lease").Get(ctx, "n", metav1.GetOptions{})
	_, _ = c.CertificatesV1().CertificateSigningRequests().Get(ctx, "c", metav1.GetOptions{})
	_, _ = c.CertificatesV1beta1().ClusterTrustBundles().Get(ctx, "b", metav1.GetOptions{})
	want := []string{
		"GET /api/v1/namespaces/ns/pods/p skiff-test",
		"GET /apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n skiff-test",
		"GET /apis/certificates.k8s.io/v1/certificatesigningrequests/c skiff-test",
		"GET /apis/certificates.k8s.io/v1beta1/clustertrustbundles/b skiff-test",
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != len(want) {
		t.Fatalf("requests %q, want %q", seen, want)
	}
	for i := range want {
		if seen[i] != want[i] {
			t.Errorf("request %d: %q, want %q", i, seen[i], want[i])
		}
	}
	if c.AuthenticationV1() == nil || c.AuthorizationV1() == nil {
		t.Error("no authentication or authorization client")
	}
	if _, err := NewForConfig(&rest.Config{Host: srv.URL, QPS: 5}); err == nil {
		t.Error("QPS without burst accepted")
	}
}

// NewInformer lists and watches through the typed client with the
// tweaked options, and its store follows the apiserver.
func TestNewInformer(t *testing.T) {
	client := fake.NewClientset(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns"}})
	var mu sync.Mutex
	var selectors []string
	client.PrependReactor("list", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		selectors = append(selectors, a.(k8stesting.ListAction).GetListRestrictions().Fields.String())
		return false, nil, nil
	})
	inf := NewInformer(client.CoreV1().Pods(""), &v1.Pod{}, func(o *metav1.ListOptions) { o.FieldSelector = "spec.nodeName=n1" })
	ctx, cancel := context.WithCancel(context.Background())
	wait := RunInformer(ctx, inf)
	defer func() { cancel(); wait() }()
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("no sync")
	}
	if _, err := client.CoreV1().Pods("ns").Create(ctx, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "ns"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(inf.GetStore().List()) != 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := len(inf.GetStore().List()); n != 2 {
		t.Errorf("%d pods in the store, want 2", n)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(selectors) == 0 || selectors[0] != "spec.nodeName=n1" {
		t.Errorf("list field selectors %q, want spec.nodeName=n1", selectors)
	}
}

// An unthrottled client has no rate limiter, sends through the main
// client's transport, and gives up on a stuck request after its timeout.
func TestNewUnthrottled(t *testing.T) {
	release := make(chan struct{})
	var mu sync.Mutex
	count := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/v1/namespaces/ns/pods/stuck" {
			<-release
		}
		mu.Lock()
		count++
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`))
	}))
	defer srv.Close()
	defer close(release)
	tr := &countingTransport{rt: http.DefaultTransport}
	main := &rest.Config{Host: srv.URL, QPS: 1, Burst: 1, Transport: tr}
	hb, err := NewUnthrottled(main, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for name, rc := range map[string]rest.Interface{
		"core": hb.CoreV1().RESTClient(), "coordination": hb.CoordinationV1().RESTClient(),
		"authentication": hb.AuthenticationV1().RESTClient(), "authorization": hb.AuthorizationV1().RESTClient(),
	} {
		if rc.GetRateLimiter() != nil {
			t.Errorf("the %s client has a rate limiter", name)
		}
	}
	var wg sync.WaitGroup
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = hb.CoordinationV1().Leases("kube-node-lease").Get(ctx, "n", metav1.GetOptions{})
		}()
	}
	wg.Wait()
	if tr.n.Load() != 50 {
		t.Errorf("%d requests went through the main client's transport, want 50", tr.n.Load())
	}
	_, err = hb.CoreV1().Pods("ns").Get(ctx, "stuck", metav1.GetOptions{})
	if err == nil {
		t.Error("a request the server never answers succeeded")
	}
	if main.QPS != 1 || main.Burst != 1 || main.Timeout != 0 {
		t.Errorf("the main config changed: %+v", main)
	}
}

type countingTransport struct {
	rt http.RoundTripper
	n  atomic.Int64
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.rt.RoundTrip(r)
}

func TestHeartbeatTimeout(t *testing.T) {
	if got := HeartbeatTimeout(10*time.Second, 40); got != 10*time.Second {
		t.Errorf("10s, 40s lease: %s", got)
	}
	if got := HeartbeatTimeout(time.Minute, 40); got != 40*time.Second {
		t.Errorf("1m, 40s lease: %s", got)
	}
}
