package cluster

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Component names: the log file of each is <Dir>/logs/<name>.log and its
// pid file <Dir>/run/<name>.pid.
const (
	Etcd              = "etcd"
	APIServer         = "kube-apiserver"
	ControllerManager = "kube-controller-manager"
	Scheduler         = "kube-scheduler"
)

const serviceAccountIssuer = "https://kubernetes.default.svc.cluster.local"

// loopback is 127.0.0.1:port, where etcd, the controller-manager and the
// scheduler listen.
func loopback(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }

// start writes the certificates, kubeconfigs and state file, then starts
// the components in order, each once the one it needs is healthy.
func (c *Cluster) start(ctx context.Context) error {
	if err := c.writePKI(); err != nil {
		return fmt.Errorf("certificates: %w", err)
	}
	if err := c.initClient(); err != nil {
		return err
	}
	if err := c.writeState(); err != nil {
		return err
	}
	etcd, err := c.startEtcd(ctx)
	if err != nil {
		return err
	}
	api, err := c.startAPIServer(ctx, etcd)
	if err != nil {
		return err
	}
	cm, err := c.run(ControllerManager, append(c.controllerManagerArgs(), c.opts.ExtraControllerManagerArgs...))
	if err != nil {
		return err
	}
	sched, err := c.run(Scheduler, append(c.schedulerArgs(), c.opts.ExtraSchedulerArgs...))
	if err != nil {
		return err
	}
	return c.waitReady(ctx, []*process{etcd, api, cm, sched})
}

// startEtcd starts etcd, without TLS, on loopback and waits until it is
// healthy.
func (c *Cluster) startEtcd(ctx context.Context) (*process, error) {
	o := c.opts
	args := []string{
		"--name=skiff",
		"--data-dir=" + c.path("etcd"),
		"--listen-client-urls=http://" + loopback(o.EtcdPort),
		"--advertise-client-urls=http://" + loopback(o.EtcdPort),
		"--listen-peer-urls=http://" + loopback(o.etcdPeerPort),
		"--initial-advertise-peer-urls=http://" + loopback(o.etcdPeerPort),
		"--initial-cluster=skiff=http://" + loopback(o.etcdPeerPort),
		"--initial-cluster-state=new",
	}
	if !o.EtcdFsync {
		args = append(args, "--unsafe-no-fsync")
	}
	etcd, err := c.run(Etcd, append(args, o.ExtraEtcdArgs...))
	if err != nil {
		return nil, err
	}
	health := "http://" + loopback(o.EtcdPort) + "/health"
	return etcd, c.waitFor(ctx, "etcd health", []*process{etcd}, func(ctx context.Context) error {
		body, err := httpGet(ctx, http.DefaultClient, health)
		if err == nil && !strings.Contains(body, `"health":"true"`) {
			err = fmt.Errorf("etcd /health: %s", body)
		}
		return err
	})
}

// startAPIServer starts kube-apiserver and waits until /readyz is ok.
func (c *Cluster) startAPIServer(ctx context.Context, etcd *process) (*process, error) {
	api, err := c.run(APIServer, append(c.apiServerArgs(), c.opts.ExtraAPIServerArgs...))
	if err != nil {
		return nil, err
	}
	return api, c.waitFor(ctx, "kube-apiserver /readyz", []*process{etcd, api}, func(ctx context.Context) error {
		body, err := c.client.Discovery().RESTClient().Get().AbsPath("/readyz").Do(ctx).Raw()
		if err != nil {
			return fmt.Errorf("/readyz: %s", failedChecks(string(body), err))
		}
		return nil
	})
}

func (c *Cluster) apiServerArgs() []string {
	o := c.opts
	pki := func(f string) string { return c.path("pki", f) }
	return []string{
		"--advertise-address=" + o.AdvertiseAddress,
		"--bind-address=0.0.0.0",
		"--secure-port=" + strconv.Itoa(o.APIPort),
		"--cert-dir=" + c.path("certs", APIServer),
		"--etcd-servers=http://" + loopback(o.EtcdPort),
		"--authorization-mode=Node,RBAC",
		"--enable-bootstrap-token-auth=true",
		"--enable-admission-plugins=NodeRestriction",
		"--allow-privileged=true",
		"--client-ca-file=" + pki("ca.crt"),
		"--tls-cert-file=" + pki("apiserver.crt"),
		"--tls-private-key-file=" + pki("apiserver.key"),
		"--kubelet-client-certificate=" + pki("apiserver-kubelet-client.crt"),
		"--kubelet-client-key=" + pki("apiserver-kubelet-client.key"),
		"--kubelet-preferred-address-types=InternalIP",
		"--service-account-issuer=" + serviceAccountIssuer,
		"--service-account-key-file=" + pki("sa.pub"),
		"--service-account-signing-key-file=" + pki("sa.key"),
		"--service-cluster-ip-range=" + o.ServiceCIDR,
		"--requestheader-client-ca-file=" + pki("front-proxy-ca.crt"),
		"--requestheader-allowed-names=front-proxy-client",
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file=" + pki("front-proxy-client.crt"),
		"--proxy-client-key-file=" + pki("front-proxy-client.key"),
		// Aggregated APIs (metrics-server's) are dialled at their pods'
		// addresses, on the node's bridge, not at Service IPs, which only
		// a kube-proxy on this host would route: without its rules the
		// apiserver's connections go out of the default route instead.
		"--enable-aggregator-routing=true",
		"--profiling=false",
		// ClusterTrustBundles (beta, off by default in 1.34) so projected
		// volumes can use them.
		"--feature-gates=ClusterTrustBundle=true,ClusterTrustBundleProjection=true",
		"--runtime-config=certificates.k8s.io/v1beta1/clustertrustbundles=true",
	}
}

func (c *Cluster) controllerManagerArgs() []string {
	o := c.opts
	kubeconfig := c.path("kubeconfigs", ControllerManager+".kubeconfig")
	pki := func(f string) string { return c.path("pki", f) }
	args := []string{
		"--kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(o.controllerManagerPort),
		"--cert-dir=" + c.path("certs", ControllerManager),
		"--leader-elect=false",
		"--controllers=*,bootstrapsigner,tokencleaner",
		"--use-service-account-credentials=true",
		"--service-account-private-key-file=" + pki("sa.key"),
		"--root-ca-file=" + pki("ca.crt"),
		"--cluster-signing-cert-file=" + pki("ca.crt"),
		"--cluster-signing-key-file=" + pki("ca.key"),
		"--allocate-node-cidrs=true",
		"--cluster-cidr=" + o.ClusterCIDR,
		"--node-cidr-mask-size=24",
		"--service-cluster-ip-range=" + o.ServiceCIDR,
		"--configure-cloud-routes=false",
		"--node-monitor-grace-period=" + o.NodeMonitorGracePeriod.String(),
		"--profiling=false",
	}
	if o.ClusterSigningDuration > 0 {
		args = append(args, "--cluster-signing-duration="+o.ClusterSigningDuration.String())
	}
	return args
}

func (c *Cluster) schedulerArgs() []string {
	kubeconfig := c.path("kubeconfigs", Scheduler+".kubeconfig")
	return []string{
		"--kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(c.opts.schedulerPort),
		"--cert-dir=" + c.path("certs", Scheduler),
		"--leader-elect=false",
		"--profiling=false",
	}
}

// waitReady waits until the controller-manager and the scheduler answer
// /healthz and the default ServiceAccount and kube-root-ca.crt ConfigMap
// exist in the default namespace; it fails at once if one of all exits.
func (c *Cluster) waitReady(ctx context.Context, all []*process) error {
	insecure := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	defer insecure.CloseIdleConnections()
	healthz := func(port int) func(context.Context) error {
		url := "https://" + loopback(port) + "/healthz"
		return func(ctx context.Context) error {
			body, err := httpGet(ctx, insecure, url)
			if err == nil && body != "ok" {
				err = fmt.Errorf("%s: %q", url, body)
			}
			return err
		}
	}
	core := c.client.CoreV1()
	conds := []struct {
		what string
		cond func(context.Context) error
	}{
		{"kube-controller-manager /healthz", healthz(c.opts.controllerManagerPort)},
		{"kube-scheduler /healthz", healthz(c.opts.schedulerPort)},
		{"the default ServiceAccount in namespace default", func(ctx context.Context) error {
			_, err := core.ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{})
			return err
		}},
		{"the kube-root-ca.crt ConfigMap in namespace default", func(ctx context.Context) error {
			_, err := core.ConfigMaps(metav1.NamespaceDefault).Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
			return err
		}},
	}
	for _, w := range conds {
		if err := c.waitFor(ctx, w.what, all, w.cond); err != nil {
			return err
		}
	}
	return nil
}

// run starts one component from BinDir and records it in the state file
// at once, so that `skiff-cluster down` finds it even if Start dies.
func (c *Cluster) run(name string, args []string) (*process, error) {
	p, err := startProcess(name, filepath.Join(c.opts.BinDir, name), args, c.path("logs", name+".log"), c.opts.Detached)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.procs = append(c.procs, p)
	c.mu.Unlock()
	return p, c.writeState()
}

// waitFor polls cond until it returns nil. It fails at once if one of
// watch exits, with the tail of its log, and when ctx ends, with cond's
// last error.
func (c *Cluster) waitFor(ctx context.Context, what string, watch []*process, cond func(context.Context) error) error {
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		for _, p := range watch {
			if p.exited() {
				return fmt.Errorf("waiting for %s: %w", what, p.exitError())
			}
		}
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := cond(cctx)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w (last error: %v)", what, ctx.Err(), err)
		case <-tick.C:
		}
	}
}

// failedChecks shortens a failed /readyz answer to its failing checks
// ("[-]etcd failed: ..."), or err if there are none.
func failedChecks(body string, err error) string {
	var failed []string
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, "[-]") {
			failed = append(failed, strings.TrimPrefix(l, "[-]"))
		}
	}
	if len(failed) == 0 {
		return err.Error()
	}
	return strings.Join(failed, "; ")
}

func httpGet(ctx context.Context, client *http.Client, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return string(body), fmt.Errorf("%s: %s: %s", url, resp.Status, body)
	}
	return string(body), nil
}
