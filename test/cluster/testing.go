package cluster

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NewNamespace creates a namespace named e2e-<random> and waits until its
// default ServiceAccount exists (pods are rejected until then). The
// namespace is deleted when the test ends (without waiting for it to go).
func (c *Cluster) NewNamespace(ctx context.Context, t testing.TB) string {
	t.Helper()
	ns, err := c.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating a namespace: %v", err)
	}
	name := ns.Name
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := c.client.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Logf("deleting namespace %s: %v", name, err)
		}
	})
	deadline := time.Now().Add(time.Minute)
	for {
		_, err := c.client.CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{})
		if err == nil {
			return name
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("waiting for the default ServiceAccount in namespace %s: %v", name, err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// StartForTest starts a cluster for one test (Options.Dir defaults to a
// directory under t.TempDir()) and stops it when the test ends. Most test
// packages should rather start one cluster in TestMain and share it.
func StartForTest(t testing.TB, o Options) *Cluster {
	t.Helper()
	if o.Dir == "" {
		o.Dir = t.TempDir()
	}
	c, err := Start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("stopping the control plane: %v", err)
		}
	})
	return c
}
