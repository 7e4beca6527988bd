package wire

import (
	"encoding/binary"
	"fmt"
)

// The frame header, little-endian, before every frame on an authenticated
// connection:
//
//	[0:4]  body length in bytes
//	[4:6]  head length in bytes (at most MaxHead)
//	[6:8]  frameMagic, which catches a stream that lost its framing
const (
	headerLen  = 8
	frameMagic = 0xad1e
)

// MaxHead is the largest head a frame may carry.
const MaxHead = 1024

// MaxBody is the largest body a frame may carry; larger messages go as
// several frames.
const MaxBody = 1<<31 - 1

// header is the decoded frame header.
type header struct {
	body int
	head int
}

// putHeader writes the header of a frame with the given head and body
// lengths into b[:headerLen].
func putHeader(b []byte, head, body int) {
	binary.LittleEndian.PutUint32(b[0:4], uint32(body))
	binary.LittleEndian.PutUint16(b[4:6], uint16(head))
	binary.LittleEndian.PutUint16(b[6:8], frameMagic)
}

// parseHeader decodes b[:headerLen], rejecting a header no sender writes.
func parseHeader(b []byte) (header, error) {
	h := header{
		body: int(binary.LittleEndian.Uint32(b[0:4])),
		head: int(binary.LittleEndian.Uint16(b[4:6])),
	}
	if m := binary.LittleEndian.Uint16(b[6:8]); m != frameMagic {
		return h, fmt.Errorf("frame header %x: bad magic %#x", b[:headerLen], m)
	}
	if h.head > MaxHead {
		return h, fmt.Errorf("frame head of %d bytes: more than %d", h.head, MaxHead)
	}
	if h.body > MaxBody {
		return h, fmt.Errorf("frame body of %d bytes: more than %d", h.body, MaxBody)
	}
	return h, nil
}
