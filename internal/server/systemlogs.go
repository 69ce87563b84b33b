package server

import (
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"

	"k8s.io/klog/v2"
)

// SystemLogDir is the directory upstream's /logs/ serves.
const SystemLogDir = "/var/log"

// SystemLogs serves dir read-only under /logs/ (enableSystemLogHandler):
// directory listings and files, as upstream's http.FileServer on
// /var/log. Unlike upstream's http.Dir, it opens dir as an os.Root, so a
// symlink that leads out of dir is refused rather than followed.
func SystemLogs(dir string) http.Handler {
	return http.StripPrefix("/logs", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Opened per request: the directory may appear, or be replaced,
		// after Skiff starts.
		root, err := os.OpenRoot(dir)
		if err != nil {
			klog.ErrorS(err, "Serving node logs failed", "dir", dir)
			code := http.StatusInternalServerError
			if errors.Is(err, fs.ErrNotExist) {
				code = http.StatusNotFound
			}
			http.Error(w, "node log directory unavailable", code)
			return
		}
		defer root.Close()
		http.FileServerFS(refusingFS{root.FS()}).ServeHTTP(w, r)
	}))
}

// refusingFS answers 403 for what the os.Root refuses to open, such as a
// symlink that leads out of the directory: http.FileServer would answer
// 500 for it, as if the node had failed. Only "not found" stays a 404.
type refusingFS struct{ fs.FS }

func (r refusingFS) Open(name string) (fs.File, error) {
	f, err := r.FS.Open(name)
	if err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, fs.ErrPermission) {
		klog.V(2).InfoS("Refused a node log path", "path", name, "err", err)
		return nil, fmt.Errorf("%w: %w", fs.ErrPermission, err)
	}
	return f, err
}
