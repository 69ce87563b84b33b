package logs

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

// Options say what ReadLogs writes, as v1.PodLogOptions does.
type Options struct {
	// Follow keeps reading as the container writes, across rotations of
	// its log file, until ctx ends or the container has stopped and its
	// log is read to the end.
	Follow bool
	// TailLines, if set, starts with the last so many lines.
	TailLines *int64
	// LimitBytes, if set, stops after so many bytes have been written.
	LimitBytes *int64
	// Since drops lines the runtime recorded before it.
	Since time.Time
	// Timestamps starts each line with the time the runtime recorded it.
	Timestamps bool
}

// NewOptions converts the API's options; now resolves sinceSeconds. The
// later of sinceSeconds and sinceTime wins, as upstream.
func NewOptions(o *v1.PodLogOptions, now time.Time) Options {
	opts := Options{Follow: o.Follow, TailLines: o.TailLines, LimitBytes: o.LimitBytes, Timestamps: o.Timestamps}
	if o.SinceSeconds != nil {
		opts.Since = now.Add(-time.Duration(*o.SinceSeconds) * time.Second)
	}
	if o.SinceTime != nil && o.SinceTime.After(opts.Since) {
		opts.Since = o.SinceTime.Time
	}
	return opts
}

// Running reports whether the container still runs, so its log may grow.
type Running func(ctx context.Context) bool

const (
	// recheckPeriod bounds how long a follower waits without a file event
	// before it looks again (for a rotation, or a container that stopped).
	recheckPeriod = time.Second
	readBufSize   = 64 << 10
)

// errLimit ends a read that has written LimitBytes.
var errLimit = errors.New("byte limit reached")

// ReadLogs writes the CRI log file at path to stdout and stderr, each
// record to the writer of its stream; a nil writer drops its stream (and
// TailLines counts the lines of the streams written). Partial records are
// joined into their lines. With Follow, running says whether the container
// may still write: reading stops once it does not and the file is drained.
// When the runtime reopens the log (rotation), reading goes on in the new
// file. A writer with a Flush() error method is flushed whenever the
// reader waits for more.
func ReadLogs(ctx context.Context, path string, opts Options, running Running, stdout, stderr io.Writer) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("open log file %q: %w", path, err)
	}
	r := &logReader{opts: opts, out: [2]io.Writer{stdout, stderr}, remain: -1, file: f}
	defer func() { r.file.Close() }() // the last file followed
	if opts.LimitBytes != nil {
		r.remain = max(*opts.LimitBytes, 0)
		if r.remain == 0 {
			return nil
		}
	}
	if opts.TailLines != nil {
		fi, err := f.Stat()
		if err != nil {
			return fmt.Errorf("stat log file %q: %w", path, err)
		}
		start, from, err := tailStart(f, fi.Size(), *opts.TailLines, [2]bool{stdout != nil, stderr != nil})
		if err != nil {
			return fmt.Errorf("tail log file %q: %w", path, err)
		}
		if _, err := f.Seek(start, io.SeekStart); err != nil {
			return fmt.Errorf("seek log file %q: %w", path, err)
		}
		r.off, r.from = start, from
	}
	err = r.follow(ctx, path, running)
	if errors.Is(err, errLimit) {
		err = nil
	}
	return err
}

// logReader turns records into output, one file after another.
type logReader struct {
	opts    Options
	file    *os.File
	out     [2]io.Writer
	remain  int64 // bytes still to write; -1: no limit
	from    [2]int64
	off     int64 // file offset of pending's first byte
	pending []byte
	line    [2]lineState
	watch   *watcher
	checked time.Time // when running was last asked
}

// lineState is where a stream is within a logical line.
type lineState struct {
	mid  bool   // a partial record began a line not yet ended
	skip bool   // the line began before Since
	buf  []byte // the line so far, not written yet
}

func (r *logReader) follow(ctx context.Context, path string, running Running) error {
	defer r.watch.close()
	br := bufio.NewReaderSize(r.file, readBufSize)
	for {
		if err := r.drain(br); err != nil {
			return err
		}
		if !r.opts.Follow {
			return r.end()
		}
		if next := reopened(path, r.file); next != nil {
			// Rotated: what was written before the reopen is in the old
			// file; then the new one holds the rest.
			err := r.drain(br)
			if err == nil {
				err = r.flushPending()
			}
			r.file.Close()
			r.file = next
			if err != nil {
				return err
			}
			br.Reset(r.file)
			r.off, r.from = 0, [2]int64{}
			klog.V(4).InfoS("Following reopened log file", "path", path)
			continue
		}
		if err := r.flush(); err != nil {
			return err
		}
		if time.Since(r.checked) >= recheckPeriod {
			r.checked = time.Now()
			if running == nil || !running(ctx) {
				// Stopped: everything it wrote is in the file now.
				if err := r.drain(br); err != nil {
					return err
				}
				return r.end()
			}
		}
		if r.watch == nil {
			r.watch = newWatcher(path)
		}
		if err := r.watch.wait(ctx); err != nil {
			return err
		}
	}
}

// drain writes the complete records from br's position to its end; an
// incomplete last one waits in pending for the rest.
func (r *logReader) drain(br *bufio.Reader) error {
	for {
		chunk, err := br.ReadSlice('\n')
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			r.pending = append(r.pending, chunk...)
			continue
		case errors.Is(err, io.EOF):
			r.pending = append(r.pending, chunk...)
			return nil
		case err != nil:
			return fmt.Errorf("read log file: %w", err)
		}
		line := chunk
		if len(r.pending) > 0 {
			r.pending = append(r.pending, chunk...)
			line = r.pending
		}
		off := r.off
		r.off += int64(len(line))
		err = r.record(line[:len(line)-1], off)
		r.pending = r.pending[:0]
		if err != nil {
			return err
		}
	}
}

// flushPending writes what is left of a file without a final newline.
func (r *logReader) flushPending() error {
	if len(r.pending) == 0 {
		return nil
	}
	line := r.pending
	r.pending = nil
	off := r.off
	r.off += int64(len(line))
	return r.record(line, off)
}

// maxLineBuffer bounds how much of a partial line is held back before it
// is written anyway.
const maxLineBuffer = 256 << 10

// record writes one record (a line of the file, at offset off) as the
// options say. A partial record is held back until its line ends, so
// lines of the two streams never mix within a line on a shared writer.
func (r *logReader) record(line []byte, off int64) error {
	rec, err := parseRecord(line)
	if err != nil {
		klog.V(4).InfoS("Skipping unparseable log line", "err", err)
		return nil
	}
	s := rec.stream
	if r.out[s] == nil || off < r.from[s] {
		return nil
	}
	st := &r.line[s]
	begins := !st.mid
	if begins {
		st.skip = rec.ts.Before(r.opts.Since)
	}
	st.mid = rec.partial
	if st.skip {
		return nil
	}
	if r.opts.Timestamps && begins {
		st.buf = rec.ts.AppendFormat(st.buf, timeFormatOut)
		st.buf = append(st.buf, ' ')
	}
	st.buf = append(st.buf, rec.content...)
	if rec.partial && len(st.buf) < maxLineBuffer {
		return nil
	}
	if !rec.partial {
		st.buf = append(st.buf, '\n')
	}
	return r.write(s)
}

// write writes what stream s holds back, up to the byte limit.
func (r *logReader) write(s int) error {
	b := r.line[s].buf
	r.line[s].buf = b[:0]
	if len(b) == 0 {
		return nil
	}
	limited := r.remain >= 0 && int64(len(b)) >= r.remain
	if limited {
		b = b[:r.remain]
	}
	n, err := r.out[s].Write(b)
	if r.remain >= 0 {
		r.remain -= int64(n)
	}
	switch {
	case err != nil:
		return err
	case n < len(b):
		return io.ErrShortWrite
	case limited:
		return errLimit
	}
	return nil
}

// end writes what is left: a last record without its newline, and lines
// whose end never came.
func (r *logReader) end() error {
	if err := r.flushPending(); err != nil {
		return err
	}
	for s := range r.line {
		if r.out[s] != nil {
			if err := r.write(s); err != nil {
				return err
			}
		}
	}
	return r.flush()
}

// flush flushes the writers that buffer.
func (r *logReader) flush() error {
	type flusher interface{ Flush() error }
	for _, w := range r.out {
		if f, ok := w.(flusher); ok {
			if err := f.Flush(); err != nil {
				return err
			}
		}
	}
	return nil
}

// reopened returns the file path names now, when it is no longer f and
// the runtime has written to it: the runtime reopened its log after a
// rotation renamed it. Until the new file has a first byte the runtime may
// still be writing its last lines into f (it creates the new file before
// it switches its writer over), so f is read on.
func reopened(path string, f *os.File) *os.File {
	cur, err := f.Stat()
	if err != nil {
		return nil
	}
	fi, err := os.Stat(path)
	if err != nil || os.SameFile(cur, fi) || fi.Size() == 0 {
		return nil // not recreated yet, still the same, or not written to yet
	}
	next, err := os.Open(path)
	if err != nil {
		return nil
	}
	return next
}

// watcher wakes a follower when the log's directory changes, and at the
// latest after recheckPeriod; without inotify it just polls.
type watcher struct {
	fs   *fsnotify.Watcher
	name string
}

func newWatcher(path string) *watcher {
	w := &watcher{name: filepath.Clean(path)}
	fs, err := fsnotify.NewWatcher()
	if err != nil {
		klog.V(2).InfoS("No inotify for following a log; polling", "path", path, "err", err)
		return w
	}
	if err := fs.Add(filepath.Dir(path)); err != nil {
		klog.V(2).InfoS("Cannot watch a log's directory; polling", "path", path, "err", err)
		fs.Close()
		return w
	}
	w.fs = fs
	return w
}

// wait returns after a change to the log file (written or replaced), after
// recheckPeriod, or with ctx's error.
func (w *watcher) wait(ctx context.Context) error {
	timer := time.NewTimer(recheckPeriod)
	defer timer.Stop()
	var events <-chan fsnotify.Event
	var errs <-chan error
	if w.fs != nil {
		events, errs = w.fs.Events, w.fs.Errors
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
			return nil
		case e := <-events:
			if filepath.Clean(e.Name) == w.name {
				return nil
			}
		case err := <-errs:
			klog.V(4).InfoS("Log watch error; polling on", "err", err)
			return nil
		}
	}
}

func (w *watcher) close() {
	if w != nil && w.fs != nil {
		w.fs.Close()
	}
}

// Tail returns the end of a container's log, both streams: its last lines
// lines, and of those at most the last maxBytes bytes. It is what a
// FallbackToLogsOnError termination message is made of.
func Tail(ctx context.Context, path string, lines int64, maxBytes int) (string, error) {
	var b bytes.Buffer
	if err := ReadLogs(ctx, path, Options{TailLines: &lines}, nil, &b, &b); err != nil {
		return "", err
	}
	out := b.Bytes()
	if len(out) > maxBytes {
		out = out[len(out)-maxBytes:]
	}
	return string(out), nil
}
