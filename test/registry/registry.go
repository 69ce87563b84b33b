// Package registry runs a real container registry (CNCF Distribution, built
// by hack/build-tools.sh into _output/bin/registry) for tests, plain or with
// htpasswd basic auth, and pushes OCI image-layout archives (as
// hack/ociimage writes them) into it.
//
// The registry listens on 127.0.0.1. containerd's CRI plugin talks plain
// HTTP to 127.0.0.1, localhost and ::1 (any port) without any registry
// configuration, so the dev containerd pulls from it as it is.
package registry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/skiff-sh/skiff/test/ports"
)

// Options configure a registry.
type Options struct {
	// Bin is the registry binary; default: _output/bin/registry of the
	// repository holding the working directory.
	Bin string
	// Users, when set, turns on htpasswd auth with these user → password
	// pairs; anonymous requests then get 401.
	Users map[string]string
	// Dir holds the storage, config and log; default: a new temporary
	// directory, removed by Stop.
	Dir string
}

// Registry is one running registry process.
type Registry struct {
	// Host is the registry's host:port, the first component of its images'
	// names, e.g. 127.0.0.1:40123.
	Host    string
	dir     string
	tempDir bool
	cmd     *exec.Cmd
	exited  chan struct{}
	user    string // credentials Push uses when auth is on
	pass    string
}

// Start runs a registry on a free port of 127.0.0.1 and waits until it
// answers.
func Start(ctx context.Context, opts Options) (*Registry, error) {
	bin := opts.Bin
	if bin == "" {
		var err error
		if bin, err = defaultBin(); err != nil {
			return nil, err
		}
	}
	r := &Registry{dir: opts.Dir, exited: make(chan struct{})}
	if r.dir == "" {
		dir, err := os.MkdirTemp("", "skiff-registry")
		if err != nil {
			return nil, err
		}
		r.dir, r.tempDir = dir, true
	}
	port, err := ports.Free()
	if err != nil {
		return nil, err
	}
	r.Host = fmt.Sprintf("127.0.0.1:%d", port)
	config, err := r.writeConfig(opts.Users)
	if err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(r.dir, "registry.log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	r.cmd = exec.Command(bin, "serve", config)
	r.cmd.Stdout, r.cmd.Stderr = logf, logf
	// No tracing exporter: there is no collector to send spans to.
	r.cmd.Env = append(os.Environ(), "OTEL_TRACES_EXPORTER=none")
	if err := r.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start registry %s: %w", bin, err)
	}
	go func() { _ = r.cmd.Wait(); close(r.exited) }()
	if err := r.waitReady(ctx); err != nil {
		_ = r.Stop()
		return nil, err
	}
	return r, nil
}

// writeConfig writes the registry's config (and htpasswd file when users
// are given) and returns the config's path.
func (r *Registry) writeConfig(users map[string]string) (string, error) {
	auth := ""
	if len(users) > 0 {
		var lines []string
		for u, p := range users {
			h, err := bcrypt.GenerateFromPassword([]byte(p), bcrypt.DefaultCost)
			if err != nil {
				return "", err
			}
			lines = append(lines, u+":"+string(h))
			r.user, r.pass = u, p
		}
		htpasswd := filepath.Join(r.dir, "htpasswd")
		if err := os.WriteFile(htpasswd, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
			return "", err
		}
		auth = fmt.Sprintf("auth:\n  htpasswd:\n    realm: skiff-test\n    path: %s\n", htpasswd)
	}
	cfg := fmt.Sprintf(`version: 0.1
log:
  level: info
  accesslog:
    disabled: false
storage:
  filesystem:
    rootdirectory: %s
  delete:
    enabled: true
http:
  addr: %s
%s`, filepath.Join(r.dir, "storage"), r.Host, auth)
	path := filepath.Join(r.dir, "config.yml")
	return path, os.WriteFile(path, []byte(cfg), 0o600)
}

// waitReady polls /v2/ until the registry answers (200, or 401 with auth).
func (r *Registry) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		resp, err := http.Get("http://" + r.Host + "/v2/")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusUnauthorized {
				return nil
			}
		}
		select {
		case <-r.exited:
			return fmt.Errorf("registry exited: %s", r.LogTail())
		case <-ctx.Done():
			return fmt.Errorf("registry on %s not answering: %w; log: %s", r.Host, ctx.Err(), r.LogTail())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// LogTail returns the end of the registry's log, for test failures.
func (r *Registry) LogTail() string {
	b, _ := os.ReadFile(filepath.Join(r.dir, "registry.log"))
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// Stop ends the registry and removes its temporary directory.
func (r *Registry) Stop() error {
	var err error
	if r.cmd != nil && r.cmd.Process != nil {
		_ = r.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-r.exited:
		case <-time.After(10 * time.Second):
			_ = r.cmd.Process.Kill()
			<-r.exited
		}
	}
	if r.tempDir {
		err = os.RemoveAll(r.dir)
	}
	return err
}

// defaultBin is _output/bin/registry of the repository.
func defaultBin() (string, error) {
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(root, "_output", "bin", "registry")
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("no registry binary (run `make tools`): %w", err)
	}
	return bin, nil
}

// repoRoot is the nearest directory at or above the working directory
// (tests run in their package's) that holds hack/ociimage.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "hack", "ociimage")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not inside the Skiff repository")
		}
		dir = parent
	}
}
