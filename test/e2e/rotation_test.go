//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/test/cluster"
)

// rotationSigningDuration is the lifetime of the certificates the rotation
// test's control plane signs. The signer backdates NotBefore by 5 minutes,
// so a certificate lives 8 minutes by its own dates, and the manager
// renews it at 70–90 % of that: 0.6 to 2.2 minutes after it is issued.
const rotationSigningDuration = 3 * time.Minute

// With rotateCertificates and short-lived
// certificates, Skiff renews its client certificate through a
// selfnodeclient CSR while a pod runs. The pod is not disturbed, and the
// node stays Ready with its Lease renewing after the first certificate
// has expired: Skiff's connections present the new one.
func TestClientCertificateRotation(t *testing.T) {
	quietLong(t)
	n := newPrivateNode(t) // its own runtime and control plane: in parallel
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	// Its own control plane: the short signing duration would otherwise
	// apply to every test's CSRs.
	c, err := cluster.Start(ctx, cluster.Options{ClusterSigningDuration: rotationSigningDuration})
	must(t, err)
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Logf("stopping the rotation test's control plane: %v", err)
		}
	})
	bn := newBootstrapNode(t, c, n, "rotateCertificates: true\n")
	bn.start()
	bn.waitNodeReady(t, v1.ConditionTrue, 90*time.Second)
	first := bn.clientCert(t)
	firstLink, err := os.Readlink(bn.pkiPath("kubelet-client-current.pem"))
	must(t, err)
	if life := time.Until(first.NotAfter); life > rotationSigningDuration+time.Minute {
		t.Fatalf("first certificate lives until %s: the short signing duration did not apply", first.NotAfter)
	}

	// Requests the apiserver refused for their credentials, from here on.
	refusedBefore := refusedAuthentications(t, c)

	bn.createPod(t, busyboxPod("steady", sleeper))
	before := bn.waitPod(t, bn.ns, "steady", 60*time.Second, "Ready", isReady)
	containerID := before.Status.ContainerStatuses[0].ContainerID
	// Skiff's connections to the apiserver, all made with the first
	// certificate: the apiserver checks a client certificate only when a
	// connection is made, so these must go for the new one to be presented.
	apiPort := c.Options().APIPort
	oldConns := apiserverConns(t, bn.cmd.Process.Pid, apiPort)
	if len(oldConns) == 0 {
		t.Fatal("Skiff holds no connection to the apiserver")
	}

	// Renewal: a new pair in the store, from a CSR made as the node itself.
	waitFor(t, 3*time.Minute, "client certificate rotated", func() (bool, error) {
		link, err := os.Readlink(bn.pkiPath("kubelet-client-current.pem"))
		return err == nil && link != firstLink, nil
	})
	rotated := bn.clientCert(t)
	if rotated.SerialNumber.Cmp(first.SerialNumber) == 0 || !rotated.NotAfter.After(first.NotAfter) ||
		rotated.Subject.CommonName != "system:node:"+nodeName {
		t.Errorf("rotated certificate: %s serial %s until %s (first: serial %s until %s)",
			rotated.Subject, rotated.SerialNumber, rotated.NotAfter, first.SerialNumber, first.NotAfter)
	}
	renewals := csrsBy(t, c, certificatesv1.KubeAPIServerClientKubeletSignerName, "system:node:"+nodeName)
	if len(renewals) == 0 {
		t.Fatal("no CSR made with the node's own credentials")
	}
	for _, r := range renewals {
		if a := csrCondition(&r, certificatesv1.CertificateApproved); a == nil || len(r.Status.Certificate) == 0 {
			t.Errorf("renewal CSR %s not approved and signed: %+v", r.Name, r.Status.Conditions)
		}
	}
	// The transport notices within its 5 s check period, closes the old
	// connections, and Skiff dials new ones.
	waitFor(t, 30*time.Second, "Skiff replacing its apiserver connections after the rotation", func() (bool, error) {
		now := apiserverConns(t, bn.cmd.Process.Pid, apiPort)
		for inode := range now {
			if oldConns[inode] {
				return false, nil
			}
		}
		return len(now) > 0, nil
	})

	// Past the first certificate's expiry, only the new one can be working.
	expired := first.NotAfter
	if d := time.Until(expired); d > 0 {
		t.Logf("waiting %v for the first certificate to expire", d.Round(time.Second))
		time.Sleep(d)
	}
	waitFor(t, 30*time.Second, "lease renewed after the first certificate expired", func() (bool, error) {
		return bn.lease(t).Spec.RenewTime.After(expired.Add(time.Second)), nil
	})
	if s, msg := nodeReady(bn.getNode(t)); s != v1.ConditionTrue {
		t.Errorf("node Ready=%s (%s) after rotation", s, msg)
	}
	after := bn.getPod(t, "steady")
	cs := after.Status.ContainerStatuses[0]
	if cs.ContainerID != containerID || cs.RestartCount != 0 || !isReady(after) {
		t.Errorf("pod disturbed by the rotation: container %s -> %s, restarts %d, ready %v",
			containerID, cs.ContainerID, cs.RestartCount, isReady(after))
	}
	// No request was refused for stale credentials (the test's cleanup
	// then deletes the pod through Skiff, which needs its client too). The
	// control plane is this test's own: Skiff is its only node.
	if refused := refusedAuthentications(t, c) - refusedBefore; refused != 0 {
		t.Errorf("the apiserver refused %v requests' credentials during the rotation", refused)
	}
}

// refusedAuthentications is the apiserver's count of requests whose
// credentials it could not authenticate (401s): authentication_attempts
// with result error or failure.
func refusedAuthentications(t *testing.T, c *cluster.Cluster) float64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	body, err := c.Client().CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	must(t, err)
	mfs, err := parseMetrics(bytes.NewReader(body))
	must(t, err)
	return gauge(mfs, "authentication_attempts", map[string]string{"result": "error"}) +
		gauge(mfs, "authentication_attempts", map[string]string{"result": "failure"})
}

// apiserverConns returns the socket inodes of pid's established TCP
// connections to port, from /proc: a connection keeps its inode for life.
func apiserverConns(t *testing.T, pid, port int) map[string]bool {
	t.Helper()
	sockets := map[string]bool{}
	fdDir := fmt.Sprintf("/proc/%d/fd", pid)
	fds, err := os.ReadDir(fdDir)
	must(t, err)
	for _, fd := range fds {
		if l, err := os.Readlink(filepath.Join(fdDir, fd.Name())); err == nil && strings.HasPrefix(l, "socket:[") {
			sockets[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] = true
		}
	}
	conns := map[string]bool{}
	for _, table := range []string{"tcp", "tcp6"} {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, table))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n")[1:] {
			// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
			f := strings.Fields(line)
			if len(f) < 10 || f[3] != "01" || !sockets[f[9]] { // 01: ESTABLISHED
				continue
			}
			remote := f[2][strings.LastIndex(f[2], ":")+1:]
			if p, err := strconv.ParseUint(remote, 16, 16); err == nil && int(p) == port {
				conns[f[9]] = true
			}
		}
	}
	return conns
}

// grepLines returns up to max lines of s containing sub.
func grepLines(s, sub string, max int) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
			if len(out) == max {
				break
			}
		}
	}
	return strings.Join(out, "\n")
}
