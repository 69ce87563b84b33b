// Package cluster runs a real, local Kubernetes control plane (etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler) for Skiff's
// end-to-end tests and `make up`. The binaries come from BinDir (default
// <repo>/_output/bin, built by hack/build-tools.sh).
//
// A test package typically starts one control plane in TestMain:
//
//	func TestMain(m *testing.M) {
//		c, err := cluster.Start(context.Background(), cluster.Options{})
//		if err != nil { fmt.Fprintln(os.Stderr, err); os.Exit(1) }
//		code := m.Run()
//		if err := c.Stop(); err != nil { fmt.Fprintln(os.Stderr, err) }
//		os.Exit(code)
//	}
//
// and each test gets a namespace with c.NewNamespace(ctx, t).
//
// # What Start sets up
//
// Start generates (or, on a Dir used before, reuses) an ECDSA P-256 CA
// valid ten years and signs with it, fresh on every start:
//   - the apiserver serving certificate, for 127.0.0.1, localhost, the
//     advertise address, the first Service IP (10.96.0.1), kubernetes,
//     kubernetes.default, kubernetes.default.svc,
//     kubernetes.default.svc.cluster.local and the host name;
//   - client certificates: kube-apiserver-kubelet-client and
//     kubernetes-admin (both O=system:masters),
//     system:kube-controller-manager, system:kube-scheduler.
//
// A second CA, front-proxy-ca, signs front-proxy-client and completes the
// apiserver's requestheader configuration as kubeadm does (without it the
// controller-manager and scheduler log a missing requestheader CA bundle
// every few seconds).
//
// ServiceAccount tokens are signed with an RSA 2048 key (issuer
// https://kubernetes.default.svc.cluster.local). The CA also signs CSRs
// (the controller-manager's kubernetes.io/* signers).
//
// etcd serves plain HTTP on 127.0.0.1 (client and peer ports free ones
// unless given) and by default runs with --unsafe-no-fsync. The apiserver
// listens on 0.0.0.0:<APIPort> and advertises AdvertiseAddress (the
// default route's interface address: the apiserver refuses a loopback
// address as the kubernetes Service endpoint); authorization Node,RBAC,
// admission NodeRestriction on top of the defaults (ServiceAccount among
// them), bootstrap token authentication, privileged containers allowed,
// --kubelet-preferred-address-types=InternalIP, aggregated APIs dialled at
// their endpoints (--enable-aggregator-routing), audit off. The
// controller-manager runs all controllers plus bootstrapsigner and
// tokencleaner with per-controller ServiceAccount credentials, allocates
// node podCIDRs (/24s of ClusterCIDR) and signs CSRs with the CA. The
// controller-manager and scheduler serve /healthz on 127.0.0.1 (free
// ports; the deprecated `kubectl get componentstatuses` probes the fixed
// default ports and so reports them Unhealthy). Leader election is off.
//
// Start returns once /readyz is ok, the controller-manager and scheduler
// are healthy and the default namespace has its default ServiceAccount and
// kube-root-ca.crt ConfigMap. If a component exits during Start, the error
// carries the tail of its log.
//
// # Layout of Dir
//
//	admin.kubeconfig                      kubernetes-admin, everything embedded
//	state.json                            options, ports, pids (for Load)
//	run/<component>.pid                   while running
//	logs/<component>.log                  stdout+stderr, truncated on start
//	pki/ca.{crt,key} sa.{key,pub} ...     certificates and keys (PEM); the CAs
//	                                      and sa.* are kept across restarts
//	kubeconfigs/kube-{controller-manager,scheduler}.kubeconfig
//	etcd/                                 etcd data
//	certs/<component>/                    self-signed serving certificates
//
// All kubeconfigs use APIServerURL(), https://<AdvertiseAddress>:<APIPort>.
//
// # Processes
//
// Each component runs in its own session (process group id = pid) with
// stdin from /dev/null. Stop sends SIGTERM to each group (apiserver,
// controller-manager and scheduler together, then etcd), SIGKILL after 20
// seconds, and waits until no process is left in any group. Unless
// Options.Detached, each component also gets SIGKILL when the process that
// started it dies (PR_SET_PDEATHSIG), so a test binary that panics or times
// out leaves nothing behind. The skiff-cluster command starts Detached
// clusters and stops them again through Load, which reads state.json and
// checks pids against their recorded start time.
//
// # Nodes
//
// NodeKubeconfig writes a kubeconfig with a client certificate for
// system:node:<name> (O=system:nodes). CreateBootstrapToken and
// BootstrapKubeconfig set up kubelet TLS bootstrapping the way kubeadm
// does (see CreateBootstrapToken for the RBAC).
package cluster
