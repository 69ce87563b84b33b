package main

import (
	"slices"
	"testing"
)

// The import sets are the libraries Skiff's own packages import, with or
// without those that need client-go's scheme; Skiff's packages and
// libraries reached only through other libraries are not listed.
func TestImportGraphSets(t *testing.T) {
	g := &importGraph{pkgs: map[string]*listedPackage{
		module + "internal/a":                       {imports: []string{"fmt", "k8s.io/api/core/v1", module + "internal/b"}, needsScheme: true},
		module + "internal/b":                       {imports: []string{"k8s.io/client-go/kubernetes/typed/core/v1", "k8s.io/cri-client/pkg"}, needsScheme: true},
		"k8s.io/api/core/v1":                        {},
		"k8s.io/client-go/kubernetes/typed/core/v1": {imports: []string{scheme}, needsScheme: true},
		scheme:                  {imports: []string{"k8s.io/api/apps/v1"}, needsScheme: true},
		"k8s.io/api/apps/v1":    {},
		"k8s.io/cri-client/pkg": {},
	}}
	if got, want := g.own(), []string{module + "internal/a", module + "internal/b"}; !slices.Equal(got, want) {
		t.Errorf("own = %v, want %v", got, want)
	}
	if got, want := g.libraries(false), []string{"k8s.io/api/core/v1", "k8s.io/client-go/kubernetes/typed/core/v1", "k8s.io/cri-client/pkg"}; !slices.Equal(got, want) {
		t.Errorf("libraries = %v, want %v", got, want)
	}
	if got, want := g.libraries(true), []string{"k8s.io/api/core/v1", "k8s.io/cri-client/pkg"}; !slices.Equal(got, want) {
		t.Errorf("libraries without the scheme = %v, want %v", got, want)
	}
}
