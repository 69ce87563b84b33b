// Package expansion implements the $(VAR) syntax of the Pod API: references
// in command, args and env values are replaced by the named variable, "$$"
// escapes a "$", and unknown references are left as written. The rules are
// upstream's (third_party/forked/golang/expansion): a "$(" without a closing
// ")" is kept and scanning goes on after it, so "$$" further on still
// escapes; "$" before any other character is kept as is.
package expansion

import (
	"fmt"
	"sort"
	"strings"
)

// Expand replaces every $(NAME) in s for which lookup finds a value.
func Expand(s string, lookup func(string) (string, bool)) string {
	return expand(s, func(name string) string {
		if v, ok := lookup(name); ok {
			return v
		}
		return "$(" + name + ")"
	})
}

// ExpandStrict expands as subPathExpr does upstream: every reference must
// name a variable with a non-empty value, else it is an error listing the
// missing names.
func ExpandStrict(s string, lookup func(string) (string, bool)) (string, error) {
	missing := map[string]bool{}
	out := expand(s, func(name string) string {
		v, ok := lookup(name)
		if !ok || v == "" {
			missing[name] = true
		}
		return v
	})
	if len(missing) > 0 {
		names := make([]string, 0, len(missing))
		for n := range missing {
			names = append(names, n)
		}
		sort.Strings(names)
		return "", fmt.Errorf("missing value for %s", strings.Join(names, ", "))
	}
	return out, nil
}

func expand(s string, resolve func(name string) string) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$': // "$$" is an escaped "$"
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 { // unterminated: keep "$(" and read on after it
				b.WriteString("$(")
				i++
				continue
			}
			b.WriteString(resolve(s[i+2 : i+2+end]))
			i += 2 + end
		default: // a lone "$": kept, and the next character read normally
			b.WriteByte('$')
		}
	}
	return b.String()
}

// MapLookup returns a lookup over the given maps, the first having priority.
func MapLookup(maps ...map[string]string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		for _, m := range maps {
			if v, ok := m[name]; ok {
				return v, true
			}
		}
		return "", false
	}
}
