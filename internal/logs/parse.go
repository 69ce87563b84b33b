// Package logs reads and rotates container log files in the CRI format the
// runtime writes (one record per line: "<RFC3339Nano> <stream> <tag>
// <content>", tag P for a partial line continued by the next record of the
// same stream, F for the final part), and serves them as the kubelet API's
// /containerLogs does, with the semantics of v1.PodLogOptions.
package logs

import (
	"bytes"
	"errors"
	"fmt"
	"time"
)

// The two streams of a container, as CRI names them in its log records.
const (
	streamStdout = 0
	streamStderr = 1
)

// record is one line of a CRI log file.
type record struct {
	ts      time.Time
	stream  int  // streamStdout or streamStderr
	partial bool // tag P: the line goes on in the stream's next record
	content []byte
}

// parseRecord parses one CRI log line, without its newline.
func parseRecord(line []byte) (record, error) {
	var r record
	ts, rest, ok := bytes.Cut(line, []byte{' '})
	if !ok {
		return r, errors.New("no timestamp")
	}
	t, err := time.Parse(time.RFC3339Nano, string(ts))
	if err != nil {
		return r, fmt.Errorf("timestamp %q: %w", ts, err)
	}
	r.ts = t
	stream, rest, ok := bytes.Cut(rest, []byte{' '})
	if !ok {
		return r, errors.New("no stream")
	}
	switch string(stream) {
	case "stdout":
		r.stream = streamStdout
	case "stderr":
		r.stream = streamStderr
	default:
		return r, fmt.Errorf("unknown stream %q", stream)
	}
	// The tag may carry more ':'-separated tags in later CRI versions; the
	// first says partial or full. The content may be empty.
	tags, content, _ := bytes.Cut(rest, []byte{' '})
	first, _, _ := bytes.Cut(tags, []byte{':'})
	switch string(first) {
	case "P":
		r.partial = true
	case "F":
	default:
		return r, fmt.Errorf("unknown tag %q", tags)
	}
	r.content = content
	return r, nil
}

// timeFormatOut is how timestamps are written with Options.Timestamps:
// RFC 3339 with nine fixed fraction digits, as upstream writes them.
const timeFormatOut = "2006-01-02T15:04:05.000000000Z07:00"
