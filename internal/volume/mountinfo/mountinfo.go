// Package mountinfo reads the mount table of Skiff's mount namespace,
// /proc/self/mountinfo.
package mountinfo

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// IsMountPoint tells whether dir is a mount point.
func IsMountPoint(dir string) bool {
	for _, mp := range Under(dir) {
		if mp == filepath.Clean(dir) {
			return true
		}
	}
	return false
}

// Under lists the mount points at or below dir, deepest first.
func Under(dir string) []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	dir = filepath.Clean(dir)
	var out []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMountPath(fields[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			out = append([]string{mp}, out...)
		}
	}
	return out
}

// unescapeMountPath undoes mountinfo's octal escapes (\040 for a space).
func unescapeMountPath(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var c int
			if _, err := fmt.Sscanf(s[i+1:i+4], "%03o", &c); err == nil {
				b.WriteByte(byte(c))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
