// Package credentialprovider runs kubelet image credential provider plugins
// (the credentialprovider.kubelet.k8s.io/v1 exec protocol), the way EKS,
// GKE and AKS nodes get credentials for their registries.
//
// The configuration (--image-credential-provider-config, a file or a
// directory of them) lists plugins by executable name in
// --image-credential-provider-bin-dir. For an image matching a plugin's
// matchImages, Skiff runs the plugin with a CredentialProviderRequest on
// stdin and reads a CredentialProviderResponse from stdout. The response's
// credentials are cached per image, per registry or globally, as its
// cacheKeyType says, for its cacheDuration (else the plugin's
// defaultCacheDuration; zero means not cached), so a plugin runs once per
// cache period, not once per pull.
package credentialprovider

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	kubeletconfigv1 "k8s.io/kubelet/config/v1"
	"sigs.k8s.io/yaml"

	"github.com/skiff-sh/skiff/internal/images/keyring"
)

const (
	configAPIVersion = "kubelet.config.k8s.io/v1"
	configKind       = "CredentialProviderConfig"
	// pluginAPIVersion is the exec protocol's version Skiff speaks.
	pluginAPIVersion = "credentialprovider.kubelet.k8s.io/v1"
)

// LoadConfig reads a CredentialProviderConfig file, or every *.json, *.yaml
// and *.yml file of a directory (not recursing) in lexical order, their
// providers concatenated, as upstream does.
func LoadConfig(path string) (*kubeletconfigv1.CredentialProviderConfig, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("image credential provider config: %w", err)
	}
	if !info.IsDir() {
		return loadFile(path)
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return nil, fmt.Errorf("image credential provider config: %w", err)
	}
	var names []string
	for _, e := range entries {
		switch strings.ToLower(filepath.Ext(e.Name())) {
		case ".json", ".yaml", ".yml":
			if !e.IsDir() {
				names = append(names, e.Name())
			}
		}
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("image credential provider config: no .json, .yaml or .yml file in directory %s", path)
	}
	sort.Strings(names)
	merged := &kubeletconfigv1.CredentialProviderConfig{}
	for _, n := range names {
		cfg, err := loadFile(filepath.Join(path, n))
		if err != nil {
			return nil, err
		}
		merged.Providers = append(merged.Providers, cfg.Providers...)
	}
	return merged, nil
}

func loadFile(path string) (*kubeletconfigv1.CredentialProviderConfig, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("image credential provider config: %w", err)
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, fmt.Errorf("image credential provider config %s is empty", path)
	}
	cfg := &kubeletconfigv1.CredentialProviderConfig{}
	if err := yaml.UnmarshalStrict(b, cfg); err != nil {
		return nil, fmt.Errorf("image credential provider config %s: %w", path, err)
	}
	if cfg.APIVersion != configAPIVersion || cfg.Kind != configKind {
		return nil, fmt.Errorf("image credential provider config %s: apiVersion %q, kind %q: Skiff reads %s %s",
			path, cfg.APIVersion, cfg.Kind, configAPIVersion, configKind)
	}
	return cfg, nil
}

// validate checks a configuration as upstream does, and that each plugin's
// executable is in binDir.
func validate(cfg *kubeletconfigv1.CredentialProviderConfig, binDir string) error {
	var errs []error
	if len(cfg.Providers) == 0 {
		errs = append(errs, errors.New("at least 1 item in plugins is required"))
	}
	seen := map[string]bool{}
	for i, p := range cfg.Providers {
		field := fmt.Sprintf("providers[%d]", i)
		if p.Name != "" {
			field = fmt.Sprintf("providers[%s]", p.Name)
		}
		bad := func(format string, args ...any) {
			errs = append(errs, fmt.Errorf(field+": "+format, args...))
		}
		switch {
		case p.Name == "":
			bad("name is required")
		case strings.ContainsAny(p.Name, `/\`) || p.Name == "." || p.Name == "..":
			bad("name %q must not contain a path", p.Name)
		case seen[p.Name]:
			bad("duplicate name %q", p.Name)
		}
		seen[p.Name] = true
		if len(p.MatchImages) == 0 {
			bad("matchImages: at least 1 item is required")
		}
		for _, m := range p.MatchImages {
			if err := keyring.ValidatePattern(m); err != nil {
				bad("matchImages %q: %v", m, err)
			}
		}
		if p.DefaultCacheDuration == nil {
			bad("defaultCacheDuration is required")
		} else if p.DefaultCacheDuration.Duration < 0 {
			bad("defaultCacheDuration must be greater than or equal to 0")
		}
		if p.APIVersion != pluginAPIVersion {
			bad("apiVersion %q is not supported: Skiff speaks %s", p.APIVersion, pluginAPIVersion)
		}
		if p.TokenAttributes != nil {
			bad("tokenAttributes (service account tokens for plugins) are not implemented in Skiff")
		}
		if binDir == "" {
			bad("--image-credential-provider-bin-dir is required")
		} else if p.Name != "" {
			if info, err := os.Stat(filepath.Join(binDir, p.Name)); err != nil {
				bad("plugin executable: %v", err)
			} else if info.IsDir() || info.Mode()&0o111 == 0 {
				bad("plugin %s is not an executable file", filepath.Join(binDir, p.Name))
			}
		}
	}
	return errors.Join(errs...)
}
