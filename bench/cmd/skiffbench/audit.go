package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// The node's API requests are counted from the apiserver's audit log: one
// line per request, logged when received, for users in system:nodes only.
// That counts what each kubelet asked for without putting anything between
// it and the apiserver.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["ResponseStarted", "ResponseComplete", "Panic"]
rules:
- level: Metadata
  userGroups: ["system:nodes"]
- level: None
`

func auditArgs(policyPath, logPath string) []string {
	return []string{
		"--audit-policy-file=" + policyPath,
		"--audit-log-path=" + logPath,
		"--audit-log-format=json",
		"--audit-log-maxsize=0",
	}
}

// auditLog reads the audit log incrementally.
type auditLog struct {
	path   string
	offset int64
}

// auditEvent is the part of an audit.k8s.io/v1 Event counted here.
type auditEvent struct {
	Verb string `json:"verb"`
	User struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
}

// requestCounts counts requests by "verb resource[/subresource]".
type requestCounts map[string]int

func (c requestCounts) total() int {
	n := 0
	for _, v := range c {
		n += v
	}
	return n
}

// keys returns the categories, largest first.
func (c requestCounts) keys() []string {
	out := make([]string, 0, len(c))
	for k := range c {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool {
		if c[out[i]] != c[out[j]] {
			return c[out[i]] > c[out[j]]
		}
		return out[i] < out[j]
	})
	return out
}

// skip moves past everything logged so far.
func (a *auditLog) skip() error {
	fi, err := os.Stat(a.path)
	if os.IsNotExist(err) {
		a.offset = 0
		return nil
	}
	if err != nil {
		return err
	}
	a.offset = fi.Size()
	return nil
}

// next counts the requests of user logged since the last call.
func (a *auditLog) next(user string) (requestCounts, error) {
	f, err := os.Open(a.path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if _, err := f.Seek(a.offset, io.SeekStart); err != nil {
		return nil, err
	}
	counts, n, err := countRequests(f, user)
	a.offset += n
	return counts, err
}

// countRequests counts the complete lines of r that are requests of user;
// n is the bytes consumed (a partial last line is left for next time).
func countRequests(r io.Reader, user string) (requestCounts, int64, error) {
	counts := requestCounts{}
	br := bufio.NewReaderSize(r, 1<<16)
	var n int64
	for {
		line, err := br.ReadString('\n')
		if err == io.EOF {
			return counts, n, nil // a partial line waits for the rest
		}
		if err != nil {
			return counts, n, err
		}
		n += int64(len(line))
		var e auditEvent
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			return counts, n, fmt.Errorf("audit log line: %w", err)
		}
		if e.User.Username != user {
			continue
		}
		counts[requestKey(e)]++
	}
}

func requestKey(e auditEvent) string {
	if e.ObjectRef == nil {
		return e.Verb + " (non-resource)"
	}
	r := e.ObjectRef.Resource
	if e.ObjectRef.Subresource != "" {
		r += "/" + e.ObjectRef.Subresource
	}
	return strings.TrimSpace(e.Verb + " " + r)
}
