package main

import (
	"bufio"
	"errors"
	"io"
	"sync"
	"sync/atomic"
)

// maxLine bounds how much of one output line mpirun buffers; a longer line
// is forwarded in pieces of this size, each ended with a newline.
const maxLine = 1 << 20

// lineSink is a destination (mpirun's stdout or stderr) shared by all
// ranks. Each line is written with a single Write under the lock, so lines
// of different ranks never mix.
type lineSink struct {
	mu sync.Mutex
	w  io.Writer
	// labelAll makes every line carry its rank's label, even without
	// -tag-output (set for the stacks printed after a -timeout).
	labelAll atomic.Bool
}

// writeLine writes prefix and line (which ends in '\n') as one unit.
func (s *lineSink) writeLine(prefix, line []byte) {
	buf := make([]byte, 0, len(prefix)+len(line))
	buf = append(buf, prefix...)
	buf = append(buf, line...)
	s.mu.Lock()
	defer s.mu.Unlock()
	_, _ = s.w.Write(buf)
}

// forwardLines copies r to sink a line at a time, each line preceded by
// prefix (or by label, once sink.labelAll is set and prefix is empty),
// until r ends; a last line without a newline gets one. onLine, if not
// nil, sees each line once it is written. It closes r.
func forwardLines(r io.ReadCloser, sink *lineSink, prefix, label []byte, onLine func([]byte)) {
	defer r.Close()
	br := bufio.NewReaderSize(r, 64*1024)
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		line = append(line, chunk...)
		if errors.Is(err, bufio.ErrBufferFull) && len(line) < maxLine {
			continue
		}
		if len(line) > 0 {
			if line[len(line)-1] != '\n' {
				line = append(line, '\n')
			}
			p := prefix
			if p == nil && sink.labelAll.Load() {
				p = label
			}
			sink.writeLine(p, line)
			// After the write, so that a wait report counted as collected
			// is already out, unlabelled, when the stacks' labels start.
			if onLine != nil {
				onLine(line)
			}
			line = line[:0]
		}
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return
		}
	}
}
