package fm

import (
	"encoding/binary"
	"errors"
	"maps"
	"slices"
	"syscall"
	"time"
	"unsafe"

	"github.com/adimpi/adimpi/adi"
	"github.com/adimpi/adimpi/adi/devkit/recv"
	"github.com/adimpi/adimpi/adi/devkit/wire"
	"github.com/adimpi/adimpi/adi/match"
	"github.com/adimpi/adimpi/datatype"
	"github.com/adimpi/adimpi/internal/shm"
)

func init() { adi.Register("fm", func() adi.Device { return new(Device) }) }

// The capabilities the device offers besides adi.Device.
var (
	_ adi.Device       = (*Device)(nil)
	_ adi.ShortSender  = (*Device)(nil)
	_ adi.Multisender  = (*Device)(nil)
	_ adi.OptionHelper = (*Device)(nil)
)

// The MPI message kinds, first byte of the MPI header.
const (
	kEager   = 1 // header + the whole message
	kRTS     = 2 // header only: a message waits to be matched (sid)
	kCTS     = 3 // receiver → sender: send n bytes of send sid for receive rid
	kData    = 4 // header + data of a rendezvous, for receive rid
	kDiscard = 5 // receiver → sender: send sid was refused (type mismatch); complete it
	kFin     = 6 // sender → receiver: the data of receive rid is in its buffer (remote write)
)

// How a CTS tells the sender where the data goes (its context field); the
// CTS's payload follows its header.
const (
	ctsPackets = 0 // nothing: send DATA in packets
	ctsAddr    = 1 // 8 bytes: the address of the contiguous receive buffer
	ctsLayout  = 2 // 16 bytes per block (address, length): the receive buffer's blocks
)

// mpiHeader is the MPI header at the front of every MPI message:
//
//	[0] kind  [4:8] context  [8:12] tag  [12:16] type signature
//	[16:24] size (message bytes; CTS: bytes to send)  [24:28] sid  [28:32] rid
//
// A CTS's context field is its ctsPackets/ctsAddr/ctsLayout mode.
const mpiHeader = 32

// The fields of a bulk chunk's header line.
const (
	bFlag wire.U32 = 0 // non-zero: the chunk is full (stored last); the receiver clears it
	bRid  wire.U32 = 4 // the receive the data is for
	bLen  wire.U32 = 8 // data bytes in the chunk
)

// hMPI is the handler id of every MPI message.
const hMPI = 1

const (
	defaultRndv = 16384
	// defaultMinBlock: with remote=1, a buffer (either side) whose blocks
	// average fewer bytes is not remote-written: the kernel pins the
	// remote pages once per block, so small blocks go by the bulk lane.
	defaultMinBlock = 65536
	// maxLayout bounds the blocks a CTS lists (16 bytes each).
	maxLayout = 1 << 16
	// The bulk lane: per sender defaultBulkSlots chunks of defaultBulk data
	// bytes, each with a 64-byte header line; the header lines come first,
	// then the chunks (so that a chunk is 64 KiB of aligned data).
	defaultBulk      = 65536
	defaultBulkSlots = 16
	bulkHeader       = 64 // a chunk's header line: bFlag, bRid, bLen
	// idlePolls is how many idle polls of Progress pass between two
	// looks at the peers' processes (liveness.Peers.Idle).
	idlePolls = 1024
)

// Device is MPI over FM: an adi.Device (and adi.Multisender) whose every
// message is an FM stream. Create it through the adi registry ("fm").
type Device struct {
	e          *Endpoint
	rank, size int
	eng        match.Engine
	rndv       int
	remote     bool // offer receive buffers for remote writes (option remote)
	minBlock   int  // least average block, on either side, for a remote write
	pieces     [][]byte

	// The bulk lane (option bulk): per sender a ring of bslots chunks of
	// bulk bytes in the receiver's segment, for rendezvous data.
	bulk, bslots int
	bOut, bIn    []uint64 // per peer: chunks written to it / read from it
	bWait        []int    // per peer: rendezvous receives from it awaiting data
	bMoved       bool     // a chunk went out since the last Progress
	bFull        bool     // a send waits for the receiver to free a chunk
	bUnfreed     []int    // peers whose lane may hold chunks of mine they have not copied out

	// Peers on other hosts (devnet.go).
	bAck       []uint64 // per peer: chunks of my lane to it that it freed (kBulkFree)
	placed     []bool   // per peer: its frame being read went straight into a receive buffer
	netScratch []byte   // packs a non-contiguous chunk
	netDid     bool     // a device frame came, or a referenced body was released

	outq   [][]*outMsg // per destination, in posting order
	queued int
	sends  map[uint32]*adi.Request // RTS sent, waiting for CTS
	recvs  map[uint32]*rvRecv      // CTS sent, waiting for DATA
	unexp  map[*unexpMsg]struct{}  // eager messages still arriving into a temporary buffer
	nextID uint32

	// Traffic counters; short and shortIn count the messages of one
	// packet that SendShort wrote straight into a region and that eagerIn
	// took straight into a posted receive: every small message's path,
	// empty ones included.
	cnt struct{ eager, rndv, multi, writes, scatters, bulk, netWrites, short, shortIn int64 }
}

// outMsg is an MPI message not yet wholly in packets.
type outMsg struct {
	hdr   [mpiHeader]byte
	dest  int
	dests []int // a multidestination message
	buf   adi.Buffer
	n     int          // data bytes after the header
	req   *adi.Request // completed (Bytes = n) once the message is out; nil for control messages
	st    *Stream
	off   int // data bytes written
	hdrOK bool
	err   error // a destination of a multidestination message died

	// A rendezvous DATA the receiver offered its buffer for: push writes
	// it straight there and sends kFin instead (or, if that fails, sends
	// it by the bulk lane or packets).
	write  bool
	addr   uint64
	layout []shm.RemoteSeg
	// A rendezvous DATA that goes through the bulk lane.
	bulk bool
	// A rendezvous DATA to a peer on another host that writes it into its
	// receive buffer itself (ctsWire), then a kFin.
	netWrite bool
	pending  int  // frames whose body references buf, not yet with the kernel
	waitSent bool // all in packets; completes once they left this process (sentOut)
}

// rvRecv is a receive matched to an RTS, waiting for its DATA.
type rvRecv struct {
	req            *adi.Request
	src, tag, size int
	n              int // bytes that will come
	got            int // bytes that came through the bulk lane
}

// unexpMsg is an eager message that arrived before its receive: its data
// goes into a temporary buffer (the second copy of the unexpected path).
type unexpMsg struct {
	src, tag, size int
	data           []byte
	done           bool
	claimed        *adi.Request // a receive took it before it was complete
	dropped        bool         // the receive that took it refused it
}

// rtsMsg is an unexpected RTS.
type rtsMsg struct{ sid uint32 }

// inState is a handler's place in an incoming MPI message (Stream.Ctx).
type inState struct {
	req            *adi.Request // where the data goes; nil: into um, or nowhere
	um             *unexpMsg
	src, tag, size int
	capacity       int // bytes written to the target; the rest is skipped
	off            int // data bytes taken
	rid            uint32
	rv             bool // a rendezvous DATA stream

	cts     *outMsg // a CTS: the DATA it asks for, sent once the CTS is in
	raw     []byte  // a CTS's payload (where the receiver wants the data)
	ctsWire bool    // a CTS from another host whose receiver writes the data itself

	// The receive buffer's layout, looked at once per message: seg walks
	// a non-contiguous one block by block across packets (no datatype
	// lookup or window check per packet).
	typed bool
	seg   *datatype.Segment
}

// Init opens the FM endpoint and registers the MPI handler.
func (d *Device) Init(cfg adi.Config) error {
	o, err := OptionTable.Parse(cfg.Options)
	if err != nil {
		return err
	}
	packet, slots := o.Int("packet"), o.Int("slots")
	d.rndv, d.minBlock = o.Int("rndv"), o.Int("minblock")
	d.remote = o.String("remote") == "1"
	d.bulk, d.bslots = o.Int("bulk"), o.Int("bslots")
	if d.bulk == 0 {
		d.bslots = 0
	}
	d.e, err = New(Config{Rank: cfg.Rank, Size: cfg.Size, KVS: cfg.KVS, Packet: packet, Slots: slots, NoRemoteWrite: !d.remote, Bulk: (bulkHeader + d.bulk) * d.bslots, Hosts: cfg.Hosts})
	if err != nil {
		return err
	}
	d.rank, d.size = cfg.Rank, cfg.Size
	d.e.SetHandler(hMPI, d.handle)
	d.e.mpi = d
	d.e.SetNet(NetHooks{Frame: d.netFrame, Sent: d.netSent, Place: d.netPlace})
	d.bAck, d.placed = make([]uint64, d.size), make([]bool, d.size)
	d.outq = make([][]*outMsg, d.size)
	d.bOut, d.bIn, d.bWait = make([]uint64, d.size), make([]uint64, d.size), make([]int, d.size)
	d.sends = map[uint32]*adi.Request{}
	d.recvs = map[uint32]*rvRecv{}
	d.unexp = map[*unexpMsg]struct{}{}
	return nil
}

// Finalize releases the segments.
func (d *Device) Finalize() error { return d.e.Release() }

// Counters reports live state and traffic.
func (d *Device) Counters() map[string]int64 {
	s := d.e.Stats
	c := map[string]int64{
		"posted_receives":     int64(d.eng.Posted()),
		"unexpected_messages": int64(d.eng.Unexpected()),
		"rendezvous_sends":    int64(len(d.sends)),
		"rendezvous_receives": int64(len(d.recvs)),
		"backlog":             int64(d.queued),
		"eager_messages":      d.cnt.eager,
		"short_sends":         d.cnt.short,
		"short_receives":      d.cnt.shortIn,
		"rendezvous_messages": d.cnt.rndv,
		"multi_messages":      d.cnt.multi,
		"remote_writes":       d.cnt.writes,
		"remote_scatters":     d.cnt.scatters,
		"bulk_messages":       d.cnt.bulk,
		"net_writes":          d.cnt.netWrites,
		"packets_sent":        s.PacketsSent,
		"packets_received":    s.PacketsReceived,
		"credits_piggybacked": s.Piggybacked,
		"credit_returns":      s.ExplicitReturns,
	}
	if w := d.e.net; w != nil {
		n := w.Counters()
		c["net_frames_out"], c["net_frames_in"] = n.FramesOut, n.FramesIn
		c["net_bytes_out"], c["net_bytes_in"] = n.BytesOut, n.BytesIn
		c["net_frames_placed"] = n.Placed
		maps.Copy(c, w.XDPCounters())
	}
	return c
}

func (d *Device) newID() uint32 {
	d.nextID++
	if d.nextID == 0 {
		d.nextID = 1
	}
	return d.nextID
}

func putHeader(h *[mpiHeader]byte, kind byte, ctx uint32, tag int, sig uint32, size int, sid, rid uint32) {
	h[0] = kind
	binary.LittleEndian.PutUint32(h[4:], ctx)
	binary.LittleEndian.PutUint32(h[8:], uint32(int32(tag)))
	binary.LittleEndian.PutUint32(h[12:], sig)
	binary.LittleEndian.PutUint64(h[16:], uint64(size))
	binary.LittleEndian.PutUint32(h[24:], sid)
	binary.LittleEndian.PutUint32(h[28:], rid)
}

// dead is the error of an operation (op) started towards rank once it is
// gone: its process exited, or its host is unreachable.
func (d *Device) dead(op string, rank int) error {
	if d.e.Remote(rank) {
		return adi.Errorf(adi.ErrOther, op, "%v", d.e.Gone(rank))
	}
	return d.e.live.Exited(op, rank)
}

// lost is the error that fails a pending operation whose peer rank went
// while the operation waited on it.
func (d *Device) lost(rank int) error {
	if d.e.Remote(rank) {
		return adi.Errorf(adi.ErrOther, "progress", "%v", d.e.Gone(rank))
	}
	return d.e.live.Lost(rank)
}

// Isend sends eagerly (header and data in one stream) up to the rndv
// threshold, else (and for synchronous sends) by rendezvous: RTS, CTS, DATA.
func (d *Device) Isend(r *adi.Request) error {
	if !d.e.Alive(r.Peer) {
		return d.dead("send", r.Peer)
	}
	n := r.Buf.Size()
	if r.Mode != adi.ModeSync && r.Buf.Contiguous() && d.SendShort(r.Context, r.Peer, r.Tag, r.Buf.Type.Signature(), r.Buf.Mem[:n]) {
		if d.e.Remote(r.Peer) && d.e.Unsent(r.Peer) {
			// The socket was full: complete once the packet has left.
			d.enqueue(&outMsg{dest: r.Peer, req: r, n: n, waitSent: true})
			return nil
		}
		r.Complete(adi.Status{Bytes: n})
		return nil
	}
	var m outMsg
	m.dest = r.Peer
	if n <= d.rndv && r.Mode != adi.ModeSync {
		d.cnt.eager++
		putHeader(&m.hdr, kEager, r.Context, r.Tag, r.Buf.Type.Signature(), n, 0, 0)
		m.buf, m.n, m.req = r.Buf, n, r
	} else {
		d.cnt.rndv++
		sid := d.newID()
		d.sends[sid] = r
		putHeader(&m.hdr, kRTS, r.Context, r.Tag, r.Buf.Type.Signature(), n, sid, 0)
	}
	d.post(&m)
	return nil
}

// SendShort sends a message of one packet straight into the destination's
// region (FM's short send: no stream, no queue entry) when nothing is
// queued to peer before it and a credit is free (adi.ShortSender).
func (d *Device) SendShort(ctx uint32, peer, tag int, sig uint32, data []byte) bool {
	n := len(data)
	if n > d.rndv || n > d.e.payload-mpiHeader || len(d.outq[peer]) != 0 { // shortPacket checks credit and liveness
		return false
	}
	p, pkt := d.e.shortPacket(peer, mpiHeader+n)
	if p == nil {
		return false
	}
	// The MPI header and the data straight into the packet.
	h := (*[mpiHeader]byte)(pkt[HeaderSize:])
	*h = [mpiHeader]byte{}
	putHeader(h, kEager, ctx, tag, sig, n, 0, 0)
	switch body := pkt[HeaderSize+mpiHeader:]; n {
	case 0: // an empty message: the header is all of it
	case 8:
		*(*[8]byte)(body) = *(*[8]byte)(data) // a word in one move, no memmove call
	default:
		copy(body[:n], data)
	}
	d.e.handShort(p, pkt, hMPI, mpiHeader+n)
	d.cnt.eager++
	d.cnt.short++
	return true
}

// IsendMulti sends r.Buf to every rank in dests in one multidestination
// stream: each packet is written into every destination's region once all
// of them have a credit. Every destination sees an ordinary eager message
// (r.Context, this rank, r.Tag), whatever its size: there is no rendezvous
// for a multidestination message, a late receiver buffers it.
func (d *Device) IsendMulti(r *adi.Request, dests []int) error {
	for _, q := range dests {
		if q < 0 || q >= d.size || q == d.rank {
			return adi.Errorf(adi.ErrRank, "send", "multidestination send to rank %d (world size %d, self %d)", q, d.size, d.rank)
		}
		if !d.e.Alive(q) {
			return d.dead("send", q)
		}
	}
	if len(dests) == 0 {
		r.Complete(adi.Status{Bytes: r.Buf.Size()})
		return nil
	}
	if len(dests) == 1 {
		r.Peer = dests[0]
		return d.Isend(r)
	}
	d.cnt.multi++
	n := r.Buf.Size()
	m := &outMsg{dests: append([]int(nil), dests...), buf: r.Buf, n: n, req: r}
	putHeader(&m.hdr, kEager, r.Context, r.Tag, r.Buf.Type.Signature(), n, 0, 0)
	for _, q := range dests {
		d.outq[q] = append(d.outq[q], m)
	}
	d.queued++
	d.flush()
	return nil
}

// post sends m now if nothing waits before it and credits allow, else
// queues it (a copy) behind its destination's queue.
func (d *Device) post(m *outMsg) {
	if len(d.outq[m.dest]) == 0 && d.push(m) {
		return
	}
	q := new(outMsg)
	*q = *m
	d.outq[m.dest] = append(d.outq[m.dest], q)
	d.queued++
}

// push writes as much of m as credits allow and reports whether all of it
// is out. Data goes one SendPiece per contiguous block of the buffer.
func (d *Device) push(m *outMsg) bool {
	e := d.e
	if m.waitSent {
		return d.sentOut(m)
	}
	if m.bulk {
		if d.e.Remote(m.dest) {
			return d.pushNetBulk(m)
		}
		return d.pushBulk(m)
	}
	if m.netWrite {
		if ok, failed := d.pushNetWrite(m); !ok {
			return failed
		}
	}
	if m.write {
		m.write = false
		if d.writeData(m) {
			// The data is in the receive buffer: the send is complete,
			// and a header-only kFin tells the receiver.
			m.req.Complete(adi.Status{Bytes: m.n})
			m.req, m.n, m.buf, m.layout = nil, 0, adi.Buffer{}, nil
			m.hdr[0] = kFin
		} else if d.bulk > 0 {
			m.bulk = true
			d.cnt.bulk++
			return d.pushBulk(m)
		}
	}
	if m.st == nil {
		var err error
		if m.dests != nil {
			m.st, err = e.BeginMessageMulti(m.dests, mpiHeader+m.n, hMPI)
		} else {
			m.st, err = e.BeginMessage(m.dest, mpiHeader+m.n, hMPI)
		}
		if err != nil {
			d.failMsg(m, adi.Errorf(adi.ErrOther, "send", "%v", err))
			return true
		}
		m.st.batch = true
	}
	defer e.ringPending() // one doorbell per push, not per packet
	room := e.Room(m.st)
	if !m.hdrOK {
		if room < mpiHeader {
			return false
		}
		_ = e.SendPiece(m.st, m.hdr[:])
		room -= mpiHeader
		m.hdrOK = true
	}
	if k := min(room, m.n-m.off); k > 0 {
		st := m.st
		if m.buf.Contiguous() {
			_ = e.SendPiece(st, m.buf.Mem[m.off:m.off+k])
		} else {
			_ = m.buf.Pieces(m.off, k, func(p []byte) error { return e.SendPiece(st, p) })
		}
		m.off += k
	}
	if m.off < m.n {
		return false
	}
	_ = e.EndMessage(m.st)
	m.st = nil
	if m.req != nil && d.unsent(m) {
		e.ringPending()
		m.waitSent = true
		return d.sentOut(m)
	}
	if m.req != nil {
		m.req.Complete(adi.Status{Bytes: m.n, Err: m.err})
	}
	return true
}

// unsent reports whether part of m may still wait in this process's wire
// endpoint: some destination is on another host.
func (d *Device) unsent(m *outMsg) bool {
	if m.dests == nil {
		return d.e.Remote(m.dest)
	}
	for _, q := range m.dests {
		if d.e.Remote(q) {
			return true
		}
	}
	return false
}

// sentOut completes m, whose packets are all handed over, once no frame of
// it to a peer on another host still waits for the kernel: the send's
// completion must not depend on this process calling in again (after
// MPI_Finalize's barrier it does not). It reports whether m is done.
func (d *Device) sentOut(m *outMsg) bool {
	if m.dests == nil {
		if d.e.Alive(m.dest) && d.e.Unsent(m.dest) {
			return false
		}
	} else {
		for _, q := range m.dests {
			if d.e.Alive(q) && d.e.Unsent(q) {
				return false
			}
		}
	}
	m.waitSent = false
	m.req.Complete(adi.Status{Bytes: m.n, Err: m.err})
	return true
}

// writeData writes a rendezvous send's data straight into the receive
// buffer the CTS named: one process_vm_writev gathering the send buffer's
// blocks, into one address or scattered over the receive buffer's blocks.
// It reports false (the data then goes by the bulk lane, or packets) if
// the write fails.
func (d *Device) writeData(m *outMsg) bool {
	d.pieces = d.pieces[:0]
	_ = m.buf.Pieces(0, m.n, func(p []byte) error { d.pieces = append(d.pieces, p); return nil })
	var err error
	if m.layout == nil {
		err = d.e.WriteTo(m.dest, uintptr(m.addr), d.pieces)
		d.cnt.writes++
	} else {
		err = d.e.ScatterTo(m.dest, d.pieces, m.layout)
		d.cnt.scatters++
	}
	clear(d.pieces)
	return err == nil
}

// pushBulk writes a rendezvous send's data into the free chunks of its
// destination's bulk lane (one copy, gathering the send buffer's blocks)
// and reports whether all of it is out; the receiver copies each chunk out
// into the receive buffer's blocks (the second copy) and frees it.
func (d *Device) pushBulk(m *outMsg) bool {
	out := d.e.BulkOut(m.dest)
	rid := binary.LittleEndian.Uint32(m.hdr[28:])
	for m.off < m.n {
		slot := int(d.bOut[m.dest] % uint64(d.bslots))
		h := out[slot*bulkHeader:]
		if bFlag.Load(h) != 0 {
			d.bFull = true
			return false // the receiver has not freed it yet; it rings when it does
		}
		k := min(d.bulk, m.n-m.off)
		dst := out[d.bslots*bulkHeader+slot*d.bulk:][:k]
		if m.buf.Contiguous() {
			copy(dst, m.buf.Mem[m.off:m.off+k])
		} else {
			_ = m.buf.Pieces(m.off, k, func(p []byte) error { dst = dst[copy(dst, p):]; return nil })
		}
		bRid.Set(h, rid)
		bLen.Set(h, uint32(k))
		bFlag.Store(h, 1)
		d.bOut[m.dest]++
		d.bMoved = true
		m.off += k
		d.e.Ring(m.dest)
	}
	if !slices.Contains(d.bUnfreed, m.dest) {
		d.bUnfreed = append(d.bUnfreed, m.dest)
	}
	m.req.Complete(adi.Status{Bytes: m.n})
	return true
}

// unfreed reports whether some peer has not yet copied out every chunk this
// process wrote into its bulk lane, forgetting the peers that have: such a
// send is complete here, but its data still needs the receiver to run.
func (d *Device) unfreed() bool {
	k := d.bUnfreed[:0]
	for _, q := range d.bUnfreed {
		// The receiver frees chunks in order: the last one written tells.
		last := int((d.bOut[q] - 1) % uint64(d.bslots))
		if d.e.Alive(q) && bFlag.Load(d.e.BulkOut(q)[last*bulkHeader:]) != 0 {
			k = append(k, q)
		}
	}
	d.bUnfreed = k
	return len(k) > 0
}

// pullBulk copies the chunks that have arrived in src's bulk lane into
// their receive buffers and frees them; it reports whether there were any.
func (d *Device) pullBulk(src int) bool {
	in := d.e.BulkIn(src)
	did := false
	for {
		slot := int(d.bIn[src] % uint64(d.bslots))
		h := in[slot*bulkHeader:]
		if bFlag.Load(h) == 0 {
			return did
		}
		rid := bRid.Get(h)
		k := min(int(bLen.Get(h)), d.bulk)
		if rv := d.recvs[rid]; rv != nil && rv.src == src {
			k = min(k, rv.n-rv.got)
			rv.req.Buf.CopyIn(rv.got, in[d.bslots*bulkHeader+slot*d.bulk:][:k])
			rv.got += k
			if rv.got == rv.n {
				d.recvDone(rid, rv)
			}
		}
		bFlag.Store(h, 0)
		d.bIn[src]++
		d.e.Ring(src) // the sender may wait for a free chunk
		did = true
	}
}

// recvDone completes rendezvous receive rid: its data is all in.
func (d *Device) recvDone(rid uint32, rv *rvRecv) {
	delete(d.recvs, rid)
	d.bWait[rv.src]--
	rv.req.Complete(recv.Status(rv.req, rv.src, rv.tag, rv.size, rv.n))
}

func (d *Device) failMsg(m *outMsg, err error) {
	if m.req != nil && !m.req.Done() {
		m.req.Complete(adi.Status{Err: err})
	}
}

// flush pushes the queued messages, in order per destination. A
// multidestination message moves only once it heads every one of its
// destinations' queues.
func (d *Device) flush() bool {
	did := false
	for q := range d.outq {
		for len(d.outq[q]) > 0 {
			m := d.outq[q][0]
			if m.dests != nil {
				head := true
				for _, x := range m.dests {
					if d.outq[x][0] != m {
						head = false
						break
					}
				}
				if !head || !d.push(m) {
					break
				}
				for _, x := range m.dests {
					d.pop(x)
				}
				d.queued--
				did = true
				continue
			}
			if !d.push(m) {
				break
			}
			d.pop(q)
			d.queued--
			did = true
		}
	}
	return did
}

func (d *Device) pop(q int) {
	d.outq[q][0] = nil
	d.outq[q] = d.outq[q][1:]
	if len(d.outq[q]) == 0 {
		d.outq[q] = nil
	}
}

// Irecv posts a receive: it takes a waiting message or joins the posted queue.
func (d *Device) Irecv(r *adi.Request) error {
	if m := d.eng.Post(r); m != nil {
		d.deliver(r, m)
		return nil
	}
	if r.Peer != adi.AnySource && !d.e.Alive(r.Peer) {
		d.eng.Cancel(r)
		return d.dead("receive", r.Peer)
	}
	return nil
}

// deliver hands a matched unexpected message to receive r.
func (d *Device) deliver(r *adi.Request, m *match.Message) {
	switch h := m.Handle.(type) {
	case *rtsMsg:
		if d.mismatch(r, m.Env, m.Size, m.Sig, h.sid) {
			return
		}
		d.sendCTS(r, m.Env.Source, m.Env.Tag, m.Size, h.sid)
	case *unexpMsg:
		if d.mismatch(r, m.Env, m.Size, m.Sig, 0) {
			h.dropped = true
			return
		}
		if h.done {
			d.finishUnexp(r, h)
			return
		}
		if !d.e.Alive(h.src) {
			delete(d.unexp, h)
			r.Complete(adi.Status{Err: d.dead("receive", h.src)})
			return
		}
		h.claimed = r
	}
}

func (d *Device) finishUnexp(r *adi.Request, h *unexpMsg) {
	n := min(h.size, r.Buf.Size())
	r.Buf.CopyIn(0, h.data[:n])
	r.Complete(recv.Status(r, h.src, h.tag, h.size, n))
}

// sendCTS answers a matched RTS: the sender may now send min(size,
// capacity) bytes for receive rid.
func (d *Device) sendCTS(r *adi.Request, src, tag, size int, sid uint32) {
	rid := d.newID()
	n := min(size, r.Buf.Size())
	d.recvs[rid] = &rvRecv{req: r, src: src, tag: tag, size: size, n: n}
	d.bWait[src]++
	m := outMsg{dest: src}
	mode, payload := d.offer(r, src, n)
	putHeader(&m.hdr, kCTS, mode, 0, 0, n, sid, rid)
	m.buf, m.n = adi.Bytes(payload), len(payload)
	d.enqueue(&m)
}

// offer says where the first n bytes of receive r may be written by the
// sender src: the address of a contiguous buffer, or the list of a strided
// one's blocks when they are not too small; else nothing (packets). A
// sender on another host gets ctsWire: this side writes what it sends.
func (d *Device) offer(r *adi.Request, src, n int) (uint32, []byte) {
	if !d.remote || n == 0 {
		return ctsPackets, nil
	}
	if d.e.Remote(src) {
		return ctsWire, nil // the sender cannot reach this memory: this side writes
	}
	if r.Buf.Contiguous() {
		return ctsAddr, binary.LittleEndian.AppendUint64(nil, uint64(uintptr(unsafe.Pointer(&r.Buf.Mem[0]))))
	}
	blocks, ok := d.bigBlocks(r.Buf, n)
	if !ok {
		return ctsPackets, nil
	}
	lay := make([]byte, 0, 16*blocks)
	_ = r.Buf.Pieces(0, n, func(p []byte) error {
		lay = binary.LittleEndian.AppendUint64(lay, uint64(uintptr(unsafe.Pointer(&p[0]))))
		lay = binary.LittleEndian.AppendUint64(lay, uint64(len(p)))
		return nil
	})
	return ctsLayout, lay
}

// bigBlocks counts the blocks of a buffer's first n packed bytes and reports
// whether they average at least minBlock bytes (and are at most maxLayout):
// whether a remote write of them is worth its per-block cost in the kernel.
func (d *Device) bigBlocks(b adi.Buffer, n int) (int, bool) {
	if b.Contiguous() {
		return 1, true
	}
	blocks := 0
	_ = b.Pieces(0, n, func(p []byte) error {
		blocks++
		if blocks > maxLayout || blocks*d.minBlock > n {
			return errStop
		}
		return nil
	})
	return blocks, blocks <= maxLayout && blocks*d.minBlock <= n
}

func (d *Device) big(b adi.Buffer, n int) bool {
	_, ok := d.bigBlocks(b, n)
	return ok
}

var errStop = errors.New("stop")

// enqueue queues a control message; handlers use it (they never send from
// inside Extract), and Progress pushes it.
func (d *Device) enqueue(m *outMsg) {
	q := new(outMsg)
	*q = *m
	d.outq[m.dest] = append(d.outq[m.dest], q)
	d.queued++
}

// mismatch checks a matched message's type signature against the
// receive's; on a mismatch the receive completes with ErrType, nothing is
// written, and a rendezvous sender (sid ≠ 0) is released.
func (d *Device) mismatch(r *adi.Request, env adi.Envelope, size int, sig uint32, sid uint32) bool {
	st, bad := recv.Mismatch(r, env, size, sig)
	if !bad {
		return false
	}
	if sid != 0 {
		m := outMsg{dest: env.Source}
		putHeader(&m.hdr, kDiscard, 0, 0, 0, 0, sid, 0)
		d.enqueue(&m)
	}
	r.Complete(st)
	return true
}

// handle is the MPI handler: it runs for every packet of every incoming
// MPI message. On the first packet it reads the header and decides where
// the data goes; on every packet it scatters the packet's bytes straight
// into that place with one Receive per contiguous block.
func (d *Device) handle(e *Endpoint, s *Stream) {
	if s.Ctx == nil && s.last && d.eagerPacket(s) {
		return
	}
	st, _ := s.Ctx.(*inState)
	if st == nil {
		var h [mpiHeader]byte
		if e.Receive(s, h[:]) < mpiHeader {
			return // malformed; dropped
		}
		var local inState
		if !d.header(s, &h, &local) {
			return
		}
		st = &local
		if !s.Last() {
			p := new(inState)
			*p = local
			st = p
			s.Ctx = p
		}
	}
	if um := st.um; um != nil && (um.claimed != nil || um.dropped) {
		// A receive took the message while it was still arriving: what
		// came so far moves from the temporary buffer into the receive
		// buffer, and the rest goes there straight from the packets.
		delete(d.unexp, um)
		st.um, st.capacity = nil, 0
		if r := um.claimed; r != nil {
			um.claimed = nil
			st.req, st.capacity = r, min(st.size, r.Buf.Size())
			r.Buf.CopyIn(0, um.data[:min(st.off, st.capacity)])
		}
	}
	for s.Avail() > 0 {
		k := s.Avail()
		if st.off < st.capacity {
			k = min(k, st.capacity-st.off)
			switch {
			case st.raw != nil:
				e.Receive(s, st.raw[st.off:st.off+k])
			case st.req == nil:
				e.Receive(s, st.um.data[st.off:st.off+k])
			default:
				if !st.typed {
					st.typed = true
					if b := st.req.Buf; !b.Contiguous() {
						if st.seg, _ = datatype.NewSegment(b.Type, b.Count); st.seg != nil {
							_ = st.seg.Seek(st.off)
						}
					}
				}
				if st.seg == nil {
					e.Receive(s, st.req.Buf.Mem[st.off:st.off+k])
					break
				}
				for rem := k; rem > 0; {
					p, ok := st.seg.Next(st.req.Buf.Mem, rem)
					if !ok {
						break
					}
					e.Receive(s, p)
					rem -= len(p)
				}
			}
		} else {
			e.Skip(s, k)
		}
		st.off += k
	}
	if s.Last() {
		d.finishIn(st)
	}
}

// eagerPacket is handle's path for a whole eager message in one packet
// (eagerIn), for a packet that Extract did not hand to eagerIn itself. It
// reports false, having done nothing, for any other packet.
func (d *Device) eagerPacket(s *Stream) bool {
	h := s.pkt[s.pos:]
	if ok, _ := d.eagerIn(s.src, h); !ok {
		return false
	}
	s.pos, s.taken = len(s.pkt), s.taken+len(h)
	return true
}

// eagerIn takes a whole eager message from src in one packet (h, its
// payload: the MPI header and the data), every small message's: the header
// is read in place and the data copied straight into the matching receive
// (or kept as an unexpected message), with no per-message state. Extract
// calls it for every one-packet message of the MPI handler. It reports
// false, having done nothing, for any other message; and last, whether the
// message took the last posted receive: Extract then returns at once,
// without reading the sender's next packet slot, whose line the sender has
// fetched for writing, so that the waiter whose receive this was returns
// without a cross-core fetch on its way (and the sender's next write
// without another). What is left, from this sender or the others, waits
// for the next Extract, in order, as if it had arrived a moment later (the
// others' too: an ANY_SOURCE receive posted next still finds the messages
// that arrived first); an Extract stops early only by completing a
// receive, so that with no receive posted each one takes everything that
// arrived.
func (d *Device) eagerIn(src int, h []byte) (ok, last bool) {
	if len(h) < mpiHeader || h[0] != kEager {
		return false, false
	}
	data := h[mpiHeader:]
	size := int(binary.LittleEndian.Uint64(h[16:]))
	if size != len(data) {
		return false, false
	}
	tag := int(int32(binary.LittleEndian.Uint32(h[8:])))
	env := adi.Envelope{Context: binary.LittleEndian.Uint32(h[4:]), Source: src, Tag: tag}
	sig := binary.LittleEndian.Uint32(h[12:])
	r := d.eng.Arrive(env)
	if r == nil {
		// Complete already: no stream state and no unexp entry (which
		// tracks messages still arriving).
		um := &unexpMsg{src: src, tag: tag, size: size, data: append([]byte(nil), data...), done: true}
		d.eng.AddUnexpected(&match.Message{Env: env, Size: size, Data: um.data, Handle: um, Sig: sig})
		return true, false
	}
	if t := r.Buf.Type; sig != t.Signature() && d.mismatch(r, env, size, sig, 0) {
		return true, false
	}
	// The receive's size from its fields by pointer: Buffer.Size takes
	// the Buffer by value, a copy through the stack whose wide stores the
	// narrow loads after it wait for. An empty message copies nothing.
	rb := &r.Buf
	n := 0
	if rb.Type != nil {
		n = min(size, rb.Count*rb.Type.Size())
	}
	switch {
	case n == 0:
	case !rb.Type.Contiguous():
		r.Buf.CopyIn(0, data[:n])
	case n == 8:
		// A word (a double, an int64) in one move rather than a call
		// of memmove.
		*(*[8]byte)(rb.Mem) = *(*[8]byte)(data)
	default:
		copy(rb.Mem[:n], data)
	}
	d.cnt.shortIn++
	if n == size {
		r.Complete(adi.Status{Source: src, Tag: tag, Bytes: n})
	} else {
		r.Complete(recv.Status(r, src, tag, size, n))
	}
	return true, d.eng.Posted() == 0
}

// header handles an MPI header; it reports whether data follows for st.
func (d *Device) header(s *Stream, h *[mpiHeader]byte, st *inState) bool {
	kind := h[0]
	ctx := binary.LittleEndian.Uint32(h[4:])
	tag := int(int32(binary.LittleEndian.Uint32(h[8:])))
	sig := binary.LittleEndian.Uint32(h[12:])
	size := int(binary.LittleEndian.Uint64(h[16:]))
	sid := binary.LittleEndian.Uint32(h[24:])
	rid := binary.LittleEndian.Uint32(h[28:])
	src := s.Source()
	env := adi.Envelope{Context: ctx, Source: src, Tag: tag}
	switch kind {
	case kEager:
		*st = inState{src: src, tag: tag, size: size}
		if r := d.eng.Arrive(env); r != nil {
			if d.mismatch(r, env, size, sig, 0) {
				return true // skip the data
			}
			st.req, st.capacity = r, min(size, r.Buf.Size())
			return true
		}
		um := &unexpMsg{src: src, tag: tag, size: size, data: make([]byte, size)}
		d.unexp[um] = struct{}{}
		d.eng.AddUnexpected(&match.Message{Env: env, Size: size, Data: um.data, Handle: um, Sig: sig})
		st.um, st.capacity = um, size
		return true
	case kRTS:
		if r := d.eng.Arrive(env); r != nil {
			if !d.mismatch(r, env, size, sig, sid) {
				d.sendCTS(r, src, tag, size, sid)
			}
		} else {
			d.eng.AddUnexpected(&match.Message{Env: env, Size: size, Handle: &rtsMsg{sid: sid}, Sig: sig})
		}
		return false
	case kCTS, kDiscard:
		r := d.sends[sid]
		if r == nil {
			return false
		}
		delete(d.sends, sid)
		if kind == kDiscard {
			r.Complete(adi.Status{})
			return false
		}
		m := &outMsg{dest: src, buf: r.Buf, n: size, req: r}
		putHeader(&m.hdr, kData, 0, 0, 0, size, 0, rid)
		*st = inState{cts: m}
		// The CTS's payload says where the data may be written.
		switch plen := s.Len() - mpiHeader; {
		case ctx == ctsWire && plen == 0 && d.e.Remote(src):
			st.ctsWire = true
		case !d.e.CanWrite(src):
		case ctx == ctsAddr && plen == 8, ctx == ctsLayout && plen > 0 && plen%16 == 0:
			st.raw = make([]byte, plen)
			st.capacity = plen
		}
		return true
	case kFin:
		if rv := d.recvs[rid]; rv != nil && rv.src == src {
			d.recvDone(rid, rv)
		}
		return false
	case kData:
		rv := d.recvs[rid]
		if rv == nil {
			return false
		}
		*st = inState{req: rv.req, src: rv.src, tag: rv.tag, size: rv.size, capacity: rv.n, rid: rid, rv: true}
		return true
	}
	return false
}

// finishIn completes what an incoming message was for, after its last packet.
func (d *Device) finishIn(st *inState) {
	switch {
	case st.cts != nil:
		m := st.cts
		if st.ctsWire && m.n > 0 {
			m.netWrite = true
		} else if raw := st.raw; raw != nil && d.big(m.buf, m.n) {
			m.write = true
			if len(raw) == 8 {
				m.addr = binary.LittleEndian.Uint64(raw)
			} else {
				m.layout = make([]shm.RemoteSeg, len(raw)/16)
				for i := range m.layout {
					m.layout[i] = shm.RemoteSeg{Addr: binary.LittleEndian.Uint64(raw[16*i:]), Len: binary.LittleEndian.Uint64(raw[16*i+8:])}
				}
			}
		} else if d.bulk > 0 && m.n > 0 {
			m.bulk = true
			d.cnt.bulk++
		}
		d.enqueue(m)
	case st.rv:
		if rv := d.recvs[st.rid]; rv != nil {
			d.recvDone(st.rid, rv)
		}
	case st.req != nil:
		if !st.req.Done() {
			st.req.Complete(recv.Status(st.req, st.src, st.tag, st.size, st.capacity))
		}
	case st.um != nil:
		um := st.um
		um.done = true
		delete(d.unexp, um)
		if um.claimed != nil {
			d.finishUnexp(um.claimed, um)
			um.claimed = nil
		}
	}
}

// Iprobe looks for a matching message that has arrived.
func (d *Device) Iprobe(ctx uint32, src, tag int) (adi.Status, bool, error) {
	st, ok := d.eng.ProbeStatus(ctx, src, tag)
	return st, ok, nil
}

// CancelRecv withdraws r if no message has matched it.
func (d *Device) CancelRecv(r *adi.Request) bool {
	return d.eng.Withdraw(r)
}

// Progress extracts every arrived packet (running the MPI handler) and
// pushes queued messages as credits allow.
func (d *Device) Progress() (bool, error) {
	n, err := d.e.Extract()
	if err != nil {
		return true, err
	}
	if d.e.Lost() {
		// A peer on another host is unreachable: what depends on it
		// fails now, as when a rank dies (the failed call ends the job).
		d.checkPeers()
		return true, nil
	}
	net := d.netDid || d.e.NetMoved()
	d.netDid = false
	if n == 0 && !net && !d.bFull && !d.bMoved && d.queued == 0 && len(d.recvs) == 0 && len(d.bUnfreed) == 0 {
		// Nothing arrived and nothing waits to go: a waiter's idle poll.
		if d.e.live.Idle() {
			d.checkPeers()
		}
		return false, nil
	}
	did := n > 0 || net
	wait := d.bFull || len(d.bUnfreed) > 0 && d.unfreed()
	d.bFull = false
	if len(d.recvs) > 0 && d.bulk > 0 {
		for src, w := range d.bWait {
			if w == 0 || d.e.Remote(src) {
				continue
			}
			wait = true
			if d.pullBulk(src) {
				did = true
			}
		}
	}
	if d.queued > 0 && d.flush() {
		did = true
	}
	if d.bMoved { // part of a message went into the bulk lane
		d.bMoved, did = false, true
	}
	if wait && !did {
		// The bulk lane waits on the other process (to free chunks, or to
		// fill them): if it waits for this CPU, let it have it now rather
		// than at the end of the caller's polling.
		syscall.RawSyscall(syscall.SYS_SCHED_YIELD, 0, 0, 0)
	}
	if did {
		d.e.live.Busy()
	} else if d.e.live.Idle() {
		d.checkPeers()
	}
	return did, nil
}

// checkPeers fails the requests that depend on a process that has exited
// or on a peer on another host that became unreachable.
func (d *Device) checkPeers() {
	for _, q := range d.e.CheckPeers() {
		gone := d.lost(q)
		fail := func(r *adi.Request) {
			if r != nil && !r.Done() {
				r.Complete(adi.Status{Err: gone})
			}
		}
		for _, m := range d.outq[q] {
			if m.dests != nil && len(m.dests) > 1 {
				// A multidestination message still goes to the living
				// destinations; the send reports the loss when it completes.
				m.dests = slices.DeleteFunc(m.dests, func(x int) bool { return x == q })
				if m.st != nil {
					d.e.dropDest(m.st, q)
				}
				m.err = gone
				continue
			}
			fail(m.req)
			d.queued--
		}
		d.outq[q] = nil
		for sid, r := range d.sends {
			if r.Peer == q {
				delete(d.sends, sid)
				fail(r)
			}
		}
		for rid, rv := range d.recvs {
			if rv.src == q {
				delete(d.recvs, rid)
				d.bWait[q]--
				fail(rv.req)
			}
		}
		for _, r := range d.eng.CancelFrom(q) {
			fail(r)
		}
		d.e.Incoming(q, func(s *Stream) {
			if st, ok := s.Ctx.(*inState); ok && st.req != nil {
				fail(st.req)
			}
		})
		for um := range d.unexp {
			if um.src == q {
				delete(d.unexp, um)
				fail(um.claimed)
			}
		}
	}
}

// Seq is the FM doorbell.
func (d *Device) Seq() uint32 { return d.e.Seq() }

// Sleep waits on the doorbell until it moves from seq or t passes.
func (d *Device) Sleep(seq uint32, t time.Duration) {
	d.e.Sleep(seq, t)
	d.e.live.Slept()
}

// Wake rings this process's own doorbell.
func (d *Device) Wake() { d.e.Wake() }

// CompletesUnderLock declares adi.LockedCompleter: fm completes requests
// only inside the core's calls into it (it runs no goroutine of its own).
func (d *Device) CompletesUnderLock() {}
