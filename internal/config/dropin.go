package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
)

// dropInExt is the extension of the files --config-dir reads.
const dropInExt = ".conf"

// MergeDropIns applies the --config-dir drop-ins over c as upstream does:
// every *.conf file under dir (subdirectories included, in lexical order)
// is a KubeletConfiguration merged over the result so far as a JSON merge
// patch (maps merge key by key, lists and scalars replace), and the result
// is defaulted again. c should already be defaulted, as upstream's base
// is. Each file is also decoded strictly, so an unknown or mistyped field
// is an error naming the file; upstream would ignore it.
func MergeDropIns(c *kubeletconfigv1beta1.KubeletConfiguration, dir string) (*kubeletconfigv1beta1.KubeletConfiguration, error) {
	base, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("marshal base config: %w", err)
	}
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || filepath.Ext(d.Name()) != dropInExt {
			return nil
		}
		patch, err := readDropIn(path)
		if err != nil {
			return err
		}
		merged, err := jsonpatch.MergePatch(base, patch)
		if err != nil {
			return fmt.Errorf("drop-in %s: merge: %w", path, err)
		}
		base = merged
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("config dir %s: %w", dir, err)
	}
	out := &kubeletconfigv1beta1.KubeletConfiguration{}
	if err := json.Unmarshal(base, out); err != nil {
		return nil, fmt.Errorf("config dir %s: decode merged config: %w", dir, err)
	}
	out.APIVersion, out.Kind = wantGVK.GroupVersion().String(), wantGVK.Kind
	SetDefaults(out)
	return out, nil
}

// readDropIn checks one drop-in strictly and returns it as JSON.
func readDropIn(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("drop-in %s: %w", path, err)
	}
	if _, errs := decode(data); len(errs) > 0 {
		wrapped := make([]error, len(errs))
		for i, e := range errs {
			wrapped[i] = fmt.Errorf("drop-in %s: %w", path, e)
		}
		return nil, errors.Join(wrapped...)
	}
	asJSON, err := utilyaml.ToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("drop-in %s: %w", path, err)
	}
	return asJSON, nil
}
