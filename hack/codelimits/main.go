// Command codelimits checks the team's size rules on Skiff's own Go code: no
// non-test .go file over 400 lines and no function in one over 80 lines
// (a method, a function declaration, or a func literal in a top-level
// declaration; each measured from its `func` to its closing brace). hack/lint.sh
// runs it; it prints one line per finding and exits 1 if there is any.
//
//	go run ./hack/codelimits [root]
//
// Not checked: _test.go files, generated files (a "// Code generated ... DO
// NOT EDIT." header), nested modules (a directory with its own go.mod, such
// as hack/tools) and the directories the go tool ignores too: testdata and
// names starting with "." or "_" (.git, _output).
package main

import (
	"bytes"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

const (
	maxFileLines = 400
	maxFuncLines = 80
)

// finding is one broken rule: the thing at Path:Line is Length lines long,
// more than Limit.
type finding struct {
	Path   string // relative to the checked root, slash-separated
	Line   int
	What   string // "file", or the function, e.g. "func (*T).Run"
	Length int
	Limit  int
}

func (f finding) String() string {
	fix := "split it into smaller functions"
	if f.What == "file" {
		fix = "split it into smaller files, one concern each"
	}
	return fmt.Sprintf("%s:%d: %s is %d lines, limit %d: %s",
		f.Path, f.Line, f.What, f.Length, f.Limit, fix)
}

func main() {
	root := "."
	if len(os.Args) > 1 {
		root = os.Args[1]
	}
	if len(os.Args) > 2 {
		fmt.Fprintln(os.Stderr, "usage: codelimits [root]")
		os.Exit(2)
	}
	findings, err := check(root)
	for _, f := range findings {
		fmt.Fprintln(os.Stderr, f)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "codelimits: %v\n", err)
		os.Exit(2)
	}
	if len(findings) > 0 {
		os.Exit(1)
	}
}

// check walks the module rooted at root and returns every finding, in
// path order. Files it cannot read or parse are errors, not skipped.
func check(root string) ([]finding, error) {
	var findings []finding
	var errs []error
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && skipDir(path, d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() || !strings.HasSuffix(d.Name(), ".go") ||
			strings.HasSuffix(d.Name(), "_test.go") {
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		found, err := checkFile(path, filepath.ToSlash(rel))
		if err != nil {
			errs = append(errs, err)
		}
		findings = append(findings, found...)
		return nil
	})
	if err != nil {
		errs = append(errs, err)
	}
	return findings, errors.Join(errs...)
}

// skipDir reports whether the directory at path is outside the rules: one
// the go tool ignores, or the root of another module.
func skipDir(path, name string) bool {
	if name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
		return true
	}
	_, err := os.Stat(filepath.Join(path, "go.mod"))
	return err == nil
}

// checkFile measures one file; rel names it in findings.
func checkFile(path, rel string) ([]finding, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, path, src, parser.ParseComments)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", rel, err)
	}
	if ast.IsGenerated(file) {
		return nil, nil
	}
	var findings []finding
	if n := countLines(src); n > maxFileLines {
		findings = append(findings, finding{Path: rel, Line: 1, What: "file", Length: n, Limit: maxFileLines})
	}
	for _, fn := range functions(file) {
		start, end := fset.Position(fn.node.Pos()).Line, fset.Position(fn.node.End()).Line
		if n := end - start + 1; n > maxFuncLines {
			findings = append(findings, finding{Path: rel, Line: start, What: fn.name, Length: n, Limit: maxFuncLines})
		}
	}
	return findings, nil
}

// countLines counts lines as wc -l does, plus a last line without a newline.
func countLines(src []byte) int {
	n := bytes.Count(src, []byte{'\n'})
	if len(src) > 0 && src[len(src)-1] != '\n' {
		n++
	}
	return n
}

type function struct {
	name string
	node ast.Node // spans `func` to the closing brace
}

// functions lists the file's function declarations with a body and the
// outermost func literals in its top-level declarations (var x = func...).
// Literals inside a function count towards that function's length.
func functions(file *ast.File) []function {
	var fns []function
	for _, decl := range file.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			if d.Body != nil {
				fns = append(fns, function{name: funcName(d), node: d})
			}
		case *ast.GenDecl:
			ast.Inspect(d, func(n ast.Node) bool {
				lit, ok := n.(*ast.FuncLit)
				if ok {
					fns = append(fns, function{name: "func literal", node: lit})
				}
				return !ok
			})
		}
	}
	return fns
}

// funcName names a declaration as "func F" or "func (T).M" / "func (*T).M".
func funcName(d *ast.FuncDecl) string {
	if d.Recv == nil || len(d.Recv.List) == 0 {
		return "func " + d.Name.Name
	}
	return fmt.Sprintf("func (%s).%s", recvType(d.Recv.List[0].Type), d.Name.Name)
}

func recvType(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.StarExpr:
		return "*" + recvType(t.X)
	case *ast.IndexExpr: // T[P]
		return recvType(t.X)
	case *ast.IndexListExpr: // T[P, Q]
		return recvType(t.X)
	case *ast.Ident:
		return t.Name
	}
	return "?"
}
