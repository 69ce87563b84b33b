package logs

import (
	"bytes"
	"io"
)

const blockSize = 32 << 10

// backward yields a file's lines from the last to the first, reading
// blocks from the end: a tail of a large log reads little of it.
//
// The work is linear in the bytes read, however long a line is: blocks
// are read into the front of mem, which grows by doubling when full, so
// an unfinished line is not copied again for every block, and only the
// new block is searched for a newline.
type backward struct {
	r     io.ReaderAt
	pos   int64  // file offset of buf[0]
	mem   []byte // backing store; buf is mem[head:head+len(buf)]
	head  int
	buf   []byte // the file's bytes [pos, pos+len(buf)) not yet returned
	clean int    // the last clean bytes of buf hold no newline
	done  bool
}

func newBackward(r io.ReaderAt, size int64) *backward {
	return &backward{r: r, pos: size}
}

// next returns the previous line, without its newline, and its offset;
// ok is false once the first line has been returned. The last "line" is
// what follows the last newline: empty, or a record still being written.
// The line is valid until the next call.
func (b *backward) next() (line []byte, off int64, ok bool, err error) {
	for {
		if i := bytes.LastIndexByte(b.buf[:len(b.buf)-b.clean], '\n'); i >= 0 {
			line, off = b.buf[i+1:], b.pos+int64(i)+1
			b.buf, b.clean = b.buf[:i], 0
			return line, off, true, nil
		}
		b.clean = len(b.buf)
		if b.pos == 0 {
			if b.done {
				return nil, 0, false, nil
			}
			b.done = true
			return b.buf, 0, true, nil
		}
		if err := b.readBlock(); err != nil {
			return nil, 0, false, err
		}
	}
}

// readBlock prepends the block before pos to buf.
func (b *backward) readBlock() error {
	n := int(min(int64(blockSize), b.pos))
	if b.head < n {
		// Room for buf, the block, and as much again before them.
		grown := make([]byte, 2*(len(b.buf)+n))
		b.head = len(grown) - len(b.buf)
		copy(grown[b.head:], b.buf)
		b.mem = grown
	}
	if _, err := b.r.ReadAt(b.mem[b.head-n:b.head], b.pos-int64(n)); err != nil {
		return err
	}
	b.head -= n
	b.buf = b.mem[b.head : b.head+n+len(b.buf)]
	b.pos -= int64(n)
	return nil
}

// tailStart finds where the last n lines of the wanted streams begin in a
// file of that size. Lines are logical: a partial record (P) and the
// records that continue it in its stream up to the final one (F) are one
// line, and a stream's partial records at the end of the file, with no F
// yet, are its last line. It returns the offset to read from and, per
// stream, the offset of its first record to write: records of a stream
// before that belong to lines older than the last n (the two streams'
// lines interleave).
func tailStart(r io.ReaderAt, size, n int64, wanted [2]bool) (start int64, from [2]int64, err error) {
	start, from = size, [2]int64{size, size}
	if n <= 0 {
		return start, from, nil
	}
	var (
		count  int64
		seen   [2]bool // a record of the stream was met (going backwards)
		closed [2]bool // the stream's lines before here are not wanted
	)
	b := newBackward(r, size)
	for {
		line, off, ok, err := b.next()
		if err != nil {
			return 0, from, err
		}
		if !ok {
			return start, from, nil
		}
		rec, err := parseRecord(line)
		if err != nil {
			continue // an empty last line, or garbage: the reader skips it too
		}
		s := rec.stream
		if !wanted[s] || closed[s] {
			continue
		}
		// Going backwards, a final record ends (so begins, from here) a
		// new line; a partial one continues the line begun after it, or
		// is the stream's unfinished last line.
		if !rec.partial || !seen[s] {
			if count == n {
				closed[s] = true
				if (closed[0] || !seen[0]) && (closed[1] || !seen[1]) {
					return start, from, nil
				}
				continue
			}
			count++
		}
		seen[s] = true
		from[s], start = off, off
	}
}
