package resize

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

// A checkpoint that cannot be read stops Skiff rather than let it forget
// or repeat a resize; pods that are gone are dropped from both files.
func TestStoreFiles(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, uid := range []types.UID{"keep", "gone"} {
		if err := s.SetAllocated(uid, Allocation{"c": rr("1", "", "", "")}); err != nil {
			t.Fatal(err)
		}
		if err := s.SetActuated(uid, "c", rr("1", "", "", "")); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Retain(func(uid types.UID) bool { return uid == "keep" }); err != nil {
		t.Fatal(err)
	}
	again, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := again.Allocated("gone"); ok {
		t.Error("a removed pod's allocation came back")
	}
	if _, ok := again.Actuated("gone", "c"); ok {
		t.Error("a removed pod's actuated resources came back")
	}
	a, ok := again.Allocated("keep")
	if r := a["c"]; !ok || r.Requests.Cpu().MilliValue() != 1000 {
		t.Errorf("kept allocation %v %v", a, ok)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			t.Errorf("temporary file left: %s", e.Name())
		}
	}
	if err := os.WriteFile(filepath.Join(dir, actuatedFile), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), "corrupt") {
		t.Errorf("a corrupt checkpoint opened: %v", err)
	}
}
