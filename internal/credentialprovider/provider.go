package credentialprovider

import (
	"context"
	"fmt"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/skiff-sh/skiff/internal/images/keyring"
)

// Providers are the configured plugins, in configuration order.
type Providers struct {
	plugins []*plugin
}

// New loads and validates the configuration at configPath (a file or a
// directory) with the plugins' executables in binDir. A configuration
// that does not validate is an error: upstream's kubelet does not start.
func New(configPath, binDir string) (*Providers, error) {
	cfg, err := LoadConfig(configPath)
	if err != nil {
		return nil, err
	}
	if err := validate(cfg, binDir); err != nil {
		return nil, fmt.Errorf("image credential provider config %s:\n%w", configPath, err)
	}
	ps := &Providers{}
	for _, p := range cfg.Providers {
		ps.plugins = append(ps.plugins, newPlugin(p, binDir, clock.RealClock{}))
		klog.InfoS("Registered image credential provider plugin", "plugin", p.Name, "matchImages", p.MatchImages)
	}
	return ps, nil
}

// Credentials returns what every plugin matching repo (a normalized
// repository such as "registry.example.com:5000/team/app") gives for it.
func (ps *Providers) Credentials(ctx context.Context, repo string) []keyring.Credential {
	if ps == nil {
		return nil
	}
	var out []keyring.Credential
	for _, p := range ps.plugins {
		if p.matches(repo) {
			out = append(out, p.credentials(ctx, repo)...)
		}
	}
	return out
}
