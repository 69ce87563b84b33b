package mountinfo

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Mount is one line of the mount table: where it is mounted and whether
// it propagates mount events to its peers (a "shared:N" optional field).
type Mount struct {
	Point  string
	Shared bool
}

// Containing returns the mount that holds path (an absolute, clean path
// with no symlinks): the last of the deepest mount points at or above
// it, as later lines of the table are stacked on earlier ones.
func Containing(path string) (Mount, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return Mount{}, err
	}
	defer f.Close()
	return containing(f, path)
}

func containing(r io.Reader, path string) (Mount, error) {
	path = filepath.Clean(path)
	var best Mount
	found := false
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 64<<10), 1<<20)
	for s.Scan() {
		m, ok := parseLine(s.Text())
		if !ok || !within(path, m.Point) {
			continue
		}
		if !found || len(m.Point) >= len(best.Point) {
			best, found = m, true
		}
	}
	if err := s.Err(); err != nil {
		return Mount{}, fmt.Errorf("read mountinfo: %w", err)
	}
	if !found {
		return Mount{}, fmt.Errorf("no mount holds %s", path)
	}
	return best, nil
}

// parseLine reads the mount point (field 5) and the optional fields
// (from field 7 to the "-" separator) of a mountinfo line.
func parseLine(line string) (Mount, bool) {
	fields := strings.Fields(line)
	if len(fields) < 7 {
		return Mount{}, false
	}
	m := Mount{Point: unescapeMountPath(fields[4])}
	for _, opt := range fields[6:] {
		if opt == "-" {
			break
		}
		if strings.HasPrefix(opt, "shared:") {
			m.Shared = true
		}
	}
	return m, true
}

// within tells whether path is point or below it.
func within(path, point string) bool {
	return point == "/" || path == point || strings.HasPrefix(path, point+"/")
}
