package nodestatus

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	v1 "k8s.io/api/core/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
)

// dnsTimeout bounds the lookup of the node name: a machine without a
// reachable resolver must not stall the status loop.
const dnsTimeout = 2 * time.Second

// parseNodeIPs parses --node-ip: at most one address per family, "0.0.0.0"
// and "::" meaning "detect" as upstream.
func parseNodeIPs(ips []string) ([]net.IP, error) {
	var out []net.IP
	for _, s := range ips {
		ip := net.ParseIP(s)
		if ip == nil {
			return nil, fmt.Errorf("invalid node IP %q", s)
		}
		if ip.IsUnspecified() {
			continue
		}
		if len(out) == 1 && (out[0].To4() == nil) == (ip.To4() == nil) {
			return nil, fmt.Errorf("node IPs %v: at most one address per IP family", ips)
		}
		if len(out) == 2 {
			return nil, fmt.Errorf("node IPs %v: at most two addresses", ips)
		}
		out = append(out, ip)
	}
	return out, nil
}

// nodeAddresses computes status.addresses as upstream does without a cloud
// provider: the --node-ip addresses (checked to belong to this host), else
// the hostname if it is an IP, else the node name's DNS address, else the
// address of the default-route interface; then the hostname.
func nodeAddresses(ctx context.Context, nodeIPs []net.IP, hostname string) ([]v1.NodeAddress, error) {
	var ips []net.IP
	switch {
	case len(nodeIPs) > 0:
		for _, ip := range nodeIPs {
			if err := validateNodeIP(ip); err != nil {
				return nil, fmt.Errorf("failed to validate nodeIP: %w", err)
			}
		}
		ips = nodeIPs
	case net.ParseIP(hostname) != nil:
		ips = []net.IP{net.ParseIP(hostname)}
	default:
		if ip := lookupNodeIP(ctx, hostname); ip != nil {
			ips = []net.IP{ip}
		} else {
			ip, err := utilnet.ResolveBindAddress(net.IPv4zero)
			if err != nil {
				return nil, fmt.Errorf("can't get ip address of node %s: %w", hostname, err)
			}
			ips = []net.IP{ip}
		}
	}
	addrs := make([]v1.NodeAddress, 0, len(ips)+1)
	for _, ip := range ips {
		addrs = append(addrs, v1.NodeAddress{Type: v1.NodeInternalIP, Address: ip.String()})
	}
	return append(addrs, v1.NodeAddress{Type: v1.NodeHostName, Address: hostname}), nil
}

// lookupNodeIP resolves the node name, preferring IPv4 and skipping
// addresses that are not this host's (e.g. 127.0.1.1 from /etc/hosts).
func lookupNodeIP(ctx context.Context, name string) net.IP {
	ctx, cancel := context.WithTimeout(ctx, dnsTimeout)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupIPAddr(ctx, name)
	if err != nil {
		return nil
	}
	var v6 net.IP
	for _, a := range addrs {
		if validateNodeIP(a.IP) != nil {
			continue
		}
		if a.IP.To4() != nil {
			return a.IP
		}
		if v6 == nil {
			v6 = a.IP
		}
	}
	return v6
}

// validateNodeIP applies upstream's rules: a unicast address of this host.
func validateNodeIP(ip net.IP) error {
	switch {
	case ip.To4() == nil && ip.To16() == nil:
		return errors.New("nodeIP must be a valid IP address")
	case ip.IsLoopback():
		return errors.New("nodeIP can't be loopback address")
	case ip.IsMulticast():
		return errors.New("nodeIP can't be a multicast address")
	case ip.IsLinkLocalUnicast():
		return errors.New("nodeIP can't be a link-local unicast address")
	case ip.IsUnspecified():
		return errors.New("nodeIP can't be an all zeros address")
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return err
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.Equal(ip) {
			return nil
		}
	}
	return fmt.Errorf("node IP: %q not found in the host's network interfaces", ip.String())
}

// HostIPs returns the node's InternalIP addresses, worked out exactly as
// its status.addresses are, so a pod's status.hostIPs match the Node's, as
// upstream. nodeIPs is --node-ip (one per family); empty means detect.
func HostIPs(ctx context.Context, nodeIPs []string, nodeName string) ([]string, error) {
	ips, err := parseNodeIPs(nodeIPs)
	if err != nil {
		return nil, err
	}
	addrs, err := nodeAddresses(ctx, ips, nodeName)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, a := range addrs {
		if a.Type == v1.NodeInternalIP {
			out = append(out, a.Address)
		}
	}
	return out, nil
}
