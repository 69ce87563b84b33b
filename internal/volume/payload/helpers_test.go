package payload

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/skiff-sh/skiff/internal/volume/atomic"
)

func i32(v int32) *int32 { return &v }
func i64(v int64) *int64 { return &v }
func yes() *bool         { b := true; return &b }
func no() *bool          { b := false; return &b }

// f is a file without owners, for expectations.
func f(data string, mode int32) atomic.File { return atomic.File{Data: []byte(data), Mode: mode} }

// checkFiles compares data and modes, and owners where want has them.
func checkFiles(t *testing.T, got, want map[string]atomic.File) {
	t.Helper()
	if !slices.Equal(slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want))) {
		t.Fatalf("paths = %v, want %v", slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
	}
	for p, w := range want {
		g := got[p]
		if string(g.Data) != string(w.Data) {
			t.Errorf("%s data = %q, want %q", p, g.Data, w.Data)
		}
		if g.Mode != w.Mode {
			t.Errorf("%s mode = %#o, want %#o", p, g.Mode, w.Mode)
		}
		if !sameOwner(g.FsUser, w.FsUser) || !sameOwner(g.FsGroup, w.FsGroup) {
			t.Errorf("%s owner = %v/%v, want %v/%v", p, deref(g.FsUser), deref(g.FsGroup), deref(w.FsUser), deref(w.FsGroup))
		}
	}
}

func sameOwner(a, b *int64) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

func deref(p *int64) any {
	if p == nil {
		return nil
	}
	return *p
}

// checkErr fails unless err matches want: "" for no error, else a
// substring of the message.
func checkErr(t *testing.T, err error, want string) bool {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Fatalf("unexpected error: %v", err)
	case want != "" && err == nil:
		t.Fatalf("no error, want %q", want)
	case want != "" && !strings.Contains(err.Error(), want):
		t.Fatalf("error %q, want it to contain %q", err, want)
	}
	return err == nil
}
