package expansion

import "testing"

func TestExpand(t *testing.T) {
	vars := map[string]string{"VAR_A": "A", "VAR_B": "B", "EMPTY": ""}
	cases := []struct{ in, want string }{
		{"plain", "plain"},
		{"$(VAR_A)", "A"},
		{"x-$(VAR_A)-$(VAR_B)-y", "x-A-B-y"},
		{"$(UNKNOWN)", "$(UNKNOWN)"},
		{"$$(VAR_A)", "$(VAR_A)"},
		{"$$$(VAR_A)", "$A"},
		{"$$", "$"},
		{"$VAR_A", "$VAR_A"},
		{"$(VAR_A", "$(VAR_A"},
		{"$()", "$()"},
		{"$(EMPTY)x", "x"},
		{"trailing$", "trailing$"},
		{"$(VAR_A)$(VAR_A)", "AA"},
		{"((($(VAR_B))))", "(((B)))"},
	}
	for _, c := range cases {
		if got := Expand(c.in, MapLookup(vars)); got != c.want {
			t.Errorf("Expand(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestMapLookupPriority(t *testing.T) {
	l := MapLookup(map[string]string{"X": "first"}, map[string]string{"X": "second", "Y": "y"})
	if v, _ := l("X"); v != "first" {
		t.Errorf("X = %q, want first", v)
	}
	if v, ok := l("Y"); !ok || v != "y" {
		t.Errorf("Y = %q,%v", v, ok)
	}
	if _, ok := l("Z"); ok {
		t.Error("Z should be unknown")
	}
}
