package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	kubeletapis "k8s.io/kubelet/pkg/apis"
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

// validateNodeLabels refuses what upstream refuses in --node-labels: keys
// in the kubernetes.io and k8s.io namespaces that kubelets may not set on
// their own Node, and keys or values that are not valid labels.
func validateNodeLabels(labels map[string]string) error {
	var unknown, invalid []string
	for _, k := range sortedKeys(labels) {
		v := labels[k]
		if isKubernetesLabel(k) && !kubeletapis.IsKubeletLabel(k) {
			unknown = append(unknown, k)
		}
		for _, msg := range validation.IsQualifiedName(k) {
			invalid = append(invalid, fmt.Sprintf("'%s' - %s", k, msg))
		}
		for _, msg := range validation.IsValidLabelValue(v) {
			invalid = append(invalid, fmt.Sprintf("'%s' - %s", v, msg))
		}
	}
	if len(unknown) > 0 {
		return fmt.Errorf("unknown 'kubernetes.io' or 'k8s.io' labels specified with --node-labels: %v\n--node-labels in the 'kubernetes.io' namespace must begin with an allowed prefix (%s) or be in the specifically allowed set (%s)",
			unknown, strings.Join(kubeletapis.KubeletLabelNamespaces(), ", "), strings.Join(kubeletapis.KubeletLabels(), ", "))
	}
	if len(invalid) > 0 {
		return fmt.Errorf("invalid node labels: %s", strings.Join(invalid, "; "))
	}
	return nil
}

func isKubernetesLabel(key string) bool {
	ns, _, ok := strings.Cut(key, "/")
	if !ok {
		return false
	}
	return ns == "kubernetes.io" || strings.HasSuffix(ns, ".kubernetes.io") ||
		ns == "k8s.io" || strings.HasSuffix(ns, ".k8s.io")
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
