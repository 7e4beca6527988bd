package fm

import (
	"encoding/binary"

	"github.com/adimpi/adimpi/adi"
)

// This file is the MPI device's part of the wire, for peers on another
// host. Every MPI message, header and eager data, is still an FM stream:
// its packets travel as frames and obey FM's credits (net.go). What lives
// outside the packet model in shared memory becomes frames of the device's
// own kinds:
//
//   - The bulk lane: each chunk is a frame whose body references the send
//     buffer (packed first when the buffer is not contiguous) and whose
//     head names the receive and the chunk's offset; the receiving side
//     writes it into the receive buffer (its endpoint reads a large body
//     straight there when the buffer is contiguous) and frees the chunk
//     with a kBulkFree frame. A sender keeps at most bslots chunks
//     unfreed, as the shared lane's ring allows.
//   - remote=1's remote write: the receiver's CTS says ctsWire (no address,
//     the receiving side writes), and the sender sends the data as kWrite
//     frames of up to netWrite bytes, without the lane's window, followed
//     by the header-only kFin packet that completes the receive, as
//     process_vm_writev's data is followed by it on one host.
//
// A send whose frames reference its buffer completes once the wire reports
// them all with the kernel (NetHooks.Sent).

// The device's frame kinds (the first byte of a frame's head); a head is
// [0] kind, [4:8] rid, [8:16] offset or count.
const (
	kBulk     = NetKindMin     // a bulk chunk of receive rid at offset
	kBulkFree = NetKindMin + 1 // count chunks of the sender's lane are free
	kWrite    = NetKindMin + 2 // remote-write data of receive rid at offset

	netHead = 16

	// netWrite is the largest kWrite frame.
	netWrite = 1 << 20

	// ctsWire: the receiver, on another host, writes the data it is sent
	// as kWrite frames into its buffer itself.
	ctsWire = 3
)

func putNetHead(h *[netHead]byte, kind byte, rid uint32, v uint64) {
	h[0] = kind
	binary.LittleEndian.PutUint32(h[4:], rid)
	binary.LittleEndian.PutUint64(h[8:], v)
}

// netBody is the body of the frame carrying m's next k data bytes: the send
// buffer itself when contiguous (tok m: the send waits for NetHooks.Sent),
// else those bytes packed into scratch (no tok: the wire copies them if it
// must keep them).
func (d *Device) netBody(m *outMsg, k int) ([]byte, any) {
	if m.buf.Contiguous() {
		return m.buf.Mem[m.off : m.off+k], m
	}
	if cap(d.netScratch) < k {
		d.netScratch = make([]byte, k)
	}
	b := d.netScratch[:k]
	dst := b
	_ = m.buf.Pieces(m.off, k, func(p []byte) error { dst = dst[copy(dst, p):]; return nil })
	return b, nil
}

// sendData sends m's next k bytes as a frame of kind; it reports false
// (having failed m's request) when the peer is unreachable.
func (d *Device) sendData(m *outMsg, kind byte, k int) bool {
	var h [netHead]byte
	putNetHead(&h, kind, binary.LittleEndian.Uint32(m.hdr[28:]), uint64(m.off))
	body, tok := d.netBody(m, k)
	now, err := d.e.SendFrame(m.dest, h[:], body, tok)
	if err != nil {
		d.failMsg(m, adi.Errorf(adi.ErrOther, "send", "%v", err))
		return false
	}
	if !now && tok != nil {
		m.pending++
	}
	m.off += k
	d.bMoved = true
	return true
}

// pushNetBulk is pushBulk to a peer on another host: the chunks go as
// kBulk frames while the lane's window has room. It reports whether m is
// done with (all sent and its buffer released, or failed).
func (d *Device) pushNetBulk(m *outMsg) bool {
	for m.off < m.n {
		if d.bOut[m.dest]-d.bAck[m.dest] >= uint64(d.bslots) {
			d.bFull = true
			return false // the receiver frees chunks with kBulkFree
		}
		if !d.sendData(m, kBulk, min(d.bulk, m.n-m.off)) {
			return true
		}
		d.bOut[m.dest]++
	}
	if m.pending > 0 {
		return false
	}
	m.req.Complete(adi.Status{Bytes: m.n})
	return true
}

// pushNetWrite sends a rendezvous send's data as kWrite frames for the
// receiving side to write, then turns m into the kFin that follows them.
// It reports false while the send buffer is still referenced by the wire,
// or when the peer became unreachable (m is then failed).
func (d *Device) pushNetWrite(m *outMsg) (ok, failed bool) {
	for m.off < m.n {
		if !d.sendData(m, kWrite, min(netWrite, m.n-m.off)) {
			return false, true
		}
	}
	if m.pending > 0 {
		return false, false
	}
	d.cnt.netWrites++
	m.req.Complete(adi.Status{Bytes: m.n})
	m.netWrite = false
	m.req, m.n, m.off, m.buf = nil, 0, 0, adi.Buffer{}
	m.hdr[0] = kFin
	return true, false
}

// netFrame handles a frame of the device's kinds from a peer on another
// host (NetHooks.Frame).
func (d *Device) netFrame(src int, head, body []byte) {
	if len(head) < netHead {
		return
	}
	d.netDid = true
	rid := binary.LittleEndian.Uint32(head[4:])
	v := binary.LittleEndian.Uint64(head[8:])
	placed := d.placed[src]
	d.placed[src] = false
	switch head[0] {
	case kBulkFree:
		d.bAck[src] += v
	case kBulk, kWrite:
		if head[0] == kBulk {
			// The chunk is free once written (or dropped): one kBulkFree
			// per chunk, 16 bytes for up to a lane's chunk of data.
			var h [netHead]byte
			putNetHead(&h, kBulkFree, 0, 1)
			_, _ = d.e.SendFrame(src, h[:], nil, nil)
		}
		rv := d.recvs[rid]
		if rv == nil || rv.src != src || v > uint64(rv.n) {
			return
		}
		k := min(len(body), rv.n-int(v))
		if !placed {
			rv.req.Buf.CopyIn(int(v), body[:k])
		}
		rv.got += k
		if head[0] == kBulk && rv.got == rv.n {
			d.recvDone(rid, rv)
		}
	}
}

// netPlace reads a large chunk straight into a contiguous receive buffer
// (NetHooks.Place).
func (d *Device) netPlace(src int, head []byte, n int) []byte {
	if len(head) < netHead || (head[0] != kBulk && head[0] != kWrite) {
		return nil
	}
	rv := d.recvs[binary.LittleEndian.Uint32(head[4:])]
	off := int(binary.LittleEndian.Uint64(head[8:]))
	if rv == nil || rv.src != src || !rv.req.Buf.Contiguous() || off < 0 || off+n > rv.n {
		return nil
	}
	d.placed[src] = true
	return rv.req.Buf.Mem[off : off+n]
}

// netSent releases a send whose frame referenced its buffer
// (NetHooks.Sent).
func (d *Device) netSent(tok any) {
	if m, ok := tok.(*outMsg); ok {
		m.pending--
		d.netDid = true
	}
}

// CrossHost reports that fm reaches peers on other hosts (adi.CrossHost).
func (d *Device) CrossHost() bool { return true }

var _ adi.CrossHost = (*Device)(nil)
