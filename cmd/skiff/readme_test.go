package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/skiff-sh/skiff/internal/config"
)

var updateReadme = flag.Bool("update-readme", false, "rewrite the README's generated configuration table")

const (
	readmePath  = "../../README.md"
	readmeBegin = "<!-- BEGIN GENERATED: go test ./cmd/skiff -run TestReadmeTable -update-readme -->\n"
	readmeEnd   = "<!-- END GENERATED -->\n"
)

// readmeTable renders the field table and the flag-only flags as Markdown.
func readmeTable() string {
	flagsOf := map[string][]string{}
	for _, d := range flagTable {
		if d.field != "" {
			flagsOf[d.field] = append(flagsOf[d.field], "`--"+d.name+"`")
		}
	}
	var b strings.Builder
	b.WriteString("| `KubeletConfiguration` field | flag | in Skiff | note |\n|---|---|---|---|\n")
	for _, f := range config.Fields {
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", f.Path, strings.Join(flagsOf[f.Path], " "), f.Handling, f.Note)
	}
	b.WriteString("\n| flag outside the file | in Skiff | note |\n|---|---|---|\n")
	for _, d := range flagTable {
		if d.field != "" {
			continue
		}
		handling, note := "honoured", ""
		switch {
		case d.noEffect != "":
			handling, note = "no effect (warning)", d.noEffect
		case d.skiffOnly:
			handling = "Skiff only"
		}
		if d.deprecated != "" {
			note = strings.TrimPrefix(note+"; deprecated upstream", "; ")
		}
		fmt.Fprintf(&b, "| `--%s` | %s | %s |\n", d.name, handling, note)
	}
	return b.String()
}

// TestReadmeTable fails when the README's table is not what the code says;
// -update-readme rewrites it.
func TestReadmeTable(t *testing.T) {
	data, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	readme := string(data)
	begin, end := strings.Index(readme, readmeBegin), strings.Index(readme, readmeEnd)
	if begin < 0 || end < begin {
		t.Fatalf("README has no generated table between %q and %q", readmeBegin, readmeEnd)
	}
	want := readmeTable()
	got := readme[begin+len(readmeBegin) : end]
	if got == want {
		return
	}
	if !*updateReadme {
		t.Fatal("the README's configuration table is out of date: run go test ./cmd/skiff -run TestReadmeTable -update-readme")
	}
	updated := readme[:begin+len(readmeBegin)] + want + readme[end:]
	if err := os.WriteFile(readmePath, []byte(updated), 0o644); err != nil {
		t.Fatal(err)
	}
}
