package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// statusWrites keeps only the node's pods/status writes in the namespace,
// from the offset on, with the apiserver's receive time.
func TestStatusWrites(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	old := `{"verb":"patch","user":{"username":"system:node:n"},"objectRef":{"resource":"pods","subresource":"status","namespace":"ns","name":"k000"},"requestReceivedTimestamp":"2026-11-25T10:00:00.000000Z"}` + "\n"
	lines := old +
		`{"verb":"patch","user":{"username":"system:node:n"},"objectRef":{"resource":"pods","subresource":"status","namespace":"ns","name":"k000"},"requestReceivedTimestamp":"2026-11-25T10:00:01.250000Z"}` + "\n" +
		`{"verb":"get","user":{"username":"system:node:n"},"objectRef":{"resource":"pods","namespace":"ns","name":"k000"},"requestReceivedTimestamp":"2026-11-25T10:00:01.300000Z"}` + "\n" +
		`{"verb":"patch","user":{"username":"admin"},"objectRef":{"resource":"pods","subresource":"status","namespace":"ns","name":"k000"},"requestReceivedTimestamp":"2026-11-25T10:00:01.400000Z"}` + "\n" +
		`{"verb":"patch","user":{"username":"system:node:n"},"objectRef":{"resource":"pods","subresource":"status","namespace":"other","name":"k000"},"requestReceivedTimestamp":"2026-11-25T10:00:01.500000Z"}` + "\n" +
		`{"verb":"update","user":{"username":"system:node:n"},"objectRef":{"resource":"pods","subresource":"status","namespace":"ns","name":"k001"},"requestReceivedTimestamp":"2026-11-25T10:00:02Z"}` + "\n"
	if err := os.WriteFile(path, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := statusWrites(path, int64(len(old)), "system:node:n", "ns")
	if err != nil {
		t.Fatal(err)
	}
	at := func(s string) time.Time { v, _ := time.Parse(time.RFC3339Nano, s); return v }
	if len(got) != 2 || len(got["k000"]) != 1 || !got["k000"][0].Equal(at("2026-11-25T10:00:01.25Z")) ||
		len(got["k001"]) != 1 || !got["k001"][0].Equal(at("2026-11-25T10:00:02Z")) {
		t.Fatalf("statusWrites = %v", got)
	}
}
