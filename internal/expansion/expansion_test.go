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
		// Upstream's cases around incomplete references and escapes.
		{"$$ $(VAR_A)", "$ A"},
		{"$(VAR_B)_______$(A", "B_______$(A"},
		{"$(VAR_A)_______$(", "A_______$("},
		{"$(VAR_A)foobarzab$", "Afoobarzab$"},
		{"foo\\$(VAR_A)bar", "foo\\Abar"},
		{"--$($($($($--", "--$($($($($--"},
		{"$($($($($--foo$(", "$($($($($--foo$("},
		{"$(foo$$var)", "$(foo$$var)"},
		{"$(incomplete $$ $(VAR_A)", "$(incomplete $$ $(VAR_A)"}, // one unresolved name
		{"$(incomplete $$", "$(incomplete $"},
		{"$(VAR_A$(VAR_B)", "$(VAR_A$(VAR_B)"},
		{"héllo $é $(VAR_A)", "héllo $é A"},
		{"\n", "\n"},
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

func TestExpandStrict(t *testing.T) {
	vars := MapLookup(map[string]string{"POD": "p1", "EMPTY": ""})
	if got, err := ExpandStrict("logs/$(POD)", vars); err != nil || got != "logs/p1" {
		t.Errorf("ExpandStrict = %q, %v", got, err)
	}
	_, err := ExpandStrict("$(NOPE)/$(EMPTY)/$(POD)/$(NOPE)", vars)
	if err == nil || err.Error() != "missing value for EMPTY, NOPE" {
		t.Errorf("ExpandStrict error = %v, want missing value for EMPTY, NOPE", err)
	}
}
