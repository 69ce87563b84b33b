package kubelet

import (
	"github.com/skiff-sh/skiff/internal/credentialprovider"
	"github.com/skiff-sh/skiff/internal/podruntime"
)

// credentialProviders loads the image credential provider plugins the
// configuration names, or returns nil when it names none.
func credentialProviders(cfg Config) (podruntime.CredentialProvider, error) {
	if cfg.ImageCredentialProviderConfig == "" {
		return nil, nil
	}
	return credentialprovider.New(cfg.ImageCredentialProviderConfig, cfg.ImageCredentialProviderBinDir)
}
