package netvm

import (
	"encoding/binary"
	"fmt"

	"time"

	"github.com/adimpi/adimpi/adi"
	"github.com/adimpi/adimpi/adi/devkit/liveness"
	"github.com/adimpi/adimpi/internal/wire"
)

// This file is the network link: the transport to a peer on another host,
// over the job's wire endpoint (internal/wire). Every control message is a
// frame whose head is the message and whose body is its payload. The
// remote write that shared memory does with process_vm_writev is carried
// out by the receiving side, as NetVM's NIC did: the receiver's CTS or RTR
// carries no address (bufAddr is 0 for such a peer), so the sender streams
// the data as ctlData frames whose bodies reference its buffer (no copy),
// and the receiver's endpoint reads each body straight into the posted
// receive buffer at its offset (Device.Place), or unpacks it there when the
// buffer is not contiguous; SC completes the receive as on a ring. What
// needs the peer's memory (split, pull, scatter, offered streams, the
// board) is gated by peer.remoteOK, which is false for such a peer; MPIN's
// RFA flags travel as ctlFlag messages (mpin.go).

// netChunk is the data of one ctlData frame to a peer on another host: the
// receiver reads it straight into the receive buffer, so the frame may be
// far larger than a ring's chunk.
const netChunk = 1 << 20

// headLen is the size of a control message as a frame head.
const headLen = 32

// netLink is the link to one peer on another host.
type netLink struct {
	d       *Device
	ep      *wire.Endpoint
	rank    int
	host    string // the peer's host name, for errors
	head    [headLen]byte
	scratch []byte    // packs a non-contiguous payload
	inBuf   []byte    // receives a chunk for a non-contiguous receive, before its unpacking (Place)
	blocked bool      // a frame referencing a user buffer waits in the endpoint (Sent clears it)
	body    []byte    // the payload of the frame being handled
	placed  bool      // that payload was read straight into its receive buffer
	lost    error     // the connection broke (Lost), or could not be opened
	lostAt  time.Time // when
	dones   []netDone // sends whose last frame waits in the endpoint, in order
}

// netDone is a send that completes once the endpoint has handed its last
// frame to the kernel (Device.Sent).
type netDone struct {
	req  *adi.Request
	done int
}

// doneTok is the token of a frame that completes a send (the oldest of its
// link's dones) once sent: the link itself under another type, so that
// the token costs no allocation when the frame goes at once, as most do.
type doneTok netLink

var _ transport = (*netLink)(nil)

// encodeCtl writes c as a frame head.
func encodeCtl(b []byte, c *ctl) {
	binary.LittleEndian.PutUint32(b[0:], c.typ)
	binary.LittleEndian.PutUint32(b[4:], c.ctx)
	binary.LittleEndian.PutUint32(b[8:], uint32(c.tag))
	binary.LittleEndian.PutUint32(b[12:], c.id)
	binary.LittleEndian.PutUint64(b[16:], c.addr)
	binary.LittleEndian.PutUint64(b[24:], c.n)
}

// decodeCtl reads a frame head into c.
func decodeCtl(b []byte, c *ctl) bool {
	if len(b) != headLen {
		return false
	}
	*c = ctl{typ: binary.LittleEndian.Uint32(b[0:]),
		ctx:  binary.LittleEndian.Uint32(b[4:]),
		tag:  int32(binary.LittleEndian.Uint32(b[8:])),
		id:   binary.LittleEndian.Uint32(b[12:]),
		addr: binary.LittleEndian.Uint64(b[16:]),
		n:    binary.LittleEndian.Uint64(b[24:])}
	return true
}

// put sends m as a frame. A stream chunk of a contiguous buffer goes by
// reference: if the socket cannot take it whole, the link is blocked until
// the endpoint reports it sent, so that the send completes (its SC is put)
// only once its data are with the kernel. A message that completes a send
// (m.finish) and must wait completes when the endpoint reports it sent:
// a frame waiting in the endpoint leaves only while this process polls,
// and a process whose sends are complete may stop polling (a rank in
// MPI_Finalize's key-value barrier). Other payloads are copied when they
// must wait.
func (l *netLink) put(m *outMsg) bool {
	if l.blocked || l.lost != nil {
		return false
	}
	encodeCtl(l.head[:], &m.ctl)
	var body []byte
	var tok any
	finish := m.finish && m.typ != ctlData
	if finish {
		tok = (*doneTok)(l)
	}
	if hasPayload(m.typ) {
		n := int(m.n)
		switch {
		case m.data.Contiguous():
			body = m.data.Mem[m.off : m.off+n]
			if m.typ == ctlData {
				tok = l
			}
		case finish: // referenced until sent: a buffer of its own
			body = make([]byte, n)
			m.copyOut(m.off, body)
		default:
			if cap(l.scratch) < n {
				l.scratch = make([]byte, n)
			}
			body = l.scratch[:n]
			m.copyOut(m.off, body)
		}
	}
	now, err := l.ep.Send(l.rank, l.head[:], body, tok)
	if err != nil {
		l.lost, l.lostAt = err, time.Now()
		l.d.netGone = true
		return false
	}
	switch {
	case now:
	case finish:
		m.finish = false // Device.Sent completes the send
		l.dones = append(l.dones, netDone{req: m.req, done: m.done})
	case tok != nil:
		l.blocked = true
	}
	return true
}

// putShort sends an eager message as one frame if the wire hands it to
// the kernel at once (wire.Endpoint.SendNow), and reports whether it went:
// the blocking send of a small message, with no request.
func (l *netLink) putShort(ctx uint32, tag int32, sig uint32, data []byte) bool {
	if l.blocked || l.lost != nil {
		return false
	}
	c := ctl{typ: ctlEager, ctx: ctx, tag: tag, id: sig, n: uint64(len(data))}
	encodeCtl(l.head[:], &c)
	now, err := l.ep.SendNow(l.rank, l.head[:], data)
	if err != nil {
		l.lost, l.lostAt = err, time.Now()
		l.d.netGone = true
	}
	return now
}

// next reports nothing: frames are handed to the protocol as the endpoint
// reads them (Device.Frame).
func (l *netLink) next(*ctl) bool { return false }

func (l *netLink) payload(*ctl) (a, b []byte) { return l.body, nil }

func (l *netLink) consume(*ctl) {}

// wake has nothing to ring: a frame wakes its receiver through the
// receiver's wire.Sleeper.
func (l *netLink) wake() {}

func (l *netLink) remoteWrite(uintptr, [][]byte) error {
	return fmt.Errorf("netvm: no remote write to rank %d on host %s: it is reached over the network", l.rank, l.host)
}

// Frame handles a control message from a peer on another host
// (wire.Handler).
func (d *Device) Frame(peer int, head, body []byte) {
	p := d.peers[peer]
	l := p.net
	c := &d.in
	if !decodeCtl(head, c) {
		d.netFail(fmt.Errorf("netvm: a frame from rank %d with a head of %d bytes", peer, len(head)))
		return
	}
	d.netDid = true
	placed := l.placed
	l.placed = false
	var err error
	if placed { // ctlData already in its receive buffer (Place)
		if rv := d.recvs[c.id]; rv != nil {
			rv.got += len(body)
		}
	} else {
		l.body = body
		err = d.proto.handle(p, c)
		l.body = nil
	}
	if err != nil {
		d.netFail(err)
	}
}

// Place has the endpoint read a stream chunk straight into its contiguous
// receive buffer, or into its link's buffer from which the chunk is
// unpacked (wire.Placer).
func (d *Device) Place(peer int, head []byte, n int) []byte {
	var c ctl
	if !decodeCtl(head, &c) || c.typ != ctlData {
		return nil
	}
	rv := d.recvs[c.id]
	if rv == nil || rv.sid != 0 {
		return nil
	}
	if rv.req.Buf.Contiguous() && rv.got+n <= len(rv.req.Buf.Mem) {
		d.peers[peer].net.placed = true
		return rv.req.Buf.Mem[rv.got : rv.got+n]
	}
	// Each link has its own: the endpoint may be filling chunks from several
	// peers at once.
	l := d.peers[peer].net
	if cap(l.inBuf) < n {
		l.inBuf = make([]byte, n)
	}
	return l.inBuf[:n]
}

// Sent unblocks a link whose referenced chunk the kernel now has, or
// completes a send whose last frame it now has (wire.Handler).
func (d *Device) Sent(tok any) {
	d.netDid = true
	switch t := tok.(type) {
	case *netLink:
		t.blocked = false
	case *doneTok: // frames leave in order: it is the link's oldest
		l := (*netLink)(t)
		if len(l.dones) == 0 {
			return // failed with its peer (peerGone)
		}
		dn := l.dones[0]
		l.dones[0] = netDone{}
		l.dones = l.dones[1:]
		if !dn.req.Done() {
			dn.req.Complete(adi.Status{Bytes: dn.done})
		}
	}
}

// Lost records that the connection to peer broke (wire.Handler); Progress
// fails what depends on it.
func (d *Device) Lost(peer int, err error) {
	if l := d.peers[peer].net; l != nil && l.lost == nil {
		l.lost, l.lostAt = err, time.Now()
		d.netGone = true
	}
}

// netFail keeps the first error of a frame's handling for Progress.
func (d *Device) netFail(err error) {
	if d.netErr == nil {
		d.netErr = err
	}
}

// netLost fails what depends on peers whose connection broke, and returns
// the error that ends the job. A loss counts once it is liveness.Interval old,
// as a death on this host is noticed by the periodic check: a peer whose
// process died (its kernel closed the connection at once) is then
// reported by the launcher first, as the rank that died, rather than by
// the ranks that depended on it.
func (d *Device) netLost() error {
	if !d.netGone {
		return nil
	}
	var first error
	for _, p := range d.peers {
		l := p.net
		if l == nil || l.lost == nil || time.Since(l.lostAt) < liveness.Interval {
			continue
		}
		err := adi.Errorf(adi.ErrOther, "progress", "rank %d on host %s is unreachable: %v", p.rank, l.host, l.lost)
		if !d.live.MarkLost(p.rank, err) {
			continue
		}
		d.peerGone(p, err)
		if first == nil {
			first = err
		}
	}
	return first
}

// CrossHost reports that netvm reaches peers on other hosts (adi.CrossHost).
func (d *Device) CrossHost() bool { return true }
