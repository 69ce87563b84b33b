package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
)

// hostname is os.Hostname, replaceable in tests.
var hostname = os.Hostname

// nodeName is --hostname-override or the machine's hostname, trimmed and
// lowercased as upstream does, since node names are DNS names.
func nodeName(override string) (string, error) {
	name := override
	if name == "" {
		h, err := hostname()
		if err != nil {
			return "", fmt.Errorf("couldn't determine hostname: %w", err)
		}
		name = h
	}
	name = strings.ToLower(strings.TrimSpace(name))
	if name == "" {
		return "", errors.New("empty hostname is invalid")
	}
	return name, nil
}

// validateNodeIP accepts what upstream accepts without a cloud provider: one
// IP, or two of different families for dual-stack. An unspecified address
// ("0.0.0.0" or "::") only picks the preferred family, so it must stand
// alone.
func validateNodeIP(s string) error {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil
	}
	parts := strings.Split(s, ",")
	if len(parts) > 2 {
		return fmt.Errorf("%q: at most two comma-separated addresses (one IPv4, one IPv6)", s)
	}
	var ips []net.IP
	for _, part := range parts {
		ip := net.ParseIP(strings.TrimSpace(part))
		if ip == nil {
			return fmt.Errorf("%q is not a valid IP address", strings.TrimSpace(part))
		}
		ips = append(ips, ip)
	}
	if len(ips) == 2 {
		if ips[0].IsUnspecified() || ips[1].IsUnspecified() {
			return fmt.Errorf("%q: an unspecified address cannot be part of a dual-stack pair", s)
		}
		if (ips[0].To4() == nil) == (ips[1].To4() == nil) {
			return fmt.Errorf("%q: dual-stack addresses must be one IPv4 and one IPv6", s)
		}
	}
	return nil
}
