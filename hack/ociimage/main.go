// Command ociimage builds a single-layer OCI image-layout archive from local
// files, so Skiff's development images (pause, busybox) can be made without a
// registry or a Dockerfile builder and imported with
//
//	ctr -n k8s.io images import out.tar
//
// Example:
//
//	go run ./hack/ociimage --name skiff.local/busybox:1.35 \
//	    --add /bin/busybox:/bin/busybox --busybox-links --base-files \
//	    --cmd sh -o busybox.tar
//
// The output is deterministic: the same inputs give the same bytes, so the
// same image digest.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
)

// listFlag is a repeatable string flag: each occurrence appends one value.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	var (
		opts        options
		adds, links listFlag
		entrypoint  listFlag
		cmd, env    listFlag
		output      string
	)
	flag.StringVar(&opts.Name, "name", "", "full image name with tag, e.g. skiff.local/busybox:1.35 (required)")
	flag.Var(&adds, "add", "host `SRC:DST` file to copy into the image (repeatable)")
	flag.Var(&links, "link", "symlink `PATH:TARGET` in the image (repeatable)")
	flag.BoolVar(&opts.BusyboxLinks, "busybox-links", false, "symlink every applet of the added busybox (from `busybox --list`) next to it")
	flag.BoolVar(&opts.BaseFiles, "base-files", false, "add /etc/passwd, /etc/group, /root and /tmp (mode 1777)")
	flag.Var(&entrypoint, "entrypoint", "one entrypoint argument (repeatable, in order)")
	flag.Var(&cmd, "cmd", "one cmd argument (repeatable, in order)")
	flag.Var(&env, "env", "`KEY=VALUE` environment variable (repeatable)")
	flag.StringVar(&opts.Workdir, "workdir", "", "working directory of the image")
	flag.StringVar(&output, "o", "", "output archive path (required)")
	flag.Parse()

	opts.Entrypoint, opts.Cmd, opts.Env = entrypoint, cmd, env
	if err := run(opts, adds, links, output); err != nil {
		fmt.Fprintln(os.Stderr, "ociimage:", err)
		os.Exit(1)
	}
}

func run(opts options, adds, links []string, output string) error {
	if opts.Name == "" || output == "" {
		return fmt.Errorf("--name and -o are required")
	}
	for _, a := range adds {
		src, dst, ok := strings.Cut(a, ":")
		if !ok || src == "" || dst == "" {
			return fmt.Errorf("--add %q: want SRC:DST", a)
		}
		opts.Files = append(opts.Files, hostFile{Src: src, Dst: dst})
	}
	for _, l := range links {
		p, target, ok := strings.Cut(l, ":")
		if !ok || p == "" || target == "" {
			return fmt.Errorf("--link %q: want PATH:TARGET", l)
		}
		opts.Links = append(opts.Links, link{Path: p, Target: target})
	}

	// Write to a temporary file and rename, so an interrupted build never
	// leaves a truncated archive that a later step would import.
	tmp := output + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	if err := build(f, opts); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, output)
}
