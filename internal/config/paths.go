package config

import (
	"path/filepath"

	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// pathRefs lists the fields that hold file system paths, which upstream
// resolves against the config file's directory.
func pathRefs(c *kubeletconfigv1beta1.KubeletConfiguration) []*string {
	refs := []*string{
		&c.StaticPodPath,
		&c.Authentication.X509.ClientCAFile,
		&c.TLSCertFile,
		&c.TLSPrivateKeyFile,
		&c.VolumePluginDir,
		&c.PodLogsDir,
	}
	if c.ResolverConfig != nil {
		refs = append(refs, c.ResolverConfig)
	}
	return refs
}

// resolveRelativePaths makes the relative paths in c relative to dir, so a
// config file means the same wherever the kubelet is started from. Empty
// paths stay empty (they mean "off").
func resolveRelativePaths(c *kubeletconfigv1beta1.KubeletConfiguration, dir string) {
	for _, ref := range pathRefs(c) {
		if *ref != "" && !filepath.IsAbs(*ref) {
			*ref = filepath.Join(dir, *ref)
		}
	}
}
