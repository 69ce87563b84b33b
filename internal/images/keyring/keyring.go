// Package keyring turns a pod's image pull secrets into registry
// credentials for an image, matching them as the upstream kubelet does:
// entries are keyed by registry host (with optional port, path prefix and
// per-label '*' wildcards), and every entry matching an image applies, the
// most specific first.
package keyring

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// Credential is one username/password pair for a registry.
type Credential struct {
	Username string
	Password string
	// Source names the secret it came from (namespace/name), for messages.
	Source string
}

// Keyring holds credentials by registry key (host[:port][/path]).
type Keyring struct {
	keys  []string // distinct keys, most specific first
	creds map[string][]Credential
}

// entry is one registry's item in a docker config file. "auth" is
// base64(username:password) and wins over the separate fields.
type entry struct {
	Username string `json:"username"`
	Password string `json:"password"`
	Auth     string `json:"auth"`
}

// FromSecrets builds a keyring from secrets of type
// kubernetes.io/dockerconfigjson (key .dockerconfigjson: {"auths": {...}})
// and kubernetes.io/dockercfg (key .dockercfg: the map itself). Secrets of
// other types, or without their key, are ignored as upstream does; a
// malformed one is an error naming it.
func FromSecrets(secrets []v1.Secret) (*Keyring, error) {
	k := &Keyring{creds: map[string][]Credential{}}
	for _, s := range secrets {
		source := s.Namespace + "/" + s.Name
		var entries map[string]entry
		switch data := s.Data; {
		case s.Type == v1.SecretTypeDockerConfigJson && len(data[v1.DockerConfigJsonKey]) > 0:
			var cfg struct {
				Auths map[string]entry `json:"auths"`
			}
			if err := json.Unmarshal(data[v1.DockerConfigJsonKey], &cfg); err != nil {
				return nil, fmt.Errorf("pull secret %s: invalid %s: %w", source, v1.DockerConfigJsonKey, err)
			}
			entries = cfg.Auths
		case s.Type == v1.SecretTypeDockercfg && len(data[v1.DockerConfigKey]) > 0:
			if err := json.Unmarshal(data[v1.DockerConfigKey], &entries); err != nil {
				return nil, fmt.Errorf("pull secret %s: invalid %s: %w", source, v1.DockerConfigKey, err)
			}
		default:
			continue
		}
		if err := k.add(source, entries); err != nil {
			return nil, err
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(k.keys)))
	return k, nil
}

func (k *Keyring) add(source string, entries map[string]entry) error {
	// Map order is random: add in key order so duplicates keep a stable order.
	locs := make([]string, 0, len(entries))
	for loc := range entries {
		locs = append(locs, loc)
	}
	sort.Strings(locs)
	for _, loc := range locs {
		e := entries[loc]
		c := Credential{Username: e.Username, Password: e.Password, Source: source}
		if e.Auth != "" {
			var err error
			if c.Username, c.Password, err = decodeAuth(e.Auth); err != nil {
				return fmt.Errorf("pull secret %s: registry %q: %w", source, loc, err)
			}
		}
		key, ok := registryKey(loc)
		if !ok {
			continue // as upstream: an unparsable entry is skipped
		}
		if _, seen := k.creds[key]; !seen {
			k.keys = append(k.keys, key)
		}
		k.creds[key] = append(k.creds[key], c)
	}
	return nil
}

// decodeAuth splits base64(user:password), padded or not.
func decodeAuth(s string) (string, string, error) {
	enc := base64.RawStdEncoding
	if strings.HasSuffix(strings.TrimSpace(s), "=") {
		enc = base64.StdEncoding
	}
	b, err := enc.DecodeString(s)
	if err != nil {
		return "", "", fmt.Errorf("auth is not base64: %w", err)
	}
	user, pass, ok := strings.Cut(string(b), ":")
	if !ok {
		return "", "", fmt.Errorf("auth must be base64(username:password)")
	}
	return user, pass, nil
}

// registryKey normalizes a config entry's location ("https://host/v1/",
// "host:5000", "*.example.com/team") to host[:port][/path].
func registryKey(loc string) (string, bool) {
	if !strings.HasPrefix(loc, "https://") && !strings.HasPrefix(loc, "http://") {
		loc = "https://" + loc
	}
	u, err := url.Parse(loc)
	if err != nil {
		return "", false
	}
	p := u.Path
	if strings.HasPrefix(p, "/v1/") || strings.HasPrefix(p, "/v2/") {
		p = p[3:]
	}
	if p == "" || p == "/" {
		return u.Host, true
	}
	return u.Host + p, true
}

// dockerHub is the key Docker Hub credentials are commonly stored under.
const dockerHub = "index.docker.io"

// Lookup returns the credentials for an image repository, given fully
// qualified as from reference.ParseNormalizedNamed(...).Name() (e.g.
// "docker.io/library/busybox", "127.0.0.1:5000/team/app"): those of every
// matching key, the most specific key first. No match returns nil: pull
// anonymously.
func (k *Keyring) Lookup(repo string) []Credential {
	if k == nil {
		return nil
	}
	var out []Credential
	for _, key := range k.keys {
		if matches(key, repo) {
			out = append(out, k.creds[key]...)
		}
	}
	if len(out) == 0 && isDockerHub(repo) {
		out = k.creds[dockerHub]
	}
	return out
}

// matches reports whether key (host[:port][/path], host labels may hold
// globs) covers repo: same port, same number of host labels each matching
// its glob, and repo's path starting with key's path.
func matches(key, repo string) bool {
	kh, kp := splitHostPath(key)
	rh, rp := splitHostPath(repo)
	kLabels, kPort := splitHost(kh)
	rLabels, rPort := splitHost(rh)
	if kPort != rPort || len(kLabels) != len(rLabels) || !strings.HasPrefix(rp, kp) {
		return false
	}
	for i := range kLabels {
		if ok, err := filepath.Match(kLabels[i], rLabels[i]); err != nil || !ok {
			return false
		}
	}
	return true
}

func splitHostPath(s string) (host, path string) {
	if i := strings.IndexByte(s, '/'); i >= 0 {
		return s[:i], s[i:]
	}
	return s, ""
}

func splitHost(hostport string) ([]string, string) {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		host, port = hostport, ""
	}
	return strings.Split(host, "."), port
}

// isDockerHub reports whether repo lives on Docker Hub.
func isDockerHub(repo string) bool {
	first, _, ok := strings.Cut(repo, "/")
	if first == "" {
		return false
	}
	return !ok || first == "docker.io" || first == dockerHub || !strings.ContainsAny(first, ".:")
}

// FromCredentials builds a keyring from credentials by registry location
// (as a docker config's keys), all from one source (e.g. a credential
// provider plugin). Unparsable locations are skipped, as in FromSecrets.
func FromCredentials(source string, creds map[string]Credential) *Keyring {
	k := &Keyring{creds: map[string][]Credential{}}
	entries := make(map[string]entry, len(creds))
	for loc, c := range creds {
		entries[loc] = entry{Username: c.Username, Password: c.Password}
	}
	_ = k.add(source, entries) // cannot fail: no "auth" field to decode
	sort.Sort(sort.Reverse(sort.StringSlice(k.keys)))
	return k
}

// Matches reports whether pattern (a registry location: host[:port][/path],
// globs allowed in host labels) covers repo, as Lookup matches its keys.
func Matches(pattern, repo string) bool {
	key, ok := registryKey(pattern)
	return ok && matches(key, repo)
}

// ValidatePattern checks a registry location pattern: it parses, names a
// host, and each host label is a valid glob.
func ValidatePattern(pattern string) error {
	key, ok := registryKey(pattern)
	if !ok {
		return fmt.Errorf("not a valid URL")
	}
	host, _ := splitHostPath(key)
	labels, _ := splitHost(host)
	if host == "" {
		return fmt.Errorf("no host")
	}
	for _, l := range labels {
		if _, err := filepath.Match(l, ""); err != nil {
			return fmt.Errorf("host label %q: %w", l, err)
		}
	}
	return nil
}
