package logs

import (
	"bytes"
	"fmt"
	"math/rand"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
)

// countingReader counts the bytes read through it.
type countingReader struct {
	r *bytes.Reader
	n atomic.Int64
}

func (c *countingReader) ReadAt(p []byte, off int64) (int, error) {
	n, err := c.r.ReadAt(p, off)
	c.n.Add(int64(n))
	return n, err
}

// Lines short and long (many blocks), read backwards, are the file's
// lines in reverse with their offsets.
func TestBackwardLines(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	var want []string
	var file strings.Builder
	for i := 0; i < 300; i++ {
		n := rng.Intn(100)
		switch rng.Intn(10) {
		case 0:
			n = rng.Intn(5 * blockSize)
		case 1:
			n = blockSize - 1 + rng.Intn(3)
		}
		want = append(want, strings.Repeat(string(rune('a'+i%26)), n))
		file.WriteString(want[i])
		file.WriteByte('\n')
	}
	want = append(want, "unfinished")
	file.WriteString("unfinished")
	content := file.String()
	b := newBackward(strings.NewReader(content), int64(len(content)))
	for i := len(want) - 1; i >= 0; i-- {
		line, off, ok, err := b.next()
		if err != nil || !ok {
			t.Fatalf("line %d: ok %v, err %v", i, ok, err)
		}
		if string(line) != want[i] {
			t.Fatalf("line %d: got %d bytes, want %d", i, len(line), len(want[i]))
		}
		if got := content[off : off+int64(len(line))]; got != want[i] {
			t.Fatalf("line %d: offset %d does not hold it", i, off)
		}
	}
	if _, _, ok, err := b.next(); ok || err != nil {
		t.Fatalf("after the first line: ok %v, err %v", ok, err)
	}
}

// hugeLineLog is one CRI record whose content is size bytes.
func hugeLineLog(size int) []byte {
	return []byte(line(0, "stdout", "F", strings.Repeat("x", size)))
}

// A tail of one 16 MiB line reads each byte once and allocates a small
// multiple of the line: copying the unfinished line again for every
// 32 KiB block allocated and copied about 4 GiB here (512 blocks, 8 MiB
// on average each).
func TestTailHugeLineLinear(t *testing.T) {
	const size = 16 << 20
	content := hugeLineLog(size)
	r := &countingReader{r: bytes.NewReader(content)}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start, from, err := tailStart(r, int64(len(content)), 1, [2]bool{true, true})
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if start != 0 || from[streamStdout] != 0 {
		t.Fatalf("start %d, stdout from %d: want 0, 0", start, from[streamStdout])
	}
	if got := r.n.Load(); got != int64(len(content)) {
		t.Errorf("read %d bytes of a %d-byte file", got, len(content))
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 8*uint64(len(content)) {
		t.Errorf("allocated %d bytes to tail a %d-byte line: not linear", alloc, len(content))
	}
}

func BenchmarkTailHugeLine(b *testing.B) {
	for _, size := range []int{1 << 20, 4 << 20, 16 << 20} {
		content := hugeLineLog(size)
		b.Run(fmt.Sprintf("%dMiB", size>>20), func(b *testing.B) {
			b.SetBytes(int64(len(content)))
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if _, _, err := tailStart(bytes.NewReader(content), int64(len(content)), 1, [2]bool{true, true}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
