package atomic

import (
	"strings"
	"testing"
)

func TestInvalidPathsRejected(t *testing.T) {
	cases := map[string]map[string]File{
		"empty":                {"": file("x", 0o644)},
		"absolute":             {"/etc/passwd": file("x", 0o644)},
		"dot-dot":              {"..": file("x", 0o644)},
		"dot-dot prefix":       {"../x": file("x", 0o644)},
		"dot-dot element":      {"a/../b": file("x", 0o644)},
		"trailing dot-dot":     {"a/..": file("x", 0o644)},
		"reserved data":        {"..data": file("x", 0o644)},
		"leading dots":         {"..foo/bar": file("x", 0o644)},
		"reserved after clean": {"./..data": file("x", 0o644)},
		"dot":                  {".": file("x", 0o644)},
		"long name":            {strings.Repeat("a", 256): file("x", 0o644)},
		"long path":            {strings.Repeat("abcdefgh/", 456) + "x": file("x", 0o644)},
		"file and dir":         {"a": file("x", 0o644), "a/b": file("y", 0o644)},
		"file and deep dir":    {"a": file("x", 0o644), "a.txt": file("y", 0o644), "a/b/c": file("z", 0o644)},
		"same after clean":     {"a": file("x", 0o644), "./a": file("y", 0o644)},
		"one bad among good":   {"good": file("x", 0o644), "../bad": file("y", 0o644)},
	}
	for name, files := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if err := Write(dir, files); err == nil {
				t.Fatal("Write succeeded")
			}
			if got := entries(t, dir); len(got) != 0 {
				t.Errorf("an invalid payload wrote %v", got)
			}
		})
	}
}

func TestValidPathsAccepted(t *testing.T) {
	for _, p := range []string{"a", "a.b", ".hidden", "a/b/c", "./a", "a//b", "a/", "x..y", "a/..b", strings.Repeat("a", 255)} {
		if err := validatePath(p); err != nil {
			t.Errorf("validatePath(%q) = %v", p, err)
		}
	}
}
