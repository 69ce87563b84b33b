package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	digest "github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// readTar returns the regular files, and the headers of all entries, of a tar.
func readTar(t *testing.T, r io.Reader) (map[string][]byte, map[string]*tar.Header) {
	t.Helper()
	files, hdrs := map[string][]byte{}, map[string]*tar.Header{}
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return files, hdrs
		}
		if err != nil {
			t.Fatal(err)
		}
		hdrs[hdr.Name] = hdr
		if hdr.Typeflag == tar.TypeReg {
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			files[hdr.Name] = data
		}
	}
}

// blobOf returns the blob a descriptor points to, after checking that its
// size and digest match its content.
func blobOf(t *testing.T, files map[string][]byte, d ocispec.Descriptor) []byte {
	t.Helper()
	data, ok := files["blobs/sha256/"+d.Digest.Encoded()]
	if !ok {
		t.Fatalf("blob %s missing", d.Digest)
	}
	if got := digest.FromBytes(data); got != d.Digest || int64(len(data)) != d.Size {
		t.Fatalf("blob %s: content has digest %s size %d, descriptor says size %d", d.Digest, got, len(data), d.Size)
	}
	return data
}

func decode(t *testing.T, data []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatal(err)
	}
}

// fakeBusybox writes a script that answers --list like busybox does.
func fakeBusybox(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "busybox")
	if err := os.WriteFile(p, []byte("#!/bin/sh\nprintf 'sh\\nls\\nbusybox\\nsleep\\n'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestBuildArchive(t *testing.T) {
	opts := options{
		Name:         "skiff.local/busybox:1.35",
		Files:        []hostFile{{Src: fakeBusybox(t), Dst: "/bin/busybox"}},
		BusyboxLinks: true,
		BaseFiles:    true,
		Cmd:          []string{"sh"},
		Env:          []string{"FOO=bar"},
		Workdir:      "/root",
	}
	var out bytes.Buffer
	if err := build(&out, opts); err != nil {
		t.Fatal(err)
	}
	archive, _ := readTar(t, bytes.NewReader(out.Bytes()))

	var layout ocispec.ImageLayout
	decode(t, archive["oci-layout"], &layout)
	if layout.Version != ocispec.ImageLayoutVersion {
		t.Errorf("oci-layout version %q", layout.Version)
	}

	var index ocispec.Index
	decode(t, archive["index.json"], &index)
	if len(index.Manifests) != 1 {
		t.Fatalf("index has %d manifests, want 1", len(index.Manifests))
	}
	mdesc := index.Manifests[0]
	if got := mdesc.Annotations["io.containerd.image.name"]; got != opts.Name {
		t.Errorf("io.containerd.image.name = %q, want %q", got, opts.Name)
	}
	if got := mdesc.Annotations[ocispec.AnnotationRefName]; got != "1.35" {
		t.Errorf("ref.name = %q, want 1.35", got)
	}
	if mdesc.MediaType != ocispec.MediaTypeImageManifest {
		t.Errorf("manifest media type %q", mdesc.MediaType)
	}

	var manifest ocispec.Manifest
	decode(t, blobOf(t, archive, mdesc), &manifest)
	var config ocispec.Image
	decode(t, blobOf(t, archive, manifest.Config), &config)
	if config.OS != "linux" || config.Architecture != runtime.GOARCH {
		t.Errorf("platform %s/%s", config.OS, config.Architecture)
	}
	if !slices.Equal(config.Config.Cmd, []string{"sh"}) || config.Config.WorkingDir != "/root" {
		t.Errorf("config %+v", config.Config)
	}
	if !slices.Contains(config.Config.Env, "FOO=bar") || !slices.ContainsFunc(config.Config.Env, func(e string) bool { return strings.HasPrefix(e, "PATH=") }) {
		t.Errorf("env %v: want FOO=bar and a PATH", config.Config.Env)
	}

	if len(manifest.Layers) != 1 || len(config.RootFS.DiffIDs) != 1 {
		t.Fatalf("%d layers, %d diff_ids; want 1 and 1", len(manifest.Layers), len(config.RootFS.DiffIDs))
	}
	gz, err := gzip.NewReader(bytes.NewReader(blobOf(t, archive, manifest.Layers[0])))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(gz)
	if err != nil {
		t.Fatal(err)
	}
	if got := digest.FromBytes(raw); got != config.RootFS.DiffIDs[0] {
		t.Errorf("diff_id %s, uncompressed layer is %s", config.RootFS.DiffIDs[0], got)
	}
	checkLayer(t, raw)
}

// checkLayer checks the layer's content and that its headers are root-owned
// with the fixed time.
func checkLayer(t *testing.T, raw []byte) {
	t.Helper()
	files, hdrs := readTar(t, bytes.NewReader(raw))
	for name, h := range hdrs {
		if h.Uid != 0 || h.Gid != 0 || !h.ModTime.Equal(epoch) {
			t.Errorf("%s: uid %d gid %d mtime %v", name, h.Uid, h.Gid, h.ModTime)
		}
	}
	for _, applet := range []string{"bin/sh", "bin/ls", "bin/sleep"} {
		if h := hdrs[applet]; h == nil || h.Typeflag != tar.TypeSymlink || h.Linkname != "busybox" {
			t.Errorf("%s: want a symlink to busybox, got %+v", applet, h)
		}
	}
	if h := hdrs["bin/busybox"]; h == nil || h.Typeflag != tar.TypeReg || h.Mode != 0o755 {
		t.Errorf("bin/busybox: %+v", h)
	}
	if h := hdrs["tmp/"]; h == nil || h.Typeflag != tar.TypeDir || h.Mode != 0o1777 {
		t.Errorf("tmp/: %+v", h)
	}
	for _, dir := range []string{"bin/", "etc/", "root/"} {
		if h := hdrs[dir]; h == nil || h.Typeflag != tar.TypeDir {
			t.Errorf("%s: want a directory, got %+v", dir, h)
		}
	}
	if !bytes.Contains(files["etc/passwd"], []byte("nobody:x:65534:65534:")) || !bytes.HasPrefix(files["etc/passwd"], []byte("root:x:0:0:")) {
		t.Errorf("etc/passwd:\n%s", files["etc/passwd"])
	}
	if !bytes.Contains(files["etc/group"], []byte(":65534:")) {
		t.Errorf("etc/group:\n%s", files["etc/group"])
	}
}

func TestBuildIsDeterministic(t *testing.T) {
	opts := options{
		Name:         "skiff.local/busybox:1.35",
		Files:        []hostFile{{Src: fakeBusybox(t), Dst: "/bin/busybox"}},
		BusyboxLinks: true,
		BaseFiles:    true,
	}
	var a, b bytes.Buffer
	if err := build(&a, opts); err != nil {
		t.Fatal(err)
	}
	if err := build(&b, opts); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Error("two builds from the same inputs differ")
	}
}

func TestTagOf(t *testing.T) {
	for _, tc := range []struct {
		name, tag string
		ok        bool
	}{
		{"skiff.local/pause:3.10", "3.10", true},
		{"localhost:5000/busybox:1.35", "1.35", true},
		{"localhost:5000/busybox", "", false},
		{"skiff.local/busybox", "", false},
		{"skiff.local/busybox:", "", false},
		{"skiff.local/busybox@sha256:abc", "", false},
	} {
		tag, err := tagOf(tc.name)
		if (err == nil) != tc.ok || tag != tc.tag {
			t.Errorf("tagOf(%q) = %q, %v; want %q, ok=%v", tc.name, tag, err, tc.tag, tc.ok)
		}
	}
}

func TestBusyboxLinksNeedsBusybox(t *testing.T) {
	opts := options{Name: "skiff.local/x:1", BusyboxLinks: true}
	if err := build(io.Discard, opts); err == nil {
		t.Error("want an error when --busybox-links has no busybox to link")
	}
}

// --link makes a symlink (with its parent directories); a malformed one is
// refused.
func TestLinks(t *testing.T) {
	r, err := collect(options{Links: []link{{Path: "/usr/sbin/iptables", Target: "xtables-nft-multi"}}})
	if err != nil {
		t.Fatal(err)
	}
	if e := r["/usr/sbin/iptables"]; e.Kind != kindSymlink || e.Link != "xtables-nft-multi" {
		t.Errorf("/usr/sbin/iptables: %+v", e)
	}
	if e := r["/usr/sbin"]; e.Kind != kindDir {
		t.Errorf("/usr/sbin: %+v", e)
	}
	out := filepath.Join(t.TempDir(), "x.tar")
	if err := run(options{Name: "skiff.local/x:1"}, nil, []string{"no-target"}, out); err == nil {
		t.Error("--link without a target accepted")
	}
}
