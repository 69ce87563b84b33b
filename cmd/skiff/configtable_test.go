package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/skiff-sh/skiff/internal/config"
)

var updateConfigTable = flag.Bool("update-config-table", false, "rewrite the generated configuration table in docs/configuration.md")

// The configuration table lives in docs/configuration.md between these
// markers.
const (
	configDocPath  = "../../docs/configuration.md"
	configDocBegin = "<!-- BEGIN GENERATED: go test ./cmd/skiff -run TestConfigurationTable -update-config-table -->\n"
	configDocEnd   = "<!-- END GENERATED -->\n"
)

// configTable renders the field table and the flag-only flags as Markdown.
func configTable() string {
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

// TestConfigurationTable fails when the table in docs/configuration.md is
// not what the code says; -update-config-table rewrites it.
func TestConfigurationTable(t *testing.T) {
	data, err := os.ReadFile(configDocPath)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	begin, end := strings.Index(doc, configDocBegin), strings.Index(doc, configDocEnd)
	if begin < 0 || end < begin {
		t.Fatalf("%s has no generated table between %q and %q", configDocPath, configDocBegin, configDocEnd)
	}
	want := configTable()
	got := doc[begin+len(configDocBegin) : end]
	if got == want {
		return
	}
	if !*updateConfigTable {
		t.Fatal("the configuration table in docs/configuration.md is out of date: run go test ./cmd/skiff -run TestConfigurationTable -update-config-table")
	}
	updated := doc[:begin+len(configDocBegin)] + want + doc[end:]
	if err := os.WriteFile(configDocPath, []byte(updated), 0o644); err != nil {
		t.Fatal(err)
	}
}
