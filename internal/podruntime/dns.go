package podruntime

import (
	"bufio"
	"fmt"
	"os"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// DNS is the node's DNS settings from the kubelet configuration.
type DNS struct {
	ClusterDNS    []string // clusterDNS
	ClusterDomain string   // clusterDomain
	ResolvConf    string   // resolvConf: the "Default" policy's source
}

// dnsConfig computes the pod's resolv.conf as upstream does for each
// dnsPolicy, then merges spec.dnsConfig. ok is false when ClusterFirst was
// asked for but no clusterDNS is configured (the pod falls back to Default,
// and the caller warns).
func (d DNS) dnsConfig(pod *v1.Pod) (cfg *runtimeapi.DNSConfig, ok bool, err error) {
	policy := pod.Spec.DNSPolicy
	if policy == "" {
		policy = v1.DNSClusterFirst
	}
	if policy == v1.DNSClusterFirst && pod.Spec.HostNetwork {
		policy = v1.DNSDefault // ClusterFirstWithHostNet is how a host-network pod asks
	}
	ok = true
	cfg = &runtimeapi.DNSConfig{}
	switch policy {
	case v1.DNSClusterFirst, v1.DNSClusterFirstWithHostNet:
		if len(d.ClusterDNS) == 0 {
			ok = false
			if cfg, err = d.hostDNS(); err != nil {
				return nil, false, err
			}
			break
		}
		host, err := d.hostDNS()
		if err != nil {
			return nil, false, err
		}
		cfg.Servers = d.ClusterDNS
		if d.ClusterDomain != "" {
			cfg.Searches = []string{pod.Namespace + ".svc." + d.ClusterDomain, "svc." + d.ClusterDomain, d.ClusterDomain}
		}
		cfg.Searches = append(cfg.Searches, host.Searches...)
		cfg.Options = []string{"ndots:5"}
	case v1.DNSDefault:
		if cfg, err = d.hostDNS(); err != nil {
			return nil, false, err
		}
	case v1.DNSNone:
	default:
		return nil, false, fmt.Errorf("unknown dnsPolicy %q", policy)
	}
	if dc := pod.Spec.DNSConfig; dc != nil {
		cfg.Servers = appendUnique(cfg.Servers, dc.Nameservers...)
		cfg.Searches = appendUnique(cfg.Searches, dc.Searches...)
		for _, o := range dc.Options {
			opt := o.Name
			if o.Value != nil {
				opt += ":" + *o.Value
			}
			cfg.Options = mergeOption(cfg.Options, o.Name, opt)
		}
	}
	return cfg, ok, nil
}

// hostDNS reads the node's resolv.conf (resolvConf); "" means none.
func (d DNS) hostDNS() (*runtimeapi.DNSConfig, error) {
	cfg := &runtimeapi.DNSConfig{}
	if d.ResolvConf == "" {
		return cfg, nil
	}
	f, err := os.Open(d.ResolvConf)
	if err != nil {
		return nil, fmt.Errorf("read resolvConf: %w", err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) < 2 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		switch fields[0] {
		case "nameserver":
			cfg.Servers = append(cfg.Servers, fields[1])
		case "search":
			cfg.Searches = fields[1:]
		case "options":
			cfg.Options = append(cfg.Options, fields[1:]...)
		}
	}
	return cfg, s.Err()
}

func appendUnique(list []string, add ...string) []string {
	for _, a := range add {
		if !slices.Contains(list, a) {
			list = append(list, a)
		}
	}
	return list
}

// mergeOption replaces an option of the same name or appends it.
func mergeOption(opts []string, name, opt string) []string {
	for i, o := range opts {
		if o == name || strings.HasPrefix(o, name+":") {
			opts[i] = opt
			return opts
		}
	}
	return append(opts, opt)
}
