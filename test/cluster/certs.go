package cluster

import (
	"net"
	"os"
	"path/filepath"
	"strings"
)

// writePKI makes (or, for the CAs and the service-account key, reuses) the
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
	if err := writeFrontProxy(pki); err != nil {
		return err
	}
	if err := ensureServiceAccountKey(filepath.Join(pki, "sa.key"), filepath.Join(pki, "sa.pub")); err != nil {
		return err
	}
	leaves := []struct {
		file string
		spec leafSpec
	}{
		{"apiserver", c.apiServerServing()},
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
		if err := writeCertKubeconfig(kubeconfig, c.apiURL, ca, l.spec.cn, kp); err != nil {
			return err
		}
	}
	return nil
}

// writeFrontProxy makes (or reuses) the front-proxy CA and signs the
// front-proxy client. They only fill in the apiserver's requestheader
// configuration (as kubeadm does): without it the controller-manager and
// scheduler log an error about the missing requestheader CA bundle every
// few seconds.
func writeFrontProxy(pki string) error {
	ca, err := loadOrCreateCA(filepath.Join(pki, "front-proxy-ca"), "skiff-front-proxy-ca")
	if err != nil {
		return err
	}
	client, err := ca.sign(leafSpec{cn: "front-proxy-client", client: true})
	if err != nil {
		return err
	}
	return client.write(filepath.Join(pki, "front-proxy-client"))
}

// apiServerServing is the apiserver's serving certificate: loopback, the
// advertise address, the kubernetes Service's IP and names, and the host
// name.
func (c *Cluster) apiServerServing() leafSpec {
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
	return serving
}
