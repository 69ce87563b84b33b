package podstartup

import (
	"fmt"
	"strings"
	"time"
)

// FormatMessage renders a breakdown as the Event message, e.g.
//
//	Pod started in 1.21s: admission=20µs queue=3ms volumes=150µs sandbox=640ms image(main)=2.1ms create(main)=95ms start(main)=120ms readiness=330ms
//
// Phases appear in the order they happened; repeated ones (retries) add up.
func FormatMessage(total time.Duration, entries []entry) string {
	type key struct{ phase, container string }
	sums := map[key]time.Duration{}
	var order []key
	for _, e := range entries {
		k := key{e.phase, e.container}
		if _, ok := sums[k]; !ok {
			order = append(order, k)
		}
		sums[k] += e.d
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Pod started in %s:", round(total))
	for _, k := range order {
		name := k.phase
		if k.container != "" {
			name += "(" + k.container + ")"
		}
		fmt.Fprintf(&b, " %s=%s", name, round(sums[k]))
	}
	return b.String()
}

// round keeps three significant-ish digits: µs below a millisecond, 10 µs
// below a second, ms above.
func round(d time.Duration) time.Duration {
	switch {
	case d < time.Millisecond:
		return d.Round(time.Microsecond)
	case d < time.Second:
		return d.Round(10 * time.Microsecond)
	}
	return d.Round(time.Millisecond)
}

// ParseMessage reads a FormatMessage message back: the total and each
// phase's duration keyed as written, e.g. "sandbox" or "create(main)".
func ParseMessage(msg string) (time.Duration, map[string]time.Duration, error) {
	head, rest, ok := strings.Cut(msg, ":")
	total, err := time.ParseDuration(strings.TrimPrefix(head, "Pod started in "))
	if !ok || err != nil {
		return 0, nil, fmt.Errorf("not a %s message: %q", EventReason, msg)
	}
	phases := map[string]time.Duration{}
	for _, f := range strings.Fields(rest) {
		k, v, ok := strings.Cut(f, "=")
		d, err := time.ParseDuration(v)
		if !ok || err != nil {
			return 0, nil, fmt.Errorf("bad phase %q in %q", f, msg)
		}
		phases[k] += d
	}
	return total, phases, nil
}

// PhaseOf strips the container from a ParseMessage key: "create(main)" is
// phase "create".
func PhaseOf(key string) string {
	if i := strings.IndexByte(key, '('); i >= 0 {
		return key[:i]
	}
	return key
}
