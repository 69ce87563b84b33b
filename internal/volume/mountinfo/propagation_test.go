package mountinfo

import (
	"strings"
	"testing"
)

// A table like this machine's: / private, /run shared, a kubelet root
// bind-mounted on itself and made shared, then a private mount stacked on
// the same point.
const table = `22 1 8:1 / / rw,relatime - ext4 /dev/sda1 rw
23 22 0:21 / /run rw,nosuid shared:5 - tmpfs tmpfs rw
24 22 8:1 /var/lib/kubelet /var/lib/kubelet rw,relatime shared:7 - ext4 /dev/sda1 rw
25 24 0:30 / /var/lib/kubelet/pods/u/volumes/e rw master:3 - tmpfs tmpfs rw
26 22 8:1 /srv /srv rw - ext4 /dev/sda1 rw
27 26 8:1 /srv /srv rw shared:9 - ext4 /dev/sda1 rw
28 22 8:1 /a\040b /a\040b rw shared:10 - ext4 /dev/sda1 rw
`

func TestContaining(t *testing.T) {
	for _, tc := range []struct {
		path, point string
		shared      bool
	}{
		{"/var/lib/kubelet", "/var/lib/kubelet", true},
		{"/var/lib/kubelet/pods/u", "/var/lib/kubelet", true},
		{"/var/lib/kubelet/pods/u/volumes/e/f", "/var/lib/kubelet/pods/u/volumes/e", false},
		{"/var/lib/kubeletx", "/", false},
		{"/run/x", "/run", true},
		{"/tmp/root", "/", false},
		{"/srv/data", "/srv", true}, // the later of two mounts on one point
		{"/a b/c", "/a b", true},
	} {
		m, err := containing(strings.NewReader(table), tc.path)
		if err != nil {
			t.Fatalf("%s: %v", tc.path, err)
		}
		if m.Point != tc.point || m.Shared != tc.shared {
			t.Errorf("%s: got %+v, want point %s shared %v", tc.path, m, tc.point, tc.shared)
		}
	}
	if _, err := containing(strings.NewReader(""), "/x"); err == nil {
		t.Error("an empty table holds no mount, want an error")
	}
}
