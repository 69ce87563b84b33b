package credentialprovider

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sync/singleflight"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	kubeletconfigv1 "k8s.io/kubelet/config/v1"
	credentialproviderv1 "k8s.io/kubelet/pkg/apis/credentialprovider/v1"
	"k8s.io/utils/clock"

	"github.com/skiff-sh/skiff/internal/images/keyring"
)

// execTimeout bounds one run of a plugin, as upstream.
const execTimeout = time.Minute

// A plugin's output is bounded: its answer (a few credentials) to
// maxResponseSize, the stderr kept for the error message to maxStderr;
// once it has exited, a child it left holding its output gets
// pluginWaitDelay before the run fails and the child is killed.
const (
	maxResponseSize = 4 << 20
	maxStderr       = 4 << 10
	pluginWaitDelay = 5 * time.Second
)

var (
	errResponseTooLarge = errors.New("credential provider plugin wrote a response larger than the limit")
	errOutputHeld       = errors.New("credential provider plugin exited, but a process it left kept its output open")
)

// globalKey is the cache key of a response with cacheKeyType Global.
const globalKey = "<global>"

// plugin is one configured provider: its executable and its cache.
type plugin struct {
	cfg       kubeletconfigv1.CredentialProvider
	bin       string
	clock     clock.Clock
	waitDelay time.Duration // exec.Cmd's WaitDelay
	// run executes the plugin; replaced in tests.
	run   func(ctx context.Context, image string) (*credentialproviderv1.CredentialProviderResponse, error)
	group singleflight.Group

	mu    sync.Mutex
	cache map[string]cacheEntry // by image, registry or globalKey
}

type cacheEntry struct {
	creds   map[string]keyring.Credential
	expires time.Time
}

func newPlugin(cfg kubeletconfigv1.CredentialProvider, binDir string, clk clock.Clock) *plugin {
	p := &plugin{cfg: cfg, bin: filepath.Join(binDir, cfg.Name), clock: clk, waitDelay: pluginWaitDelay, cache: map[string]cacheEntry{}}
	p.run = p.exec
	return p
}

// matches reports whether the plugin serves repo (its matchImages).
func (p *plugin) matches(repo string) bool {
	for _, m := range p.cfg.MatchImages {
		if keyring.Matches(m, repo) {
			return true
		}
	}
	return false
}

// credentials returns the plugin's credentials for repo, from the cache
// while they last, else from one run of the plugin (concurrent asks for
// one image share it). A failed run gives none: the pull goes on with the
// other credentials, as upstream.
func (p *plugin) credentials(ctx context.Context, repo string) []keyring.Credential {
	if creds, ok := p.cached(repo); ok {
		return lookup(p.cfg.Name, creds, repo)
	}
	res, err, _ := p.group.Do(repo, func() (any, error) {
		// A run that just ended may have cached it.
		if creds, ok := p.cached(repo); ok {
			return creds, nil
		}
		// One caller's cancellation must not fail the others' shared run.
		resp, err := p.run(context.WithoutCancel(ctx), repo)
		if err != nil {
			return nil, err
		}
		creds := make(map[string]keyring.Credential, len(resp.Auth))
		for loc, a := range resp.Auth {
			creds[loc] = keyring.Credential{Username: a.Username, Password: a.Password}
		}
		p.store(repo, resp, creds)
		return creds, nil
	})
	if err != nil {
		klog.ErrorS(err, "Failed getting credential from external registry credential provider", "plugin", p.cfg.Name, "image", repo)
		return nil
	}
	return lookup(p.cfg.Name, res.(map[string]keyring.Credential), repo)
}

func lookup(name string, creds map[string]keyring.Credential, repo string) []keyring.Credential {
	return keyring.FromCredentials("credential provider "+name, creds).Lookup(repo)
}

// cached looks repo up by image, then registry, then the global key.
func (p *plugin) cached(repo string) (map[string]keyring.Credential, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.clock.Now()
	for k, e := range p.cache {
		if !now.Before(e.expires) {
			delete(p.cache, k)
		}
	}
	for _, k := range []string{repo, registryOf(repo), globalKey} {
		if e, ok := p.cache[k]; ok {
			return e.creds, true
		}
	}
	return nil, false
}

// store caches a response under the key its cacheKeyType names, for its
// cacheDuration (the plugin's default when unset; zero: not cached).
func (p *plugin) store(repo string, resp *credentialproviderv1.CredentialProviderResponse, creds map[string]keyring.Credential) {
	var key string
	switch resp.CacheKeyType {
	case credentialproviderv1.ImagePluginCacheKeyType:
		key = repo
	case credentialproviderv1.RegistryPluginCacheKeyType:
		key = registryOf(repo)
	case credentialproviderv1.GlobalPluginCacheKeyType:
		key = globalKey
	default:
		klog.ErrorS(nil, "Credential provider plugin did not return a valid cacheKeyType; not caching", "plugin", p.cfg.Name, "cacheKeyType", resp.CacheKeyType)
		return
	}
	d := p.cfg.DefaultCacheDuration.Duration
	if resp.CacheDuration != nil {
		d = resp.CacheDuration.Duration
	}
	if d <= 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cache[key] = cacheEntry{creds: creds, expires: p.clock.Now().Add(d)}
}

// registryOf is the host[:port] of a repository.
func registryOf(repo string) string {
	host, _, _ := strings.Cut(repo, "/")
	return host
}

// exec runs the plugin: the request on stdin, its args, the node's
// environment plus the configured env, at most execTimeout. The plugin
// runs in a process group of its own, killed whole on timeout or when a
// child it left holds its output open past waitDelay. Its answer is cut
// off at maxResponseSize, its stderr kept up to maxStderr.
func (p *plugin) exec(ctx context.Context, image string) (*credentialproviderv1.CredentialProviderResponse, error) {
	req, err := json.Marshal(credentialproviderv1.CredentialProviderRequest{
		TypeMeta: metav1.TypeMeta{APIVersion: pluginAPIVersion, Kind: "CredentialProviderRequest"},
		Image:    image,
	})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, execTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, p.bin, p.cfg.Args...)
	stdout := &limitedBuffer{max: maxResponseSize, err: errResponseTooLarge}
	stderr := &limitedBuffer{max: maxStderr}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(req), stdout, stderr
	cmd.Env = os.Environ()
	for _, e := range p.cfg.Env {
		cmd.Env = append(cmd.Env, e.Name+"="+e.Value)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return killGroup(cmd) }
	cmd.WaitDelay = p.waitDelay
	err = cmd.Run()
	switch {
	case stdout.exceeded:
		err = fmt.Errorf("%w (%d bytes)", errResponseTooLarge, maxResponseSize)
	case errors.Is(err, exec.ErrWaitDelay):
		err = errOutputHeld
	case ctx.Err() != nil:
		err = ctx.Err()
	}
	if err != nil {
		// Whatever the plugin left behind goes with it.
		if kerr := killGroup(cmd); kerr != nil && !errors.Is(kerr, syscall.ESRCH) {
			klog.V(2).InfoS("Could not kill the credential provider plugin's processes", "plugin", p.cfg.Name, "err", kerr)
		}
		return nil, fmt.Errorf("error execing credential provider plugin %s for image %s: %w; stderr: %s", p.cfg.Name, image, err, strings.TrimSpace(stderr.String()))
	}
	return decodeResponse(stdout.Bytes())
}

// killGroup kills the process group the plugin leads.
func killGroup(cmd *exec.Cmd) error {
	if cmd.Process == nil {
		return nil
	}
	return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
}

// decodeResponse reads a CredentialProviderResponse of the protocol's
// version, strictly.
func decodeResponse(b []byte) (*credentialproviderv1.CredentialProviderResponse, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	resp := &credentialproviderv1.CredentialProviderResponse{}
	if err := dec.Decode(resp); err != nil {
		return nil, fmt.Errorf("decode credential provider response: %w", err)
	}
	if resp.APIVersion != pluginAPIVersion || resp.Kind != "CredentialProviderResponse" {
		return nil, fmt.Errorf("credential provider response has apiVersion %q, kind %q: want %s CredentialProviderResponse",
			resp.APIVersion, resp.Kind, pluginAPIVersion)
	}
	return resp, nil
}

// limitedBuffer keeps what is written up to max bytes. Past that, it
// fails the write with err (the copy from the plugin stops, its pipe is
// closed, and a plugin still writing gets SIGPIPE), or, with err nil,
// drops the rest quietly. It has no ReadFrom, so that every copy goes
// through Write.
type limitedBuffer struct {
	buf      bytes.Buffer
	max      int
	err      error
	exceeded bool
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	room := b.max - b.buf.Len()
	if len(p) <= room {
		return b.buf.Write(p)
	}
	b.exceeded = true
	b.buf.Write(p[:room])
	if b.err != nil {
		return room, b.err
	}
	return len(p), nil
}

func (b *limitedBuffer) Bytes() []byte  { return b.buf.Bytes() }
func (b *limitedBuffer) String() string { return b.buf.String() }
