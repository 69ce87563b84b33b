package eviction

import (
	"fmt"
	"syscall"
)

// DedicatedImageFs says whether the runtime's image filesystem (mounted at
// imageFsMount) is another device than the one holding rootDir, as
// upstream's HasDedicatedImageFs.
func DedicatedImageFs(rootDir, imageFsMount string) (bool, error) {
	var a, b syscall.Stat_t
	if err := syscall.Stat(rootDir, &a); err != nil {
		return false, fmt.Errorf("stat %s: %w", rootDir, err)
	}
	if err := syscall.Stat(imageFsMount, &b); err != nil {
		return false, fmt.Errorf("stat %s: %w", imageFsMount, err)
	}
	return a.Dev != b.Dev, nil
}
