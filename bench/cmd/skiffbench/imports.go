package main

import (
	"context"
	"fmt"
	"go/format"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"
)

// An importSet is a program that imports packages and does nothing: its
// resident memory is what linking and initialising them costs a process.
type importSet struct {
	name string
	pkgs []string
}

// clientset is client-go's typed clientset. Every typed client imports its
// scheme, which registers every API group.
const (
	clientset = "k8s.io/client-go/kubernetes"
	scheme    = clientset + "/scheme"
)

// importCost builds and runs programs that import parts of what Skiff
// links, and writes their binary size and RSS.
func importCost(ctx context.Context, outDir string) error {
	g, err := skiffImports(ctx)
	if err != nil {
		return err
	}
	own, libs, withoutScheme := g.own(), g.libraries(false), g.libraries(true)
	sets := []importSet{
		{"nothing (the Go runtime)", nil},
		{"k8s.io/cri-client/pkg", []string{"k8s.io/cri-client/pkg"}},
		{"k8s.io/api/core/v1, client-go rest, gentype, tools/cache and tools/record", []string{"k8s.io/api/core/v1", "k8s.io/client-go/rest", "k8s.io/client-go/gentype", "k8s.io/client-go/tools/cache", "k8s.io/client-go/tools/record"}},
		{"k8s.io/client-go/kubernetes/typed/core/v1 (one typed client)", []string{"k8s.io/client-go/kubernetes/typed/core/v1"}},
		{clientset + " (the clientset)", []string{clientset}},
		{"k8s.io/client-go/util/certificate (the certificate manager)", []string{"k8s.io/client-go/util/certificate"}},
		{fmt.Sprintf("the %d library packages Skiff imports", len(libs)), libs},
		{fmt.Sprintf("the same without the %d that need client-go's scheme (typed clients, certificate manager, lease controller)", len(libs)-len(withoutScheme)), withoutScheme},
		{fmt.Sprintf("Skiff's %d own packages: Skiff initialised, not started", len(own)), own},
	}
	root := filepath.Join("_output", "importcost")
	if err := os.MkdirAll(root, 0o755); err != nil {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# What Skiff's libraries cost a process\n\n%s, %s. Each row is a program that imports the packages and sleeps; RSS is the median of three runs, read 2 s after start. Most of the file-backed part is the binary's pages mapped around the ones its package initialisers touch.\n\n", time.Now().UTC().Format(time.RFC3339), describeMachine().Kernel)
	b.WriteString("| program | binary (MB) | RSS (MB) | of which anonymous (MB) |\n|---|---:|---:|---:|\n")
	for i, s := range sets {
		bin := filepath.Join(root, fmt.Sprintf("set%d", i))
		if err := buildImportSet(ctx, bin, s.pkgs); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		if err := costRow(ctx, &b, s.name, bin); err != nil {
			return err
		}
	}
	fmt.Print(b.String())
	path := filepath.Join(outDir, time.Now().UTC().Format("2006-01-02T1504Z")+"-import-cost.md")
	fmt.Println("\nwritten:", path)
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// costRow runs a binary three times and writes its row.
func costRow(ctx context.Context, b *strings.Builder, name, bin string) error {
	st, err := os.Stat(bin)
	if err != nil {
		return err
	}
	var rss, anon []float64
	for range 3 {
		r, a, err := residentAfterStart(ctx, bin)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		rss, anon = append(rss, r), append(anon, a)
	}
	slices.Sort(rss)
	slices.Sort(anon)
	fmt.Fprintf(b, "| %s | %.1f | %.1f | %.1f |\n", name, float64(st.Size())/1e6, rss[1], anon[1])
	return nil
}

// importGraph is what go list says of the packages cmd/skiff links.
type importGraph struct {
	pkgs map[string]*listedPackage
}

type listedPackage struct {
	imports     []string
	needsScheme bool // is or depends on client-go's scheme
}

const module = "github.com/skiff-sh/skiff/"

func isOwn(path string) bool { return strings.HasPrefix(path, module) }

// skiffImports lists the non-standard packages cmd/skiff links.
func skiffImports(ctx context.Context) (*importGraph, error) {
	out, err := exec.CommandContext(ctx, "go", "list", "-deps", "-f",
		`{{if not .Standard}}{{.ImportPath}}|{{join .Imports ","}}|{{join .Deps ","}}{{end}}`, "./cmd/skiff").Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %w", err)
	}
	g := &importGraph{pkgs: map[string]*listedPackage{}}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.SplitN(line, "|", 3)
		if len(f) != 3 || f[0] == module+"cmd/skiff" {
			continue
		}
		needs := f[0] == scheme || slices.Contains(strings.Split(f[2], ","), scheme)
		g.pkgs[f[0]] = &listedPackage{imports: strings.Split(f[1], ","), needsScheme: needs}
	}
	return g, nil
}

// own lists Skiff's packages.
func (g *importGraph) own() []string {
	var out []string
	for p := range g.pkgs {
		if isOwn(p) {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

// libraries lists the library packages Skiff's packages import (the
// compiler links what they need), leaving out those that need client-go's
// scheme if asked.
func (g *importGraph) libraries(withoutScheme bool) []string {
	set := map[string]bool{}
	for p, lp := range g.pkgs {
		if !isOwn(p) {
			continue
		}
		for _, imp := range lp.imports {
			dep, ok := g.pkgs[imp] // standard packages are not listed
			if ok && !isOwn(imp) && !(withoutScheme && dep.needsScheme) {
				set[imp] = true
			}
		}
	}
	var out []string
	for p := range set {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// buildImportSet writes and builds a program that imports pkgs and sleeps.
func buildImportSet(ctx context.Context, bin string, pkgs []string) error {
	dir := bin + ".src"
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var src strings.Builder
	src.WriteString("package main\n\nimport (\n\t\"os\"\n\t\"time\"\n")
	for _, p := range pkgs {
		fmt.Fprintf(&src, "\t_ %q\n", p)
	}
	src.WriteString(")\n\nfunc main() {\n\tos.Stdout.WriteString(\"ok\\n\")\n\ttime.Sleep(time.Hour)\n}\n")
	formatted, err := format.Source([]byte(src.String())) // hack/lint.sh checks _output too
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "main.go"), formatted, 0o644); err != nil {
		return err
	}
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./"+dir)
	build.Env = append(os.Environ(), "CGO_ENABLED=0") // static, as make build builds Skiff
	out, err := build.CombinedOutput()
	if err != nil {
		return fmt.Errorf("go build: %w\n%s", err, out)
	}
	return nil
}

// residentAfterStart runs bin, reads its VmRSS and RssAnon after 2 s, and
// kills it.
func residentAfterStart(ctx context.Context, bin string) (rssMB, anonMB float64, err error) {
	cmd := exec.CommandContext(ctx, bin)
	if err := cmd.Start(); err != nil {
		return 0, 0, err
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	time.Sleep(2 * time.Second)
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid))
	if err != nil {
		return 0, 0, err
	}
	rss, err := parseStatusKB(string(raw), "VmRSS")
	if err != nil {
		return 0, 0, err
	}
	anon, err := parseStatusKB(string(raw), "RssAnon")
	if err != nil {
		return 0, 0, err
	}
	return float64(rss) / 1024, float64(anon) / 1024, nil
}
