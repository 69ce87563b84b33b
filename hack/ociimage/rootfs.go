package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path"
	"sort"
	"strings"
)

// options describes the image to build.
type options struct {
	Name         string     // full reference, e.g. skiff.local/pause:3.10
	Files        []hostFile // host files copied into the image
	Links        []link     // symlinks made in the image
	BusyboxLinks bool       // add applet symlinks for the busybox among Files
	BaseFiles    bool       // add /etc/passwd, /etc/group, /root, /tmp

	Entrypoint, Cmd, Env []string
	Workdir              string
}

// hostFile is one --add SRC:DST.
type hostFile struct{ Src, Dst string }

// link is one --link PATH:TARGET.
type link struct{ Path, Target string }

// entryKind is the type of a file system entry in the layer.
type entryKind int

const (
	kindDir entryKind = iota
	kindFile
	kindSymlink
)

// entry is one file system object of the layer. Path is absolute and clean.
type entry struct {
	Path string
	Kind entryKind
	Mode int64  // permission bits, including sticky (01000)
	Data []byte // file contents
	Link string // symlink target
}

// rootfs collects the entries of the image's only layer, keyed by path so a
// later addition replaces an earlier one and parents are created once.
type rootfs map[string]entry

// add stores e and creates its missing parent directories (mode 0755).
func (r rootfs) add(e entry) error {
	p := path.Clean("/" + e.Path)
	if p == "/" {
		return fmt.Errorf("cannot add the root directory itself")
	}
	e.Path = p
	for dir := path.Dir(p); dir != "/"; dir = path.Dir(dir) {
		if _, ok := r[dir]; !ok {
			r[dir] = entry{Path: dir, Kind: kindDir, Mode: 0o755}
		}
	}
	r[p] = e
	return nil
}

// sorted returns the entries in path order: parents always precede children,
// and the layer's bytes do not depend on map order.
func (r rootfs) sorted() []entry {
	out := make([]entry, 0, len(r))
	for _, e := range r {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// collect builds the rootfs described by opts.
func collect(opts options) (rootfs, error) {
	r := rootfs{}
	for _, f := range opts.Files {
		data, err := os.ReadFile(f.Src)
		if err != nil {
			return nil, err
		}
		st, err := os.Stat(f.Src)
		if err != nil {
			return nil, err
		}
		if err := r.add(entry{Path: f.Dst, Kind: kindFile, Mode: int64(st.Mode().Perm()), Data: data}); err != nil {
			return nil, err
		}
	}
	for _, l := range opts.Links {
		if err := r.add(entry{Path: l.Path, Kind: kindSymlink, Mode: 0o777, Link: l.Target}); err != nil {
			return nil, err
		}
	}
	if opts.BusyboxLinks {
		if err := addBusyboxLinks(r, opts.Files); err != nil {
			return nil, err
		}
	}
	if opts.BaseFiles {
		if err := addBaseFiles(r); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// addBusyboxLinks runs the host busybox among files with --list and links
// each applet to it in the same directory, as busybox --install -s would.
// Entries already present (e.g. another --add) are left alone.
func addBusyboxLinks(r rootfs, files []hostFile) error {
	var bb *hostFile
	for i := range files {
		if path.Base(files[i].Dst) == "busybox" {
			bb = &files[i]
		}
	}
	if bb == nil {
		return fmt.Errorf("--busybox-links: no --add with a destination named busybox")
	}
	var stdout bytes.Buffer
	c := exec.Command(bb.Src, "--list")
	c.Stdout, c.Stderr = &stdout, os.Stderr
	if err := c.Run(); err != nil {
		return fmt.Errorf("%s --list: %w", bb.Src, err)
	}
	dir := path.Dir(path.Clean("/" + bb.Dst))
	for _, applet := range strings.Fields(stdout.String()) {
		p := path.Join(dir, applet)
		if applet == "busybox" || strings.Contains(applet, "/") {
			continue
		}
		if _, ok := r[p]; ok {
			continue
		}
		if err := r.add(entry{Path: p, Kind: kindSymlink, Mode: 0o777, Link: "busybox"}); err != nil {
			return err
		}
	}
	return nil
}

// addBaseFiles adds the minimum a shell image needs: users root and nobody
// (so runAsUser and `id` work), a home for root and a world-writable /tmp.
func addBaseFiles(r rootfs) error {
	for _, e := range []entry{
		{Path: "/etc/passwd", Kind: kindFile, Mode: 0o644, Data: []byte(
			"root:x:0:0:root:/root:/bin/sh\n" +
				"nobody:x:65534:65534:nobody:/nonexistent:/bin/false\n")},
		{Path: "/etc/group", Kind: kindFile, Mode: 0o644, Data: []byte(
			"root:x:0:\n" +
				"nogroup:x:65534:\n")},
		{Path: "/root", Kind: kindDir, Mode: 0o700},
		{Path: "/tmp", Kind: kindDir, Mode: 0o1777},
	} {
		if err := r.add(e); err != nil {
			return err
		}
	}
	return nil
}
