package nodestatus

import (
	"context"
	"net"
	"testing"

	utilnet "k8s.io/apimachinery/pkg/util/net"
)

func TestHostIPsMatchInternalIPs(t *testing.T) {
	own, err := utilnet.ResolveBindAddress(net.IPv4zero)
	if err != nil {
		t.Skipf("no default route on this machine: %v", err)
	}
	ips, err := HostIPs(context.Background(), []string{own.String()}, "n1")
	if err != nil || len(ips) != 1 || ips[0] != own.String() {
		t.Errorf("HostIPs(--node-ip %s) = %v, %v", own, ips, err)
	}
	// Detection gives what the Node's InternalIP would be.
	addrs, err := nodeAddresses(context.Background(), nil, "n1")
	if err != nil {
		t.Fatal(err)
	}
	detected, err := HostIPs(context.Background(), nil, "n1")
	if err != nil || len(detected) == 0 || detected[0] != addrs[0].Address {
		t.Errorf("detected %v, %v; node InternalIP %v", detected, err, addrs)
	}
	if _, err := HostIPs(context.Background(), []string{"not-an-ip"}, "n1"); err == nil {
		t.Error("an invalid --node-ip was accepted")
	}
}
