package registry

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"strings"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// Push uploads the single image of an OCI image-layout archive (as
// hack/ociimage writes) as repo:tag through the registry's HTTP API (the
// OCI distribution spec: blob uploads, then the manifest). It returns the
// manifest's digest. With auth on, it uses the registry's own user.
func (r *Registry) Push(ctx context.Context, archive, repo, tag string) (string, error) {
	files, err := readArchive(archive)
	if err != nil {
		return "", err
	}
	var index ocispec.Index
	if err := json.Unmarshal(files["index.json"], &index); err != nil {
		return "", fmt.Errorf("%s: index.json: %w", archive, err)
	}
	if len(index.Manifests) != 1 {
		return "", fmt.Errorf("%s: want one manifest in index.json, have %d", archive, len(index.Manifests))
	}
	mdesc := index.Manifests[0]
	mbytes, ok := files[blobPath(mdesc)]
	if !ok {
		return "", fmt.Errorf("%s: no blob for manifest %s", archive, mdesc.Digest)
	}
	var manifest ocispec.Manifest
	if err := json.Unmarshal(mbytes, &manifest); err != nil {
		return "", fmt.Errorf("%s: manifest: %w", archive, err)
	}
	for _, d := range append([]ocispec.Descriptor{manifest.Config}, manifest.Layers...) {
		data, ok := files[blobPath(d)]
		if !ok {
			return "", fmt.Errorf("%s: no blob %s", archive, d.Digest)
		}
		if err := r.pushBlob(ctx, repo, d, data); err != nil {
			return "", err
		}
	}
	resp, err := r.do(ctx, http.MethodPut, r.url("/v2/"+repo+"/manifests/"+tag), mdesc.MediaType, mbytes)
	if err != nil {
		return "", fmt.Errorf("put manifest %s:%s: %w", repo, tag, err)
	}
	return resp.Header.Get("Docker-Content-Digest"), nil
}

// pushBlob uploads one blob unless the registry has it: a monolithic
// upload, POST for a session then PUT with the digest.
func (r *Registry) pushBlob(ctx context.Context, repo string, d ocispec.Descriptor, data []byte) error {
	if _, err := r.do(ctx, http.MethodHead, r.url("/v2/"+repo+"/blobs/"+d.Digest.String()), "", nil); err == nil {
		return nil
	}
	resp, err := r.do(ctx, http.MethodPost, r.url("/v2/"+repo+"/blobs/uploads/"), "", nil)
	if err != nil {
		return fmt.Errorf("start upload of %s: %w", d.Digest, err)
	}
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil {
		return fmt.Errorf("upload location: %w", err)
	}
	u := r.url("/").ResolveReference(loc)
	q := u.Query()
	q.Set("digest", d.Digest.String())
	u.RawQuery = q.Encode()
	if _, err := r.do(ctx, http.MethodPut, u, "application/octet-stream", data); err != nil {
		return fmt.Errorf("upload %s: %w", d.Digest, err)
	}
	return nil
}

func (r *Registry) url(p string) *url.URL {
	return &url.URL{Scheme: "http", Host: r.Host, Path: p}
}

// do sends one request and fails on any status but 2xx.
func (r *Registry) do(ctx context.Context, method string, u *url.URL, contentType string, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, u.String(), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if r.user != "" {
		req.SetBasicAuth(r.user, r.pass)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("%s %s: %s: %s", method, u.Path, resp.Status, strings.TrimSpace(string(msg)))
	}
	return resp, nil
}

func blobPath(d ocispec.Descriptor) string {
	return path.Join("blobs", d.Digest.Algorithm().String(), d.Digest.Encoded())
}

// readArchive returns the regular files of a tar by their cleaned paths.
func readArchive(name string) (map[string][]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	files := map[string][]byte{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", name, err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", name, err)
		}
		files[path.Clean(strings.TrimPrefix(h.Name, "./"))] = b
	}
}
