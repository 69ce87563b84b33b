package du

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestDirNeverFollowsASwappedSymlink races the walk against a goroutine that
// keeps exchanging a subdirectory of the tree with a symlink to a directory
// outside it (renameat2 RENAME_EXCHANGE, as a container can). The outside
// directory holds a big file: counting it even once means the walk left the
// tree.
func TestDirNeverFollowsASwappedSymlink(t *testing.T) {
	const big = 8 << 20
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "big"), randomBytes(big), 0o644); err != nil {
		t.Fatal(err)
	}
	tree := t.TempDir()
	sub := filepath.Join(tree, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(sub, "small"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	aside := filepath.Join(t.TempDir(), "link") // same filesystem, outside the tree
	if err := os.Symlink(outside, aside); err != nil {
		t.Fatal(err)
	}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := unix.Renameat2(unix.AT_FDCWD, sub, unix.AT_FDCWD, aside, unix.RENAME_EXCHANGE); err != nil {
				t.Errorf("exchange: %v", err)
				return
			}
		}
	}()
	defer func() { close(stop); wg.Wait() }()

	deadline := time.Now().Add(2 * time.Second)
	walks := 0
	for ; walks < 100000 && time.Now().Before(deadline); walks++ {
		u, err := Dir(context.Background(), tree)
		if err != nil {
			t.Fatalf("walk %d: %v", walks, err)
		}
		if u.Bytes >= big {
			t.Fatalf("walk %d counted %d bytes: it followed the swapped symlink out of the tree", walks, u.Bytes)
		}
	}
	t.Logf("%d walks, none left the tree", walks)
}

// randomBytes returns n bytes that no filesystem can compress or dedupe,
// so the file really takes n bytes of blocks.
func randomBytes(n int) []byte {
	b := make([]byte, n)
	x := uint64(0x9e3779b97f4a7c15)
	for i := range b {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		b[i] = byte(x)
	}
	return b
}
