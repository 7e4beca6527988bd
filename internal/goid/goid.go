// Package goid reads the calling goroutine's id, for the rare checks of
// which goroutine makes a call (MPI's main thread, a handler's own poll).
package goid

import (
	"bytes"
	"runtime"
	"strconv"
)

// ID is the calling goroutine's id, read from the first line of its stack
// trace ("goroutine 17 [running]:"); -1 if that line cannot be read. It is
// slow: call it rarely.
func ID() int64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	if i := bytes.IndexByte(b, ' '); i > 0 {
		b = b[:i]
	}
	id, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return -1
	}
	return id
}
