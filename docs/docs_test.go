// Package docs holds Skiff's documentation. Its tests check that every
// relative link in README.md, docs/*.md and bench/README.md resolves to a
// file of the repository (and, for a Markdown target, to one of its
// headings when the link names an anchor), and that every test, benchmark
// and fuzz target the documents name exists: a claim keeps its test only
// while the test is there.
package docs

import (
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// repoRoot is the repository, seen from this package's directory.
const repoRoot = ".."

// documents are the Markdown files checked, relative to the repository.
func documents(t *testing.T, root string) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files := []string{"README.md", filepath.Join("bench", "README.md")}
	for _, d := range docs {
		rel, err := filepath.Rel(root, d)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, rel)
	}
	return files
}

func TestDocumentLinksResolve(t *testing.T) {
	files := documents(t, repoRoot)
	if len(files) < 3 {
		t.Fatalf("found only %v: the documents moved?", files)
	}
	problems, err := checkLinks(repoRoot, files)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
}

func TestDocumentedTestsExist(t *testing.T) {
	problems, err := checkTestNames(repoRoot, documents(t, repoRoot))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
}

var (
	// linkRE matches an inline link or image: [text](target "title").
	linkRE = regexp.MustCompile(`\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	// codeSpanRE matches inline code, where brackets are not links.
	codeSpanRE = regexp.MustCompile("`[^`]*`")
	headingRE  = regexp.MustCompile(`^#{1,6}\s+(.+?)\s*#*\s*$`)
	schemeRE   = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
)

// line is one line of a document, numbered from 1.
type line struct {
	n    int
	text string
}

// proseLines returns the lines of a Markdown text outside fenced code
// blocks.
func proseLines(text string) []line {
	var out []line
	fenced := false
	for i, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			out = append(out, line{i + 1, l})
		}
	}
	return out
}

// checkLinks returns one problem per relative link in files (paths
// relative to root) that does not resolve: a missing file, a path out of
// root, or an anchor that is no heading of its Markdown target.
func checkLinks(root string, files []string) ([]string, error) {
	var problems []string
	anchors := map[string][]string{} // by Markdown file, relative to root
	for _, file := range files {
		data, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			return nil, err
		}
		for _, l := range proseLines(string(data)) {
			for _, m := range linkRE.FindAllStringSubmatch(codeSpanRE.ReplaceAllString(l.text, ""), -1) {
				if p := checkLink(root, file, m[1], anchors); p != "" {
					problems = append(problems, fmt.Sprintf("%s:%d: %s", file, l.n, p))
				}
			}
		}
	}
	return problems, nil
}

// checkLink checks one link target of file; "" means it resolves.
func checkLink(root, file, target string, anchors map[string][]string) string {
	if schemeRE.MatchString(target) || strings.HasPrefix(target, "//") {
		return "" // another site: not checked
	}
	path, anchor, _ := strings.Cut(target, "#")
	path, err := url.PathUnescape(path)
	if err != nil {
		return fmt.Sprintf("link %q: %v", target, err)
	}
	rel := file
	if path != "" {
		if filepath.IsAbs(path) {
			return fmt.Sprintf("link %q is absolute: use a path relative to %s", target, file)
		}
		rel = filepath.Join(filepath.Dir(file), filepath.FromSlash(path))
		if rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return fmt.Sprintf("link %q leads out of the repository", target)
		}
		if _, err := os.Stat(filepath.Join(root, rel)); err != nil {
			return fmt.Sprintf("link %q: %s does not exist", target, filepath.ToSlash(rel))
		}
	}
	if anchor == "" || !strings.HasSuffix(rel, ".md") {
		return ""
	}
	slugs, ok := anchors[rel]
	if !ok {
		data, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			return fmt.Sprintf("link %q: %v", target, err)
		}
		slugs = headingSlugs(string(data))
		anchors[rel] = slugs
	}
	if !slices.Contains(slugs, anchor) {
		return fmt.Sprintf("link %q: %s has no heading #%s", target, filepath.ToSlash(rel), anchor)
	}
	return ""
}

// headingSlugs returns the anchors GitHub gives a document's headings.
func headingSlugs(text string) []string {
	var slugs []string
	seen := map[string]int{}
	for _, l := range proseLines(text) {
		m := headingRE.FindStringSubmatch(l.text)
		if m == nil {
			continue
		}
		s := slug(m[1])
		if k := seen[s]; k > 0 {
			slugs = append(slugs, fmt.Sprintf("%s-%d", s, k))
		} else {
			slugs = append(slugs, s)
		}
		seen[s]++
	}
	return slugs
}

// slug is GitHub's anchor for a heading: the text of its links, lower
// case, without punctuation but for '-' and '_', spaces made '-'.
func slug(heading string) string {
	heading = linkRE.ReplaceAllStringFunc(heading, func(l string) string {
		return l[1:strings.Index(l, "](")]
	})
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}

var (
	// namedTestRE matches the name of a test, benchmark or fuzz target.
	namedTestRE = regexp.MustCompile(`\b(?:Test|Benchmark|Fuzz)[A-Z][A-Za-z0-9_]*\b`)
	testFuncRE  = regexp.MustCompile(`(?m)^func ((?:Test|Benchmark|Fuzz)[A-Za-z0-9_]*)\(`)
)

// checkTestNames returns one problem per test, benchmark or fuzz target
// named in files that no _test.go file under root defines.
func checkTestNames(root string, files []string) ([]string, error) {
	defined := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "_output") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range testFuncRE.FindAllStringSubmatch(string(data), -1) {
			defined[m[1]] = true
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var problems []string
	for _, file := range files {
		data, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			return nil, err
		}
		for i, line := range strings.Split(string(data), "\n") {
			for _, name := range namedTestRE.FindAllString(line, -1) {
				if !defined[name] {
					problems = append(problems, fmt.Sprintf("%s:%d: %s is named but no _test.go file defines it", file, i+1, name))
				}
			}
		}
	}
	return problems, nil
}
