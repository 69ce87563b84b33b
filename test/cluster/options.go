package cluster

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"time"

	"github.com/skiff-sh/skiff/test/ports"
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

// resolve fills in c.opts from o and defaults, and prepares Dir.
func (c *Cluster) resolve(o Options) error {
	if err := c.resolveDir(&o); err != nil {
		return err
	}
	// A cluster already running in Dir must be stopped first.
	if prev, err := Load(o.Dir); err == nil {
		if prev.Running() {
			return fmt.Errorf("a control plane is already running in %s (stop it first)", o.Dir)
		}
		reusePorts(&o, prev.opts)
	}
	if err := resolveBinDir(&o); err != nil {
		return err
	}
	if err := resolveNetwork(&o); err != nil {
		return err
	}
	if o.NodeMonitorGracePeriod == 0 {
		o.NodeMonitorGracePeriod = 40 * time.Second
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = 3 * time.Minute
	}
	if err := pickPorts(&o); err != nil {
		return err
	}
	c.opts = o
	c.apiURL = "https://" + net.JoinHostPort(o.AdvertiseAddress, strconv.Itoa(o.APIPort))
	return nil
}

// resolveDir makes o.Dir absolute and present (a new temporary directory,
// which Stop removes, when it is empty) and points c.path at it.
func (c *Cluster) resolveDir(o *Options) error {
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
	c.opts = *o // so c.path works from here on
	return nil
}

// reusePorts takes the ports a previous cluster in the same Dir used, where
// o leaves them to be picked and they are free: kubeconfigs written before
// (server URL) and etcd's stored member peer URL then stay valid.
func reusePorts(o *Options, prev Options) {
	reuse := func(want *int, old int) {
		if *want == 0 && old != 0 && ports.IsFree(old) {
			*want = old
		}
	}
	reuse(&o.APIPort, prev.APIPort)
	reuse(&o.EtcdPort, prev.EtcdPort)
	reuse(&o.etcdPeerPort, prev.etcdPeerPort)
	reuse(&o.controllerManagerPort, prev.controllerManagerPort)
	reuse(&o.schedulerPort, prev.schedulerPort)
}

// resolveBinDir defaults BinDir and checks that it holds every component.
func resolveBinDir(o *Options) error {
	if o.BinDir == "" {
		root, err := repoRoot()
		if err != nil {
			return fmt.Errorf("finding the default BinDir: %w", err)
		}
		o.BinDir = filepath.Join(root, "_output", "bin")
	}
	var err error
	if o.BinDir, err = filepath.Abs(o.BinDir); err != nil {
		return err
	}
	for _, b := range []string{Etcd, APIServer, ControllerManager, Scheduler} {
		if fi, err := os.Stat(filepath.Join(o.BinDir, b)); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			return fmt.Errorf("%s is not an executable in %s (build the control plane with hack/build-tools.sh)", b, o.BinDir)
		}
	}
	return nil
}

// resolveNetwork defaults and checks the advertise address and the CIDRs.
func resolveNetwork(o *Options) error {
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
	return nil
}

// pickPorts checks that explicit ports are free and distinct, and picks a
// free one for each port left 0.
func pickPorts(o *Options) error {
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
				fp, err := ports.Free()
				if err != nil {
					return err
				}
				if !taken[fp] {
					*p.port = fp
					break
				}
			}
		} else if !ports.IsFree(*p.port) {
			return fmt.Errorf("%s %d is in use", p.name, *p.port)
		}
		if taken[*p.port] {
			return fmt.Errorf("%s %d is also used for another listener", p.name, *p.port)
		}
		taken[*p.port] = true
	}
	return nil
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
