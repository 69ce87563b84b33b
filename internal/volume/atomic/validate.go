package atomic

import (
	"fmt"
	"path"
	"sort"
	"strings"
)

const (
	maxFileNameLength = 255
	maxPathLength     = 4096
)

// validatePayload checks every path and returns the payload keyed by the
// cleaned paths. Besides upstream's rules it refuses payloads that cannot be
// written as a tree: two keys cleaning to the same path, or one key being a
// directory of another ("a" and "a/b").
func validatePayload(files map[string]File) (map[string]File, error) {
	clean := make(map[string]File, len(files))
	for p, f := range files {
		if err := validatePath(p); err != nil {
			return nil, err
		}
		c := path.Clean(p)
		if _, dup := clean[c]; dup {
			return nil, fmt.Errorf("invalid path: %q names the same file as another path", p)
		}
		clean[c] = f
	}
	keys := make([]string, 0, len(clean))
	for k := range clean {
		keys = append(keys, k)
	}
	// In sorted order a directory's entries follow it, though not always
	// directly ("a", "a.txt", "a/b"), so look ahead past siblings.
	sort.Strings(keys)
	for i, k := range keys {
		for _, next := range keys[i+1:] {
			if !strings.HasPrefix(next, k) {
				break
			}
			if next[len(k)] == '/' {
				return nil, fmt.Errorf("invalid path: %q is both a file and the directory of %q", k, next)
			}
		}
	}
	return clean, nil
}

// validatePath applies upstream's rules: a path must not be empty or
// absolute, must not have a ".." element or start with "..", and must fit
// the usual name and path length limits. "." alone is refused too: it
// would name the volume directory itself.
func validatePath(p string) error {
	if p == "" {
		return fmt.Errorf("invalid path: must not be empty: %q", p)
	}
	if path.IsAbs(p) {
		return fmt.Errorf("invalid path: must be relative path: %s", p)
	}
	if len(p) > maxPathLength {
		return fmt.Errorf("invalid path: must be less than or equal to %d characters", maxPathLength)
	}
	items := strings.Split(p, "/")
	for _, item := range items {
		if item == ".." {
			return fmt.Errorf("invalid path: must not contain '..': %s", p)
		}
		if len(item) > maxFileNameLength {
			return fmt.Errorf("invalid path: filenames must be less than or equal to %d characters", maxFileNameLength)
		}
	}
	// The cleaned form is checked too: "./..data" would otherwise reach
	// the reserved names.
	if strings.HasPrefix(items[0], "..") || strings.HasPrefix(path.Clean(p), "..") {
		return fmt.Errorf("invalid path: must not start with '..': %s", p)
	}
	if path.Clean(p) == "." {
		return fmt.Errorf("invalid path: must name a file: %q", p)
	}
	return nil
}
