package atomic

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"testing"
)

var tsDirPattern = regexp.MustCompile(`^\.\.\d{4}_\d{2}_\d{2}_\d{2}_\d{2}_\d{2}\.\d+$`)

// dataDir returns the name ..data points to, checking its form.
func dataDir(t *testing.T, dir string) string {
	t.Helper()
	target, err := os.Readlink(filepath.Join(dir, dataDirName))
	if err != nil {
		t.Fatalf("reading ..data: %v", err)
	}
	if !tsDirPattern.MatchString(target) {
		t.Fatalf("..data points to %q, not a timestamped directory", target)
	}
	return target
}

// entries lists the names in dir, sorted.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, de := range des {
		names = append(names, de.Name())
	}
	sort.Strings(names)
	return names
}

func readString(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatalf("reading %s: %v", name, err)
	}
	return string(b)
}

func mustWrite(t *testing.T, dir string, files map[string]File) {
	t.Helper()
	if err := Write(dir, files); err != nil {
		t.Fatalf("Write: %v", err)
	}
}

func file(data string, mode int32) File { return File{Data: []byte(data), Mode: mode} }

func int64p(v int64) *int64 { return &v }
