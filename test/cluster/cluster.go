package cluster

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Options configures Start. The zero value is usable: every field has a default.
type Options struct {
	// Dir holds all state: certificates, etcd data, logs, kubeconfigs, pid
	// files. Default: a new temporary directory that Stop removes. A Dir
	// that was used before is reused: its CA, service-account key, etcd
	// data and (when the port fields are 0) ports are kept, so kubeconfigs
	// written earlier stay valid.
	Dir string
	// BinDir holds kube-apiserver, kube-controller-manager, kube-scheduler
	// and etcd. Default: <repo>/_output/bin, <repo> being the nearest
	// directory above the working directory with a go.mod.
	BinDir string
	// APIPort is the apiserver's secure port; 0 picks a free one.
	APIPort int
	// EtcdPort is etcd's client port (peer port: a free one); 0 picks a free one.
	EtcdPort int
	// AdvertiseAddress is the apiserver's address as published in the
	// kubernetes Service and used in every kubeconfig. It must not be a
	// loopback address (the apiserver refuses those as the kubernetes
	// Service endpoint). Default: the IPv4 address of the interface of the
	// default route.
	AdvertiseAddress string
	// ServiceCIDR is the Service IP range. Default 10.96.0.0/16; the first
	// address (10.96.0.1) is the kubernetes Service.
	ServiceCIDR string
	// ClusterCIDR is the pod range the controller-manager carves node
	// podCIDRs (/24 each) from. Default 10.89.0.0/16.
	ClusterCIDR string
	// NodeMonitorGracePeriod is how long a Node may go without a status
	// update before the node lifecycle controller marks it NotReady/Unknown.
	// Default 40s.
	NodeMonitorGracePeriod time.Duration
	// ClusterSigningDuration is the lifetime of certificates signed for
	// CSRs (--cluster-signing-duration). 0 keeps the upstream default (one
	// year); short values let tests exercise kubelet certificate rotation.
	ClusterSigningDuration time.Duration
	// EtcdFsync keeps etcd's fsyncs. By default etcd runs with
	// --unsafe-no-fsync: a throwaway cluster does not need durability and
	// fsyncs dominate apiserver write latency on slow disks.
	EtcdFsync bool
	// Detached leaves the processes running when the calling process exits
	// (skiff-cluster up). By default each process gets SIGKILL when the
	// caller dies, so a test binary that panics or times out leaves no
	// control plane behind.
	Detached bool
	// StartTimeout bounds Start (on top of its context). Default 3 minutes.
	StartTimeout time.Duration
	// Extra arguments, appended after Start's own (so they win).
	ExtraAPIServerArgs         []string
	ExtraControllerManagerArgs []string
	ExtraSchedulerArgs         []string
	ExtraEtcdArgs              []string

	// Ports of the other listeners, all on 127.0.0.1; 0 picks free ones.
	// Not settable from outside: kept so a restart on the same Dir reuses them.
	etcdPeerPort, controllerManagerPort, schedulerPort int
}

// Component names: the log file of each is <Dir>/logs/<name>.log and its
// pid file <Dir>/run/<name>.pid.
const (
	Etcd              = "etcd"
	APIServer         = "kube-apiserver"
	ControllerManager = "kube-controller-manager"
	Scheduler         = "kube-scheduler"
)

const (
	serviceAccountIssuer = "https://kubernetes.default.svc.cluster.local"
	stateFile            = "state.json"
	stopGrace            = 20 * time.Second
)

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

// state is <Dir>/state.json: what Load needs to find a cluster again.
type state struct {
	Options struct {
		BinDir                 string        `json:"binDir"`
		APIPort                int           `json:"apiPort"`
		EtcdPort               int           `json:"etcdPort"`
		EtcdPeerPort           int           `json:"etcdPeerPort"`
		ControllerManagerPort  int           `json:"controllerManagerPort"`
		SchedulerPort          int           `json:"schedulerPort"`
		AdvertiseAddress       string        `json:"advertiseAddress"`
		ServiceCIDR            string        `json:"serviceCIDR"`
		ClusterCIDR            string        `json:"clusterCIDR"`
		NodeMonitorGracePeriod time.Duration `json:"nodeMonitorGracePeriod"`
		ClusterSigningDuration time.Duration `json:"clusterSigningDuration"`
	} `json:"options"`
	APIServerURL string     `json:"apiServerURL"`
	Processes    []*process `json:"processes"` // empty once stopped
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

// resolve fills in c.opts from o and defaults, and prepares Dir.
func (c *Cluster) resolve(o Options) error {
	if o.Dir == "" {
		d, err := os.MkdirTemp("", "skiff-cluster-")
		if err != nil {
			return err
		}
		o.Dir, c.removeDir = d, true
	}
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return err
	}
	o.Dir = dir
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return err
	}
	c.opts = o // so c.path works from here on

	// A cluster already running in Dir must be stopped first.
	if prev, err := Load(o.Dir); err == nil {
		if prev.Running() {
			return fmt.Errorf("a control plane is already running in %s (stop it first)", o.Dir)
		}
		// Reuse ports so kubeconfigs written before (server URL) and
		// etcd's stored member peer URL stay valid, if they are free.
		p := prev.opts
		reuse := func(want *int, old int) {
			if *want == 0 && old != 0 && portFree(old) {
				*want = old
			}
		}
		reuse(&o.APIPort, p.APIPort)
		reuse(&o.EtcdPort, p.EtcdPort)
		reuse(&o.etcdPeerPort, p.etcdPeerPort)
		reuse(&o.controllerManagerPort, p.controllerManagerPort)
		reuse(&o.schedulerPort, p.schedulerPort)
	}

	if o.BinDir == "" {
		root, err := repoRoot()
		if err != nil {
			return fmt.Errorf("finding the default BinDir: %w", err)
		}
		o.BinDir = filepath.Join(root, "_output", "bin")
	}
	if o.BinDir, err = filepath.Abs(o.BinDir); err != nil {
		return err
	}
	for _, b := range []string{Etcd, APIServer, ControllerManager, Scheduler} {
		if fi, err := os.Stat(filepath.Join(o.BinDir, b)); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			return fmt.Errorf("%s is not an executable in %s (build the control plane with hack/build-tools.sh)", b, o.BinDir)
		}
	}

	if o.AdvertiseAddress == "" {
		ip, err := defaultRouteIPv4()
		if err != nil {
			return fmt.Errorf("finding the advertise address: %w", err)
		}
		o.AdvertiseAddress = ip.String()
	}
	if ip := net.ParseIP(o.AdvertiseAddress); ip == nil || ip.IsLoopback() || ip.IsUnspecified() {
		return fmt.Errorf("AdvertiseAddress %q: need a non-loopback IP address", o.AdvertiseAddress)
	}
	if o.ServiceCIDR == "" {
		o.ServiceCIDR = "10.96.0.0/16"
	}
	if o.ClusterCIDR == "" {
		o.ClusterCIDR = "10.89.0.0/16"
	}
	for _, cidr := range []string{o.ServiceCIDR, o.ClusterCIDR} {
		if _, _, err := net.ParseCIDR(cidr); err != nil {
			return err
		}
	}
	if o.NodeMonitorGracePeriod == 0 {
		o.NodeMonitorGracePeriod = 40 * time.Second
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = 3 * time.Minute
	}

	// Ports: explicit ones must be free, 0 picks one.
	taken := map[int]bool{}
	for _, p := range []struct {
		name string
		port *int
	}{
		{"APIPort", &o.APIPort},
		{"EtcdPort", &o.EtcdPort},
		{"etcd peer port", &o.etcdPeerPort},
		{"controller-manager port", &o.controllerManagerPort},
		{"scheduler port", &o.schedulerPort},
	} {
		if *p.port == 0 {
			for {
				fp, err := freePort()
				if err != nil {
					return err
				}
				if !taken[fp] {
					*p.port = fp
					break
				}
			}
		} else if !portFree(*p.port) {
			return fmt.Errorf("%s %d is in use", p.name, *p.port)
		}
		if taken[*p.port] {
			return fmt.Errorf("%s %d is also used for another listener", p.name, *p.port)
		}
		taken[*p.port] = true
	}
	c.opts = o
	c.apiURL = "https://" + net.JoinHostPort(o.AdvertiseAddress, strconv.Itoa(o.APIPort))
	return nil
}

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

	o := c.opts
	loop := func(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }

	// etcd, without TLS, on loopback.
	etcdArgs := []string{
		"--name=skiff",
		"--data-dir=" + c.path("etcd"),
		"--listen-client-urls=http://" + loop(o.EtcdPort),
		"--advertise-client-urls=http://" + loop(o.EtcdPort),
		"--listen-peer-urls=http://" + loop(o.etcdPeerPort),
		"--initial-advertise-peer-urls=http://" + loop(o.etcdPeerPort),
		"--initial-cluster=skiff=http://" + loop(o.etcdPeerPort),
		"--initial-cluster-state=new",
	}
	if !o.EtcdFsync {
		etcdArgs = append(etcdArgs, "--unsafe-no-fsync")
	}
	etcd, err := c.run(Etcd, append(etcdArgs, o.ExtraEtcdArgs...))
	if err != nil {
		return err
	}
	etcdHealth := "http://" + loop(o.EtcdPort) + "/health"
	if err := c.waitFor(ctx, "etcd health", []*process{etcd}, func(ctx context.Context) error {
		body, err := httpGet(ctx, http.DefaultClient, etcdHealth)
		if err == nil && !strings.Contains(body, `"health":"true"`) {
			err = fmt.Errorf("etcd /health: %s", body)
		}
		return err
	}); err != nil {
		return err
	}

	pki := func(f string) string { return c.path("pki", f) }
	apiArgs := []string{
		"--advertise-address=" + o.AdvertiseAddress,
		"--bind-address=0.0.0.0",
		"--secure-port=" + strconv.Itoa(o.APIPort),
		"--cert-dir=" + c.path("certs", APIServer),
		"--etcd-servers=http://" + loop(o.EtcdPort),
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
		"--profiling=false",
		// ClusterTrustBundles (beta, off by default in 1.34) so projected
		// volumes can use them.
		"--feature-gates=ClusterTrustBundle=true,ClusterTrustBundleProjection=true",
		"--runtime-config=certificates.k8s.io/v1beta1/clustertrustbundles=true",
	}
	api, err := c.run(APIServer, append(apiArgs, o.ExtraAPIServerArgs...))
	if err != nil {
		return err
	}
	if err := c.waitFor(ctx, "kube-apiserver /readyz", []*process{etcd, api}, func(ctx context.Context) error {
		body, err := c.client.Discovery().RESTClient().Get().AbsPath("/readyz").Do(ctx).Raw()
		if err != nil {
			return fmt.Errorf("/readyz: %s", failedChecks(string(body), err))
		}
		return nil
	}); err != nil {
		return err
	}

	cmKubeconfig := c.path("kubeconfigs", ControllerManager+".kubeconfig")
	cmArgs := []string{
		"--kubeconfig=" + cmKubeconfig,
		"--authentication-kubeconfig=" + cmKubeconfig,
		"--authorization-kubeconfig=" + cmKubeconfig,
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
		cmArgs = append(cmArgs, "--cluster-signing-duration="+o.ClusterSigningDuration.String())
	}
	cm, err := c.run(ControllerManager, append(cmArgs, o.ExtraControllerManagerArgs...))
	if err != nil {
		return err
	}

	schedKubeconfig := c.path("kubeconfigs", Scheduler+".kubeconfig")
	schedArgs := []string{
		"--kubeconfig=" + schedKubeconfig,
		"--authentication-kubeconfig=" + schedKubeconfig,
		"--authorization-kubeconfig=" + schedKubeconfig,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(o.schedulerPort),
		"--cert-dir=" + c.path("certs", Scheduler),
		"--leader-elect=false",
		"--profiling=false",
	}
	sched, err := c.run(Scheduler, append(schedArgs, o.ExtraSchedulerArgs...))
	if err != nil {
		return err
	}

	all := []*process{etcd, api, cm, sched}
	insecure := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	defer insecure.CloseIdleConnections()
	healthz := func(port int) func(context.Context) error {
		url := "https://" + loop(port) + "/healthz"
		return func(ctx context.Context) error {
			body, err := httpGet(ctx, insecure, url)
			if err == nil && body != "ok" {
				err = fmt.Errorf("%s: %q", url, body)
			}
			return err
		}
	}
	if err := c.waitFor(ctx, "kube-controller-manager /healthz", all, healthz(o.controllerManagerPort)); err != nil {
		return err
	}
	if err := c.waitFor(ctx, "kube-scheduler /healthz", all, healthz(o.schedulerPort)); err != nil {
		return err
	}
	if err := c.waitFor(ctx, "the default ServiceAccount in namespace default", all, func(ctx context.Context) error {
		_, err := c.client.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{})
		return err
	}); err != nil {
		return err
	}
	return c.waitFor(ctx, "the kube-root-ca.crt ConfigMap in namespace default", all, func(ctx context.Context) error {
		_, err := c.client.CoreV1().ConfigMaps(metav1.NamespaceDefault).Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
		return err
	})
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

// writePKI makes (or, for the CA and the service-account key, reuses) the
// certificates and writes the kubeconfigs of the admin, the
// controller-manager and the scheduler.
func (c *Cluster) writePKI() error {
	pki := c.path("pki")
	if err := os.MkdirAll(pki, 0o700); err != nil {
		return err
	}
	ca, err := loadOrCreateCA(filepath.Join(pki, "ca"), "skiff-cluster-ca")
	if err != nil {
		return err
	}
	// The front-proxy CA only fills in the apiserver's requestheader
	// configuration (as kubeadm does): without it the controller-manager
	// and scheduler log an error about the missing requestheader CA
	// bundle every few seconds.
	frontProxyCA, err := loadOrCreateCA(filepath.Join(pki, "front-proxy-ca"), "skiff-front-proxy-ca")
	if err != nil {
		return err
	}
	frontProxyClient, err := frontProxyCA.sign(leafSpec{cn: "front-proxy-client", client: true})
	if err != nil {
		return err
	}
	if err := frontProxyClient.write(filepath.Join(pki, "front-proxy-client")); err != nil {
		return err
	}
	if err := ensureServiceAccountKey(filepath.Join(pki, "sa.key"), filepath.Join(pki, "sa.pub")); err != nil {
		return err
	}

	_, svcNet, _ := net.ParseCIDR(c.opts.ServiceCIDR)
	firstSvcIP := make(net.IP, len(svcNet.IP))
	copy(firstSvcIP, svcNet.IP)
	firstSvcIP[len(firstSvcIP)-1]++
	serving := leafSpec{
		cn:     APIServer,
		server: true,
		dns:    []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		ips:    []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(c.opts.AdvertiseAddress), firstSvcIP},
	}
	if h, err := os.Hostname(); err == nil && h != "" {
		serving.dns = append(serving.dns, strings.ToLower(h))
	}
	leaves := []struct {
		file string
		spec leafSpec
	}{
		{"apiserver", serving},
		{"apiserver-kubelet-client", leafSpec{cn: "kube-apiserver-kubelet-client", orgs: []string{"system:masters"}, client: true}},
		{"admin", leafSpec{cn: "kubernetes-admin", orgs: []string{"system:masters"}, client: true}},
		{ControllerManager, leafSpec{cn: "system:kube-controller-manager", client: true}},
		{Scheduler, leafSpec{cn: "system:kube-scheduler", client: true}},
	}
	for _, l := range leaves {
		kp, err := ca.sign(l.spec)
		if err != nil {
			return err
		}
		if err := kp.write(filepath.Join(pki, l.file)); err != nil {
			return err
		}
		var kubeconfig string
		switch l.file {
		case "admin":
			kubeconfig = c.AdminKubeconfig()
		case ControllerManager, Scheduler:
			kubeconfig = c.path("kubeconfigs", l.file+".kubeconfig")
		default:
			continue
		}
		keyPEM, err := kp.keyPEM()
		if err != nil {
			return err
		}
		if err := writeKubeconfig(kubeconfig, c.apiURL, ca.certPEM(), kubeconfigUser{name: l.spec.cn, certPEM: kp.certPEM(), keyPEM: keyPEM}); err != nil {
			return err
		}
	}
	return nil
}

// initClient builds the admin rest.Config and clientset.
func (c *Cluster) initClient() error {
	cfg, err := clientcmd.BuildConfigFromFlags("", c.AdminKubeconfig())
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 100, 200
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	c.restConfig, c.client = cfg, cs
	return nil
}

// writeState records the resolved options and the processes in
// <Dir>/state.json and one <Dir>/run/<name>.pid per running process.
func (c *Cluster) writeState() error {
	var s state
	o := c.opts
	s.Options.BinDir = o.BinDir
	s.Options.APIPort, s.Options.EtcdPort, s.Options.EtcdPeerPort = o.APIPort, o.EtcdPort, o.etcdPeerPort
	s.Options.ControllerManagerPort, s.Options.SchedulerPort = o.controllerManagerPort, o.schedulerPort
	s.Options.AdvertiseAddress, s.Options.ServiceCIDR, s.Options.ClusterCIDR = o.AdvertiseAddress, o.ServiceCIDR, o.ClusterCIDR
	s.Options.NodeMonitorGracePeriod, s.Options.ClusterSigningDuration = o.NodeMonitorGracePeriod, o.ClusterSigningDuration
	s.APIServerURL = c.apiURL
	c.mu.Lock()
	s.Processes = append([]*process(nil), c.procs...)
	c.mu.Unlock()
	data, err := json.MarshalIndent(&s, "", "  ")
	if err != nil {
		return err
	}
	run := c.path("run")
	if err := os.MkdirAll(run, 0o755); err != nil {
		return err
	}
	live := map[string]bool{}
	for _, p := range s.Processes {
		live[p.Name+".pid"] = true
		if err := writeFileAtomic(filepath.Join(run, p.Name+".pid"), []byte(strconv.Itoa(p.PID)+"\n"), 0o644); err != nil {
			return err
		}
	}
	if ents, err := os.ReadDir(run); err == nil {
		for _, e := range ents {
			if !live[e.Name()] {
				os.Remove(filepath.Join(run, e.Name()))
			}
		}
	}
	return writeFileAtomic(c.path(stateFile), data, 0o644)
}

// Load finds the cluster recorded in dir's state file, e.g. one started by
// `skiff-cluster up` in another process, whether or not it still runs
// (see Running and Check). Stop on the result stops its processes.
func Load(dir string) (*Cluster, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(filepath.Join(dir, stateFile))
	if err != nil {
		return nil, err
	}
	var s state
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, stateFile), err)
	}
	c := &Cluster{apiURL: s.APIServerURL, procs: s.Processes}
	c.opts = Options{
		Dir:                    dir,
		BinDir:                 s.Options.BinDir,
		APIPort:                s.Options.APIPort,
		EtcdPort:               s.Options.EtcdPort,
		AdvertiseAddress:       s.Options.AdvertiseAddress,
		ServiceCIDR:            s.Options.ServiceCIDR,
		ClusterCIDR:            s.Options.ClusterCIDR,
		NodeMonitorGracePeriod: s.Options.NodeMonitorGracePeriod,
		ClusterSigningDuration: s.Options.ClusterSigningDuration,
		Detached:               true,
		etcdPeerPort:           s.Options.EtcdPeerPort,
		controllerManagerPort:  s.Options.ControllerManagerPort,
		schedulerPort:          s.Options.SchedulerPort,
	}
	if err := c.initClient(); err != nil {
		return nil, err
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

// AdminKubeconfig is the path of a kubeconfig for kubernetes-admin
// (group system:masters).
func (c *Cluster) AdminKubeconfig() string { return c.path("admin.kubeconfig") }

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

// NodeKubeconfig writes a kubeconfig at path for the identity of node
// nodeName: a new client certificate with CN system:node:<nodeName> and O
// system:nodes, signed by the cluster CA, embedded in the file.
func (c *Cluster) NodeKubeconfig(nodeName, path string) error {
	ca, err := loadKeyPair(c.path("pki", "ca"))
	if err != nil {
		return err
	}
	user := "system:node:" + nodeName
	kp, err := ca.sign(leafSpec{cn: user, orgs: []string{"system:nodes"}, client: true})
	if err != nil {
		return err
	}
	keyPEM, err := kp.keyPEM()
	if err != nil {
		return err
	}
	return writeKubeconfig(path, c.apiURL, ca.certPEM(), kubeconfigUser{name: user, certPEM: kp.certPEM(), keyPEM: keyPEM})
}

// KubeconfigForToken writes a kubeconfig at path that authenticates with
// a bearer token (e.g. a ServiceAccount token).
func (c *Cluster) KubeconfigForToken(user, token, path string) error {
	caPEM, err := os.ReadFile(c.CAFile())
	if err != nil {
		return err
	}
	return writeKubeconfig(path, c.apiURL, caPEM, kubeconfigUser{name: user, token: token})
}

// repoRoot is the nearest directory above the working directory holding a
// go.mod or, failing that (a test binary run elsewhere), the nearest one
// above this source file as compiled.
func repoRoot() (string, error) {
	var starts []string
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		starts = append(starts, filepath.Dir(file))
	}
	for _, dir := range starts {
		for {
			if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
				return dir, nil
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				break
			}
			dir = parent
		}
	}
	return "", errors.New("no go.mod above the working directory")
}

// freePort asks the kernel for a free TCP port on all addresses.
func freePort() (int, error) {
	l, err := net.Listen("tcp", ":0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func portFree(port int) bool {
	l, err := net.Listen("tcp", ":"+strconv.Itoa(port))
	if err != nil {
		return false
	}
	l.Close()
	return true
}

// defaultRouteIPv4 is the first IPv4 address of the interface of the IPv4
// default route, or failing that of the first up, non-loopback interface.
func defaultRouteIPv4() (net.IP, error) {
	if data, err := os.ReadFile("/proc/net/route"); err == nil {
		for _, line := range strings.Split(string(data), "\n")[1:] {
			f := strings.Fields(line)
			// Iface Destination Gateway Flags RefCnt Use Metric Mask ...
			if len(f) < 8 || f[1] != "00000000" || f[7] != "00000000" {
				continue
			}
			if flags, err := strconv.ParseUint(f[3], 16, 32); err != nil || flags&1 == 0 { // RTF_UP
				continue
			}
			if ip := interfaceIPv4(f[0]); ip != nil {
				return ip, nil
			}
		}
	}
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, err
	}
	for _, i := range ifs {
		if i.Flags&net.FlagUp == 0 || i.Flags&net.FlagLoopback != 0 {
			continue
		}
		if ip := interfaceIPv4(i.Name); ip != nil {
			return ip, nil
		}
	}
	return nil, errors.New("no default route and no interface with an IPv4 address")
}

func interfaceIPv4(name string) net.IP {
	i, err := net.InterfaceByName(name)
	if err != nil {
		return nil
	}
	addrs, err := i.Addrs()
	if err != nil {
		return nil
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && n.IP.IsGlobalUnicast() {
			return n.IP.To4()
		}
	}
	return nil
}
