package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// stopGrace is how long Stop waits after SIGTERM before SIGKILL.
const stopGrace = 20 * time.Second

// Cluster is a running (or, after Stop, stopped) control plane.
type Cluster struct {
	opts      Options // resolved: no zero defaults left
	removeDir bool    // Dir was made by Start

	apiURL     string
	restConfig *rest.Config
	client     kubernetes.Interface

	mu       sync.Mutex
	procs    []*process
	stopErr  error
	stopDone chan struct{}
}

// Paths inside Dir.
func (c *Cluster) path(elem ...string) string {
	return filepath.Join(append([]string{c.opts.Dir}, elem...)...)
}

// Start starts etcd, kube-apiserver, kube-controller-manager and
// kube-scheduler and returns once /readyz is ok, the controller-manager
// and scheduler answer /healthz, and the default ServiceAccount and the
// kube-root-ca.crt ConfigMap exist in the default namespace. ctx bounds
// Start only: if it ends first, everything started is stopped. After
// Start returns the cluster runs until Stop (or, unless Detached, until
// the calling process exits).
func Start(ctx context.Context, o Options) (*Cluster, error) {
	c := &Cluster{}
	if err := c.resolve(o); err != nil {
		if c.removeDir {
			os.RemoveAll(c.opts.Dir)
		}
		return nil, err
	}
	ctx, cancel := context.WithTimeoutCause(ctx, c.opts.StartTimeout, fmt.Errorf("StartTimeout (%s) exceeded", c.opts.StartTimeout))
	defer cancel()
	if err := c.start(ctx); err != nil {
		if serr := c.Stop(); serr != nil {
			err = fmt.Errorf("%w (and stopping: %v)", err, serr)
		}
		if cause := context.Cause(ctx); cause != nil && cause != ctx.Err() {
			err = fmt.Errorf("%w (%v)", err, cause)
		}
		return nil, fmt.Errorf("starting the control plane in %s: %w", c.opts.Dir, err)
	}
	return c, nil
}

// Running reports whether any process of the cluster is still alive.
func (c *Cluster) Running() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.procs {
		if p.groupAlive() {
			return true
		}
	}
	return false
}

// Check returns nil if every process of the cluster runs, and otherwise an
// error naming the first one that does not, with the tail of its log.
func (c *Cluster) Check() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.procs) == 0 {
		return fmt.Errorf("no control plane runs in %s", c.opts.Dir)
	}
	for _, p := range c.procs {
		if p.exited() {
			return p.exitError()
		}
	}
	return nil
}

// Stop stops every process: SIGTERM to its process group, SIGKILL after
// 20 seconds. The apiserver, controller-manager and scheduler go first,
// etcd last. It is safe to call more than once and from several
// goroutines. A Dir made by Start is removed.
func (c *Cluster) Stop() error {
	c.mu.Lock()
	if c.stopDone != nil {
		done := c.stopDone
		c.mu.Unlock()
		<-done
		return c.stopErr
	}
	c.stopDone = make(chan struct{})
	procs := append([]*process(nil), c.procs...)
	c.mu.Unlock()

	var errs []error
	var etcd []*process
	var wg sync.WaitGroup
	var emu sync.Mutex
	for _, p := range procs {
		if p.Name == Etcd {
			etcd = append(etcd, p)
			continue
		}
		wg.Go(func() {
			if err := p.stop(stopGrace); err != nil {
				emu.Lock()
				errs = append(errs, err)
				emu.Unlock()
			}
		})
	}
	wg.Wait()
	for _, p := range etcd {
		if err := p.stop(stopGrace); err != nil {
			errs = append(errs, err)
		}
	}
	c.mu.Lock()
	if len(errs) == 0 {
		c.procs = nil
	}
	c.mu.Unlock()
	if len(errs) == 0 && c.opts.Dir != "" {
		if c.removeDir {
			if err := os.RemoveAll(c.opts.Dir); err != nil {
				errs = append(errs, err)
			}
		} else if err := c.writeState(); err != nil {
			errs = append(errs, err)
		}
	}
	c.stopErr = errors.Join(errs...)
	close(c.stopDone)
	return c.stopErr
}

// Dir is the cluster's state directory.
func (c *Cluster) Dir() string { return c.opts.Dir }

// Options returns the options the cluster runs with, defaults filled in.
func (c *Cluster) Options() Options {
	o := c.opts
	o.ExtraAPIServerArgs = append([]string(nil), o.ExtraAPIServerArgs...)
	o.ExtraControllerManagerArgs = append([]string(nil), o.ExtraControllerManagerArgs...)
	o.ExtraSchedulerArgs = append([]string(nil), o.ExtraSchedulerArgs...)
	o.ExtraEtcdArgs = append([]string(nil), o.ExtraEtcdArgs...)
	return o
}

// RESTConfig returns a copy of the admin rest.Config.
func (c *Cluster) RESTConfig() *rest.Config { return rest.CopyConfig(c.restConfig) }

// Client is a clientset authenticated as kubernetes-admin.
func (c *Cluster) Client() kubernetes.Interface { return c.client }

// APIServerURL is https://<AdvertiseAddress>:<APIPort>, the server of
// every kubeconfig the cluster writes.
func (c *Cluster) APIServerURL() string { return c.apiURL }

// CAFile is the cluster CA certificate (PEM): it signs the apiserver's
// serving certificate and every client certificate, and is the
// controller-manager's CSR signing CA.
func (c *Cluster) CAFile() string { return c.path("pki", "ca.crt") }

// CAKeyFile is the CA's private key (PEM, PKCS#8).
func (c *Cluster) CAKeyFile() string { return c.path("pki", "ca.key") }

// LogFile is the path of a component's log (Etcd, APIServer, ...).
func (c *Cluster) LogFile(component string) string {
	return c.path("logs", component+".log")
}

// PIDs maps each running component to its pid, which is also its process
// group id.
func (c *Cluster) PIDs() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := map[string]int{}
	for _, p := range c.procs {
		m[p.Name] = p.PID
	}
	return m
}
