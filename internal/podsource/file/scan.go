package file

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

// manifestExts are the file extensions read from a manifest directory.
var manifestExts = map[string]bool{".yaml": true, ".yml": true, ".json": true}

// parsed is the cached outcome of one manifest's content.
type parsed struct {
	sum [sha256.Size]byte
	pod *v1.Pod // without the config.seen annotation; nil when err is set
	err error
}

// scan reads the configured path and returns the pods it defines, sorted by
// file name. ok is false when the path could not be read at all; the caller
// then keeps its last snapshot rather than dropping running pods over, say,
// a permission error.
func (s *Source) scan() (pods []*v1.Pod, ok bool) {
	files, err := s.manifestFiles()
	if err != nil {
		s.reportPathError(err)
		return nil, false
	}
	s.reportPathError(nil)

	cache := make(map[string]*parsed, len(files))
	fileErrs := make(map[string]error)
	byName := make(map[string]string)   // namespace/name -> file
	byUID := make(map[types.UID]string) // uid -> file
	for _, path := range files {
		p := s.parse(path)
		if p == nil {
			continue // vanished since listing
		}
		cache[path] = p
		if p.err != nil {
			fileErrs[path] = p.err
			continue
		}
		key := p.pod.Namespace + "/" + p.pod.Name
		if other, dup := byName[key]; dup {
			fileErrs[path] = fmt.Errorf("pod %s is already defined by %s", key, other)
			continue
		}
		if other, dup := byUID[p.pod.UID]; dup {
			fileErrs[path] = fmt.Errorf("pod UID %s is already used by %s", p.pod.UID, other)
			continue
		}
		byName[key], byUID[p.pod.UID] = path, path
		pods = append(pods, p.pod)
	}
	s.cache = cache
	s.reportFileErrors(fileErrs)
	return s.withSeen(pods), true
}

// manifestFiles lists the manifests to read: the path itself when it is a
// file, else the visible *.yaml, *.yml and *.json files directly in it. A
// missing path has no manifests (yet).
func (s *Source) manifestFiles() ([]string, error) {
	info, err := os.Stat(s.cfg.Path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading manifest path: %w", err)
	case info.Mode().IsRegular():
		return []string{s.cfg.Path}, nil
	case !info.IsDir():
		return nil, fmt.Errorf("manifest path %s is neither a directory nor a regular file", s.cfg.Path)
	}
	entries, err := os.ReadDir(s.cfg.Path) // sorted by name
	if err != nil {
		return nil, fmt.Errorf("reading manifest directory: %w", err)
	}
	var files []string
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") || !manifestExts[strings.ToLower(filepath.Ext(name))] {
			continue
		}
		path := filepath.Join(s.cfg.Path, name)
		// Stat follows symlinks, which ConfigMap-style manifest directories use.
		if fi, err := os.Stat(path); err == nil && !fi.Mode().IsRegular() {
			klog.V(4).InfoS("Ignoring manifest path that is not a regular file", "path", path)
			continue
		}
		files = append(files, path)
	}
	return files, nil
}

// parse reads one manifest, reusing the previous outcome when its content is
// unchanged. It returns nil when the file no longer exists.
func (s *Source) parse(path string) *parsed {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return &parsed{err: fmt.Errorf("reading manifest: %w", err)}
	}
	sum := sha256.Sum256(data)
	if old := s.cache[path]; old != nil && old.sum == sum {
		return old
	}
	pod, err := buildPod(data, path, s.cfg.NodeName)
	return &parsed{sum: sum, pod: pod, err: err}
}

// withSeen returns copies of pods carrying the time each UID was first
// seen: the parsed pods are cached, so they are not stamped in place.
func (s *Source) withSeen(pods []*v1.Pod) []*v1.Pod {
	out := make([]*v1.Pod, 0, len(pods))
	for _, pod := range pods {
		out = append(out, pod.DeepCopy())
	}
	s.seen.Stamp(out, s.now())
	return out
}

// reportFileErrors logs and hands on each file's error once per change of
// the file's content or of the error, not on every poll.
func (s *Source) reportFileErrors(errs map[string]error) {
	reported := make(map[string]string, len(errs))
	for path, err := range errs {
		sig := err.Error()
		if p := s.cache[path]; p != nil {
			sig = fmt.Sprintf("%x:%s", p.sum, sig)
		}
		reported[path] = sig
		if s.reported[path] == sig {
			continue
		}
		klog.ErrorS(err, "Skipping invalid static pod manifest", "path", path)
		if s.cfg.OnError != nil {
			s.cfg.OnError(path, err)
		}
	}
	s.reported = reported
	s.mu.Lock()
	s.errs = errs
	s.mu.Unlock()
}

// reportPathError logs and hands on a failure to read the manifest path
// once per distinct error. While it lasts, Errors reports it under the
// path itself.
func (s *Source) reportPathError(err error) {
	if err == nil {
		s.pathErr = ""
		return
	}
	s.mu.Lock()
	s.errs = map[string]error{s.cfg.Path: err}
	s.mu.Unlock()
	if err.Error() == s.pathErr {
		return
	}
	s.pathErr = err.Error()
	klog.ErrorS(err, "Unable to read static pod manifest path", "path", s.cfg.Path)
	if s.cfg.OnError != nil {
		s.cfg.OnError(s.cfg.Path, err)
	}
}
