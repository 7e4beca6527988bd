// Package recv builds the completion status of a receive the same way on
// every device: the source, the tag, the bytes written, and ErrTruncate or
// ErrType naming the message and the buffer.
package recv

import "github.com/adimpi/adimpi/adi"

// Status is the status of receive r that matched a message of size bytes
// from world rank src with tag, of which n bytes (at most r's buffer) were
// written: ErrTruncate when the message was longer than the buffer.
func Status(r *adi.Request, src, tag, size, n int) adi.Status {
	st := adi.Status{Source: src, Tag: tag, Bytes: n}
	if size > n {
		st.Err = adi.Truncated(src, tag, size, r.Buf.Size())
	}
	return st
}

// Mismatch reports whether a message of size bytes with type signature
// sig, matched by receive r, was sent as a different basic type than r
// receives (both signatures known, the message not empty), and if so the
// ErrType status r must complete with, nothing having been written.
func Mismatch(r *adi.Request, env adi.Envelope, size int, sig uint32) (adi.Status, bool) {
	want := r.Buf.Type.Signature()
	if sig == 0 || want == 0 || sig == want || size == 0 {
		return adi.Status{}, false
	}
	return adi.Status{Source: env.Source, Tag: env.Tag, Err: adi.Mismatched(env.Source, env.Tag, size, r.Buf.Type.String())}, true
}
