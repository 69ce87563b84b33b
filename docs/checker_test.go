package docs

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// writeTree writes files (path relative to dir → content) under dir.
func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		path := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestCheckLinksFindsBrokenLinks(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"README.md": strings.Join([]string{
			"# Title",
			"[good](docs/a.md), [dir](src), [anchor](docs/a.md#the-flow-of-a-pod)",
			"[missing](docs/missing.md) and [bad anchor](docs/a.md#nowhere)",
			"[self](#title) [bad self](#no-such-heading) [web](https://example.com/x)",
			"![image](img/missing.png) `[code](not/a/link.md)`",
			"```",
			"[fenced](not/checked.md)",
			"```",
			"[escape](../outside.md) [space](docs/with%20space.md)",
		}, "\n"),
		"docs/a.md":          "# A\n\n## The flow of a pod\n\n[back](../README.md#title) [up](../README.md#gone)\n",
		"docs/with space.md": "x\n",
		"src/main.go":        "package main\n",
	})
	got, err := checkLinks(dir, []string{"README.md", "docs/a.md"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`README.md:3: link "docs/missing.md": docs/missing.md does not exist`,
		`README.md:3: link "docs/a.md#nowhere": docs/a.md has no heading #nowhere`,
		`README.md:4: link "#no-such-heading": README.md has no heading #no-such-heading`,
		`README.md:5: link "img/missing.png": img/missing.png does not exist`,
		`README.md:9: link "../outside.md" leads out of the repository`,
		`docs/a.md:5: link "../README.md#gone": README.md has no heading #gone`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestCheckLinksPassesAGoodTree(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"README.md": "# Skiff\n[docs](docs/a.md#b-and-c)\n",
		"docs/a.md": "## `B` and C!\n",
	})
	got, err := checkLinks(dir, []string{"README.md", "docs/a.md"})
	if err != nil || len(got) != 0 {
		t.Fatalf("checkLinks = %q, %v; want no problem", got, err)
	}
}

func TestCheckLinksMissingDocument(t *testing.T) {
	if _, err := checkLinks(t.TempDir(), []string{"README.md"}); err == nil {
		t.Fatal("checkLinks of a missing document: no error")
	}
}

func TestHeadingSlugs(t *testing.T) {
	text := strings.Join([]string{
		"# Skiff",
		"## The two commands",
		"### `/etc/hosts` and DNS",
		"## Where Skiff is slower, or misses a target, and why",
		"## Node-pressure eviction",
		"## activeDeadlineSeconds",
		"## snake_case stays",
		"## [Linked](x.md) heading",
		"```",
		"# not a heading",
		"```",
		"## The two commands",
		"#hashtag is no heading",
	}, "\n")
	want := []string{
		"skiff", "the-two-commands", "etchosts-and-dns",
		"where-skiff-is-slower-or-misses-a-target-and-why", "node-pressure-eviction",
		"activedeadlineseconds", "snake_case-stays", "linked-heading", "the-two-commands-1",
	}
	if got := headingSlugs(text); !slices.Equal(got, want) {
		t.Errorf("headingSlugs = %q, want %q", got, want)
	}
}

func TestCheckTestNamesFindsMissingTests(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"README.md": "Shown by `TestThere` and `BenchmarkThere`;\n" +
			"`TestGone` was renamed. FuzzThere runs too; Testing is a word.\n",
		"pkg/a_test.go": "package pkg\n\nfunc TestThere(t *testing.T) {}\nfunc BenchmarkThere(b *testing.B) {}\n",
		"pkg/b_test.go": "package pkg\n\nfunc FuzzThere(f *testing.F) {}\n",
		"pkg/c.go":      "package pkg\n\nfunc TestNotATest() {}\n",
	})
	got, err := checkTestNames(dir, []string{"README.md"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"README.md:2: TestGone is named but no _test.go file defines it"}
	if !slices.Equal(got, want) {
		t.Errorf("problems = %q, want %q", got, want)
	}
	writeTree(t, dir, map[string]string{"README.md": "`TestNotATest`\n"})
	if got, _ := checkTestNames(dir, []string{"README.md"}); len(got) != 1 {
		t.Errorf("a Test function outside a _test.go file counted as a test: problems %q", got)
	}
}
