package via

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/adimpi/adimpi/adi"
	"github.com/adimpi/adimpi/adi/devkit/liveness"
	"github.com/adimpi/adimpi/adi/devkit/recv"
	"github.com/adimpi/adimpi/adi/match"
	"github.com/adimpi/adimpi/internal/wire"
)

func init() { adi.Register("via", func() adi.Device { return new(Device) }) }

// The capabilities the device offers besides adi.Device.
var (
	_ adi.Device       = (*Device)(nil)
	_ adi.OptionHelper = (*Device)(nil)
	_ adi.CrossHost    = (*Device)(nil)
)

// CrossHost reports that the device reaches ranks on other hosts: their VIs
// are connected through the wire (net.go), the others' through shared
// memory.
func (d *Device) CrossHost() bool { return true }

// Message types of MPI over VIA. Every message travels as a VIA send into
// one of the receiver's pre-posted receive buffers and costs one credit.
const (
	mEager  uint32 = iota + 1 // envelope + payload
	mRTS                      // a large (or synchronous) message waits; sender's buffer address if contiguous
	mCTS                      // receiver → sender: RDMA-write n bytes at (handle, addr); or discard
	mFIN                      // sender → receiver: the RDMA writes are done
	mDONE                     // receiver → sender: the RDMA reads are done
	mCredit                   // returns credits and nothing else
)

// Header layout (little endian).
const (
	hdrSize   = 48
	hTyp      = 0
	hCtx      = 4
	hTag      = 8
	hSig      = 12 // sender's type signature; CTS: 1 = discard
	hCredits  = 16
	hHandle   = 20
	hSize     = 24
	hSid      = 32
	hRid      = 36
	hAddr     = 40
	maxDS     = 64 // data segments per descriptor the device builds
	maxPiece  = 1 << 30
	idlePolls = 256     // idle polls of Progress between two looks at the peers' processes
	yieldSize = 1 << 20 // a rendezvous send this large makes an idle waiter yield (yield)
	// shareStay is how long after its NIC's last piece of a shared
	// transfer a sender with shared sends live stays up (Sleep).
	shareStay = time.Millisecond
	// maxHostMem bounds the NIC host memory the receive buffers take.
	maxHostMem = 256 << 20
)

type hdr struct {
	typ, ctx, sig, credits, sid, rid uint32
	tag                              int32
	handle                           MemHandle
	size, addr                       uint64
}

func (h *hdr) put(b []byte) {
	le := binary.LittleEndian
	le.PutUint32(b[hTyp:], h.typ)
	le.PutUint32(b[hCtx:], h.ctx)
	le.PutUint32(b[hTag:], uint32(h.tag))
	le.PutUint32(b[hSig:], h.sig)
	le.PutUint32(b[hCredits:], h.credits)
	le.PutUint32(b[hHandle:], uint32(h.handle))
	le.PutUint64(b[hSize:], h.size)
	le.PutUint32(b[hSid:], h.sid)
	le.PutUint32(b[hRid:], h.rid)
	le.PutUint64(b[hAddr:], h.addr)
}

func getHdr(b []byte) hdr {
	le := binary.LittleEndian
	return hdr{typ: le.Uint32(b[hTyp:]), ctx: le.Uint32(b[hCtx:]), tag: int32(le.Uint32(b[hTag:])), sig: le.Uint32(b[hSig:]),
		credits: le.Uint32(b[hCredits:]), handle: MemHandle(le.Uint32(b[hHandle:])), size: le.Uint64(b[hSize:]),
		sid: le.Uint32(b[hSid:]), rid: le.Uint32(b[hRid:]), addr: le.Uint64(b[hAddr:])}
}

// outItem is something waiting to go to a peer, in order: a message (it
// needs a credit and a send buffer) or an RDMA descriptor.
type outItem struct {
	h      hdr
	data   adi.Buffer // eager payload
	finish *adi.Request
	rdma   *Descriptor
	owner  *adi.Request // failed if the peer dies
	onSent func(err error)
}

// sctx is a send descriptor's cookie.
type sctx struct {
	slot   int // send buffer to free, -1 for RDMA
	onDone func(err error)
}

type peer struct {
	rank, pid int
	vi        *VI
	where     string // "rank 3 on host h2" for a peer on another host, else ""
	lost      bool   // its VI's connection broke and what waited on it failed

	rbuf  []byte // receive buffers, one per credit
	rdesc []*Descriptor
	owed  int // credits to return
	held  int // credits in d.repost, not yet owed

	sbuf    []byte // send buffers
	sh      MemHandle
	sdesc   []*Descriptor
	free    []int
	credits int
	out     []*outItem
	data    []*outItem // rendezvous data and what follows it (postData)
	inSQ    int        // send descriptors posted and not yet taken back (VI.Pending without its lock)
}

// repost is a receive buffer of p's whose message has been handled.
type repost struct {
	p    *peer
	desc *Descriptor
}

type rvRecv struct {
	req          *adi.Request
	p            *peer
	tag, size, n int
	h            MemHandle
	tmp          []byte
}

type rvSend struct {
	big    bool // counted in liveBig
	shared bool // counted in liveShared
	req    *adi.Request
	p      *peer
	h      MemHandle
}

// Device is MPI over VIA. Create it through the adi registry (-device via).
type Device struct {
	rank, size int
	nic        *NIC
	cq         *CQ
	peers      []*peer
	eng        match.Engine
	eager      int
	credits    int
	slot       int
	nextID     uint32
	sends      map[uint32]*rvSend
	recvs      map[uint32]*rvRecv
	liveSends  int // rendezvous sends not complete yet
	liveBig    int // of which of at least yieldSize bytes
	// liveShared counts the rendezvous sends whose data a peer of this
	// host reads with the shared DMA, which this process's NIC helps
	// move (dmashare.go); while there are any, Sleep does not sleep
	// (stayUp). Read without the core's lock.
	liveShared atomic.Int32
	stayUp     bool // no more ranks on this host than cores: see Sleep
	rc         regCache
	live       *liveness.Peers
	lostSeen   uint32   // the NIC's LostGen last handled
	repost     []repost // receive buffers emptied, to post again (reposts)
	repostNow  bool     // a peer waits for credits: post them in this Progress
	settleErr  error    // what FastSettle met, for the next Progress to report
	rma        rmaState // one-sided communication (rma.go)
	rndvWrite  bool     // rndv=write: a contiguous receive buffer answers CTS on one host too
	eagerItem  outItem  // Isend's eager message while put takes it

	cnt struct{ eager, rndv, credit, backlogged, rndvReads, rndvWrites, yields int64 }
}

// Init opens the NIC, creates one VI per peer (and one connected to itself),
// pre-posts the receive buffers and connects the VIs through the KVS.
func (d *Device) Init(cfg adi.Config) error {
	d.rank, d.size = cfg.Rank, cfg.Size
	d.live = liveness.New(d.rank, d.size, idlePolls)
	v, err := OptionTable.Parse(cfg.Options)
	if err != nil {
		return err
	}
	o := applyNIC(DefaultOptions(), v, true)
	d.eager, d.credits, d.rc.limit = v.Int("eager"), v.Int("credits"), v.Int("regcache")
	d.rma.off = v.String("rma") == "off"
	d.rndvWrite = v.String("rndv") == "write"
	local := 0
	for r := 0; r < d.size; r++ {
		if cfg.Hosts == nil || cfg.Hosts[r] == cfg.Hosts[d.rank] {
			local++
		}
	}
	d.stayUp = local <= runtime.NumCPU()
	d.slot = (hdrSize + d.eager + 63) &^ 63
	o.MaxVIs, o.RecvQueue, o.MaxCQs = d.size, d.credits, 1
	// The receive buffers live in the NIC's host memory, which the NICs
	// of this host write with a plain copy (AllocHostMem); a job too
	// large for it keeps them on the heap, written through the kernel.
	if rb := d.size * d.credits * d.slot; rb <= maxHostMem {
		o.HostMem = rb
	}
	// The engine polls a short while before sleeping: a polling engine
	// takes a core that the application threads (its own and its peers')
	// need, and longer polling raises latency (docs/performance.md).
	o.Spin = time.Duration(v.Int("nicspin")) * time.Microsecond
	if d.nic, err = OpenNIC(o); err != nil {
		return err
	}
	if d.cq, err = d.nic.CreateCQ(); err != nil {
		return err
	}
	if err := cfg.KVS.Put(fmt.Sprintf("via-%d", d.rank), d.nic.Address()); err != nil {
		return err
	}
	ep, err := wire.Setup(wire.Job{Rank: d.rank, Size: d.size, Hosts: cfg.Hosts, KVS: cfg.KVS, Prefix: "via", Handler: d.nic.WireHandler()})
	if err != nil {
		return fmt.Errorf("via: %w", err)
	}
	if ep != nil {
		d.nic.UseWire(ep)
		host, _ := os.Hostname()
		if err := cfg.KVS.Put(fmt.Sprintf("via-host-%d", d.rank), host); err != nil {
			return err
		}
	}
	d.peers = make([]*peer, d.size)
	for r := range d.peers {
		vi, err := d.nic.CreateVI(d.cq, nil)
		if err != nil {
			return err
		}
		p := &peer{rank: r, pid: os.Getpid(), vi: vi, credits: d.credits}
		d.live.SetPid(r, p.pid)
		d.peers[r] = p
		if o.HostMem > 0 {
			if p.rbuf, err = d.nic.AllocHostMem(d.credits * d.slot); err != nil {
				return err
			}
		} else {
			p.rbuf = make([]byte, d.credits*d.slot)
		}
		rh, err := d.nic.RegisterMem(p.rbuf)
		if err != nil {
			return err
		}
		for k := 0; k < d.credits; k++ {
			ds := &Descriptor{DS: []DataSegment{Seg(rh, p.rbuf[k*d.slot:(k+1)*d.slot])}, User: k}
			p.rdesc = append(p.rdesc, ds)
			if err := vi.PostRecv(ds); err != nil {
				return err
			}
		}
		ns := d.credits + 4
		p.sbuf = make([]byte, ns*d.slot)
		if p.sh, err = d.nic.RegisterMem(p.sbuf); err != nil {
			return err
		}
		for k := 0; k < ns; k++ {
			p.sdesc = append(p.sdesc, &Descriptor{Control: OpSend, DS: []DataSegment{Seg(p.sh, p.sbuf[k*d.slot:(k+1)*d.slot])}, User: &sctx{slot: k}})
			p.free = append(p.free, k)
		}
	}
	if err := cfg.KVS.Barrier(); err != nil {
		return err
	}
	for r, p := range d.peers {
		if cfg.Hosts != nil && cfg.Hosts[r] != cfg.Hosts[d.rank] {
			host, err := cfg.KVS.Get(fmt.Sprintf("via-host-%d", r))
			if err != nil {
				return err
			}
			// Liveness comes from the wire (VI.Lost): the pid scan, which
			// sees only this host's processes, watches this process for it.
			p.where = fmt.Sprintf("rank %d on host %s", r, host)
			if err := p.vi.ConnectRemote(r, d.rank, p.where); err != nil {
				return fmt.Errorf("via: rank %d: %w", r, err)
			}
			continue
		}
		addr := d.nic.Address()
		if r != d.rank {
			if addr, err = cfg.KVS.Get(fmt.Sprintf("via-%d", r)); err != nil {
				return err
			}
			fmt.Sscanf(addr, "%d:", &p.pid)
			d.live.SetPid(r, p.pid)
		}
		if err := p.vi.Connect(addr, d.rank); err != nil {
			return fmt.Errorf("via: rank %d: %w", r, err)
		}
	}
	d.sends = map[uint32]*rvSend{}
	d.recvs = map[uint32]*rvRecv{}
	return nil
}

// Finalize waits (briefly) for the descriptors already handed to the NIC,
// then closes it.
func (d *Device) Finalize() error {
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		seq := d.nic.Seq()
		busy := false
		for _, p := range d.peers {
			// To a peer on another host, what matters is that the frames
			// are on the wire (the NIC's close lets them leave), not its
			// acks: it may close first.
			s, _ := p.vi.Pending()
			if p.where != "" {
				s = 0
				if p.vi.Unsent() {
					s = 1
				}
			}
			if (s > 0 || len(p.data) > 0) && d.alive(p) {
				busy = true
			}
		}
		if !busy {
			break
		}
		if did, err := d.Progress(); err != nil {
			break
		} else if !did {
			d.nic.Sleep(seq, time.Millisecond)
		}
	}
	return d.nic.Close()
}

// Counters reports the device's live state and traffic, and the NIC's.
func (d *Device) Counters() map[string]int64 {
	backlog := 0
	for _, p := range d.peers {
		backlog += len(p.out) + len(p.data)
	}
	c := d.nic.Counters()
	c["posted_receives"] = int64(d.eng.Posted())
	c["unexpected_messages"] = int64(d.eng.Unexpected())
	c["rendezvous_sends"] = int64(d.liveSends)
	c["rendezvous_receives"] = int64(len(d.recvs))
	c["backlog"] = int64(backlog)
	c["eager_messages"] = d.cnt.eager
	c["rendezvous_messages"] = d.cnt.rndv
	c["credit_messages"] = d.cnt.credit
	c["idle_yields"] = d.cnt.yields
	c["backlogged_items"] = d.cnt.backlogged
	c["rendezvous_reads"], c["rendezvous_writes"] = d.cnt.rndvReads, d.cnt.rndvWrites
	c["regcache_hits"] = d.rc.hits
	c["regcache_misses"] = d.rc.misses
	c["regcache_bytes"] = int64(d.rc.bytes)
	c["rma_rdma_writes"], c["rma_rdma_reads"] = d.rma.writes, d.rma.reads
	return c
}

func (d *Device) newID() uint32 {
	d.nextID++
	if d.nextID == 0 {
		d.nextID = 1
	}
	return d.nextID
}

// Isend: eager into the peer's posted buffers when small, else rendezvous.
func (d *Device) Isend(r *adi.Request) error {
	p := d.peers[r.Peer]
	if !d.alive(p) {
		return d.exited("send", p)
	}
	n := r.Buf.Size()
	if n <= d.eager && r.Mode != adi.ModeSync {
		d.cnt.eager++
		// The item lives in the device while put copies it out; only a
		// message that must wait behind p's backlog takes memory of its own.
		it := &d.eagerItem
		*it = outItem{h: hdr{typ: mEager, ctx: r.Context, tag: int32(r.Tag), sig: r.Buf.Type.Signature(), size: uint64(n)},
			data: r.Buf, finish: r, owner: r}
		if len(p.out) == 0 && d.put(p, it) {
			*it = outItem{}
			return nil
		}
		queued := new(outItem)
		*queued, *it = *it, outItem{}
		d.post(p, queued)
		return nil
	}
	d.cnt.rndv++
	s := &rvSend{req: r, p: p}
	h := hdr{typ: mRTS, ctx: r.Context, tag: int32(r.Tag), sig: r.Buf.Type.Signature(), size: uint64(n)}
	if n > 0 {
		var err error
		if s.h, err = d.register(r.Buf.Mem); err != nil {
			return adi.Errorf(adi.ErrOther, "send", "registering the send buffer: %v", err)
		}
		if r.Buf.Contiguous() {
			h.addr, h.handle = Addr(r.Buf.Mem), s.h
		}
	}
	h.sid = d.newID()
	d.sends[h.sid] = s
	d.liveSends++
	if s.big = n >= yieldSize; s.big {
		d.liveBig++
	}
	if s.shared = h.addr != 0 && n >= shareMin && p.where == "" && p.rank != d.rank && !d.rndvWrite && d.nic.o.SharedDMA; s.shared {
		d.liveShared.Add(1)
	}
	d.post(p, &outItem{h: h, owner: r})
	return nil
}

// Irecv matches a waiting message or joins the posted queue.
func (d *Device) Irecv(r *adi.Request) error {
	if r.Peer != adi.AnySource && !d.alive(d.peers[r.Peer]) {
		return d.exited("receive", d.peers[r.Peer])
	}
	if m := d.eng.Post(r); m != nil {
		d.deliver(r, m)
	}
	return nil
}

// deliver hands a matched unexpected message to r.
func (d *Device) deliver(r *adi.Request, m *match.Message) {
	if m.Handle == nil {
		if d.mismatch(r, m.Env, m.Size, m.Sig, nil) {
			return
		}
		n := min(m.Size, r.Buf.Size())
		r.Buf.CopyIn(0, m.Data[:n])
		r.Complete(recv.Status(r, m.Env.Source, m.Env.Tag, m.Size, n))
		return
	}
	h := m.Handle.(hdr)
	d.startRndv(r, d.peers[m.Env.Source], &h)
}

// mismatch applies MPI's type-signature rule (see netvm): a known basic type
// that differs fails the receive with ErrType and writes nothing; a
// rendezvous sender is released with a discarding CTS.
func (d *Device) mismatch(r *adi.Request, env adi.Envelope, size int, sig uint32, rts *hdr) bool {
	st, bad := recv.Mismatch(r, env, size, sig)
	if !bad {
		return false
	}
	if rts != nil {
		d.post(d.peers[env.Source], &outItem{h: hdr{typ: mCTS, sid: rts.sid, sig: 1}})
	}
	r.Complete(st)
	return true
}

// segments builds the gather/scatter lists for packed bytes [0, n) of b in
// region h: one data segment per contiguous block (Buffer.Pieces), at most
// maxDS per descriptor. off[i] is the packed offset where list i starts.
func segments(b adi.Buffer, n int, h MemHandle) (lists [][]DataSegment, off []int) {
	var cur []DataSegment
	pos, start := 0, 0
	_ = b.Pieces(0, n, func(piece []byte) error {
		for len(piece) > 0 {
			k := min(len(piece), maxPiece)
			if len(cur) == maxDS {
				lists, off = append(lists, cur), append(off, start)
				cur, start = nil, pos
			}
			cur = append(cur, Seg(h, piece[:k]))
			pos += k
			piece = piece[k:]
		}
		return nil
	})
	if len(cur) > 0 {
		lists, off = append(lists, cur), append(off, start)
	}
	return lists, off
}

// startRndv answers a matched RTS: RDMA write into a contiguous receive
// buffer (CTS), RDMA read with a scatter list when only the sender's buffer
// is contiguous, or RDMA write into a registered bounce buffer.
func (d *Device) startRndv(r *adi.Request, p *peer, h *hdr) {
	env := adi.Envelope{Context: h.ctx, Source: p.rank, Tag: int(h.tag)}
	size := int(h.size)
	if d.mismatch(r, env, size, h.sig, h) {
		return
	}
	n := min(size, r.Buf.Size())
	if n == 0 {
		d.post(p, &outItem{h: hdr{typ: mCTS, sid: h.sid}})
		r.Complete(recv.Status(r, p.rank, env.Tag, size, 0))
		return
	}
	rv := &rvRecv{req: r, p: p, tag: env.Tag, size: size, n: n}
	fail := func(err error) {
		d.post(p, &outItem{h: hdr{typ: mCTS, sid: h.sid, sig: 1}})
		r.Complete(adi.Status{Source: p.rank, Tag: env.Tag, Err: adi.Errorf(adi.ErrOther, "receive", "%v", err)})
	}
	rid := d.newID()
	var err error
	// On one host a contiguous send buffer is read (rndv=read): the data
	// starts moving when the RTS arrives, without a CTS round trip, and a
	// message costs one receive buffer (credit) each way, RTS and DONE,
	// where the write protocol costs RTS and FIN one way and CTS the other.
	// Across hosts an RDMA read is a request frame and the data's return,
	// so the write protocol, whose data follows the CTS, stays.
	read := h.addr != 0 && (!r.Buf.Contiguous() || !d.rndvWrite && p.where == "")
	switch {
	case r.Buf.Contiguous() && !read:
		if rv.h, err = d.register(r.Buf.Mem); err != nil {
			fail(err)
			return
		}
		d.recvs[rid] = rv
		d.cnt.rndvWrites++
		d.post(p, &outItem{h: hdr{typ: mCTS, sid: h.sid, rid: rid, addr: Addr(r.Buf.Mem), handle: rv.h, size: uint64(n)}})
	case read:
		// The sender's buffer is contiguous: read it straight into the
		// receive buffer (its blocks: a scatter list per descriptor).
		if rv.h, err = d.register(r.Buf.Mem); err != nil {
			fail(err)
			return
		}
		d.recvs[rid] = rv
		d.cnt.rndvReads++
		lists, offs := segments(r.Buf, n, rv.h)
		for i, ds := range lists {
			desc := &Descriptor{Control: OpRDMARead, RemoteHandle: h.handle, RemoteAddr: h.addr + uint64(offs[i]), DS: ds}
			it := &outItem{rdma: desc, owner: r}
			if i == len(lists)-1 {
				it.onSent = func(err error) { d.readDone(rid, err) }
			}
			d.postData(p, it)
		}
		// The DONE follows the reads on the VI, whose descriptors the NIC
		// executes in order: it leaves as soon as the data is in, from
		// the NIC, not when this process next sees the reads' completion.
		// A stream of messages then keeps the NIC busy: the DONEs, and
		// the credits they carry back, reach the sender while the reads
		// of the next messages move, and its next RTSs arrive before
		// those are done (DMPI's pipelining of the handshake with the
		// data). Otherwise the DONEs of a batch of reads went only after
		// the batch, and the NIC idled for a round trip after each.
		d.postData(p, &outItem{h: hdr{typ: mDONE, sid: h.sid}})
	default:
		rv.tmp = make([]byte, n)
		if rv.h, err = d.nic.RegisterMem(rv.tmp); err != nil {
			fail(err)
			return
		}
		d.recvs[rid] = rv
		d.post(p, &outItem{h: hdr{typ: mCTS, sid: h.sid, rid: rid, addr: Addr(rv.tmp), handle: rv.h, size: uint64(n)}})
	}
}

// readDone completes a receive whose RDMA reads are done (the DONE that
// releases the sender follows them on the VI).
func (d *Device) readDone(rid uint32, err error) {
	rv := d.recvs[rid]
	if rv == nil {
		return
	}
	delete(d.recvs, rid)
	d.release(rv.h)
	if err != nil {
		rv.req.Complete(adi.Status{Source: rv.p.rank, Tag: rv.tag, Err: adi.Errorf(adi.ErrOther, "receive", "RDMA read from rank %d: %v", rv.p.rank, err)})
		return
	}
	rv.req.Complete(recv.Status(rv.req, rv.p.rank, rv.tag, rv.size, rv.n))
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

// post sends it now if it can go, else queues it behind p's backlog.
func (d *Device) post(p *peer, it *outItem) {
	if !d.alive(p) {
		if it.owner != nil && !it.owner.Done() {
			it.owner.Complete(adi.Status{Err: d.exited("send", p)})
		}
		if it.onSent != nil {
			it.onSent(d.exited("send", p))
		}
		return
	}
	if len(p.out) == 0 && d.put(p, it) {
		return
	}
	d.cnt.backlogged++
	p.out = append(p.out, it)
}

// postData queues a rendezvous's RDMA descriptor, or the message that
// must follow its RDMA descriptors (FIN), for p. Progress posts them after
// p's waiting messages: a VI executes its descriptors in order, and an RTS
// queued behind megabytes of RDMA writes reaches the receiver only when
// they are done, whose CTS then finds the send queue drained — the NIC
// idles for a round trip. With the RTSs (and CTSs) first, the handshakes
// of the next messages travel while the current data moves (DMPI's
// pipelining). RDMA descriptors need no credits, so they do not wait for
// the messages ahead of them either.
func (d *Device) postData(p *peer, it *outItem) {
	p.data = append(p.data, it)
}

// flushData posts p's queued rendezvous data: RDMA descriptors while the
// send queue has room, and a FIN, whose RDMA descriptors are then posted
// before it, as an ordinary message.
func (d *Device) flushData(p *peer) (did bool) {
	k := 0
	for ; k < len(p.data); k++ {
		it := p.data[k]
		if it.rdma == nil || !d.alive(p) {
			d.post(p, it) // a FIN (credits permitting), or failed
		} else if !d.put(p, it) {
			break
		}
		p.data[k] = nil
		did = true
	}
	p.data = p.data[k:]
	return did
}

// put hands it to the NIC if the send queue, a send buffer and (for
// messages) the credits allow.
func (d *Device) put(p *peer, it *outItem) bool {
	if p.inSQ >= d.nic.o.SendQueue {
		return false
	}
	if it.rdma != nil {
		it.rdma.User = &sctx{slot: -1, onDone: it.onSent}
		if err := p.vi.PostSend(it.rdma); err == nil {
			p.inSQ++
		} else {
			if it.onSent != nil {
				it.onSent(err)
			} else if it.owner != nil && !it.owner.Done() {
				it.owner.Complete(adi.Status{Err: adi.Errorf(adi.ErrOther, "send", "posting RDMA to rank %d: %v", p.rank, err)})
			}
		}
		return true
	}
	need := 2 // keep the last credit for returning credits
	if it.h.typ == mCredit {
		need = 1
	}
	if p.credits < need || len(p.free) == 0 {
		return false
	}
	k := p.free[len(p.free)-1]
	p.free = p.free[:len(p.free)-1]
	buf := p.sbuf[k*d.slot : (k+1)*d.slot]
	it.h.credits = uint32(p.owed)
	p.owed = 0
	it.h.put(buf)
	payload := 0
	if it.h.typ == mEager {
		payload = int(it.h.size)
		it.data.CopyOut(0, buf[hdrSize:hdrSize+payload])
	}
	desc := p.sdesc[k]
	desc.DS[0].Len = uint32(hdrSize + payload)
	desc.User.(*sctx).onDone = it.onSent
	if it.onSent == nil { // nobody waits for this completion
		desc.Control |= FlagQuiet
	} else {
		desc.Control &^= FlagQuiet
	}
	if err := p.vi.PostSend(desc); err != nil {
		p.free = append(p.free, k)
		if it.owner != nil && !it.owner.Done() {
			it.owner.Complete(adi.Status{Err: adi.Errorf(adi.ErrOther, "send", "posting to rank %d: %v", p.rank, err)})
		}
		return true
	}
	p.inSQ++
	p.credits--
	if it.finish != nil {
		it.finish.Complete(adi.Status{Bytes: payload})
	}
	return true
}

// Drained reports whether the NIC has carried out every send descriptor
// this device posted (adi.Drainer): its engine sends on its own thread,
// and may need the process manager to find a peer on another host.
func (d *Device) Drained() bool { return d.nic.Drained() }

// Progress takes completions from the CQ, flushes backlogs and returns
// credits.
func (d *Device) Progress() (bool, error) {
	if err := d.settleErr; err != nil {
		d.settleErr = nil
		return true, err
	}
	did := d.nic.Help() // the NIC's pass on this thread (NIC.Help)
	if len(d.repost) > 0 {
		if err := d.reposts(); err != nil {
			return true, err
		}
	}
	if g := d.nic.LostGen(); g != d.lostSeen {
		d.lostSeen = g
		d.checkLost()
		did = true
	}
	// Receive queues are polled directly (VipRecvDone): a completion is
	// then one line, the descriptor's slot, that the sender's NIC writes
	// and this process reads, where a CQ entry would add two more (the
	// entry and the CQ's tail, which every sender's NIC and this
	// process's own send completions contend for).
	for _, p := range d.peers {
		for {
			desc := p.vi.RecvDone()
			if desc == nil {
				break
			}
			did = true
			if err := d.arrive(p, desc); err != nil {
				return true, err
			}
		}
	}
	if d.sendsDone() {
		did = true
	}
	if d.repostNow {
		if err := d.reposts(); err != nil {
			return true, err
		}
	}
	flushed := false
	for _, p := range d.peers {
		for len(p.out) > 0 && d.put(p, p.out[0]) {
			p.out[0] = nil
			p.out = p.out[1:]
			did = true
		}
		if len(p.data) > 0 && d.flushData(p) {
			did, flushed = true, true
		}
		if p.owed >= d.credits/2 && p.credits >= 1 && d.alive(p) && len(p.free) > 0 {
			d.cnt.credit++
			d.put(p, &outItem{h: hdr{typ: mCredit}})
			did = true
		}
	}
	// The doorbell of an idle NIC executed the posted RDMA reads on this
	// thread (NIC.inline, with the DONE behind them): a read that is done
	// completes its receive now, not one progress call later, which a
	// ping-pong pays on every message.
	if flushed {
		d.sendsDone()
	}
	if did {
		d.live.Busy()
	} else if (d.nic.Busy() || d.liveBig > 0 && !d.staysUp()) && d.yield() {
	} else if d.live.Idle() {
		d.checkPeers()
	}
	return did, nil
}

// sendsDone takes back the send descriptors the NIC has completed (their
// CQ entries): it frees their send buffers and runs what waits on them.
func (d *Device) sendsDone() (did bool) {
	for {
		vi, recv, ok := d.cq.Done()
		if !ok {
			return did
		}
		p := d.peers[vi.ID()]
		if recv {
			continue // receive queues report to no CQ
		}
		if desc := vi.SendDone(); desc != nil {
			did = true
			p.inSQ--
			c := desc.User.(*sctx)
			if c.slot >= 0 {
				p.free = append(p.free, c.slot)
			}
			if f := c.onDone; f != nil {
				c.onDone = nil
				f(d.descErr(p, desc))
			}
		}
	}
}

// reposts posts the receive buffers emptied since the last call again and
// counts the credits they are owed back to their senders. A buffer is
// reposted at the next Progress, not when its message is handled: posting
// a receive descriptor writes the slot that the sender's NIC reads, a
// cache line that travels between the processes, and doing it before the
// call returns put that on the path of every message (the receiver's
// answer waited for it). At the next Progress this process's own sends of
// the meantime have already left (Help runs first). The credit a buffer
// stands for goes back only once it is posted, so a sender never finds the
// buffer missing. When a peer's buffers pile up (half its credits owed or
// held, the point at which an explicit credit message goes), they are
// posted in the Progress that handled them: a stream of messages is
// waiting for those credits, and the credit message goes at once.
func (d *Device) reposts() error {
	d.repostNow = false
	for i, r := range d.repost {
		d.repost[i] = repost{}
		r.p.held = 0
		if err := r.p.vi.PostRecv(r.desc); err != nil {
			d.repost = d.repost[:0]
			return fmt.Errorf("via: reposting a receive buffer for rank %d: %v", r.p.rank, err)
		}
		r.p.owed++
	}
	d.repost = d.repost[:0]
	return nil
}

// arrive handles a message in one of p's receive buffers and queues the
// buffer for reposting.
func (d *Device) arrive(p *peer, desc *Descriptor) error {
	k := desc.User.(int)
	buf := p.rbuf[k*d.slot : (k+1)*d.slot]
	if err := desc.Err(); err != nil && p.vi.Lost() != nil {
		d.checkLost() // flushed from a broken connection: fail what waits on p
		return nil
	}
	if err := d.descErr(p, desc); err != nil || desc.Length < hdrSize {
		return fmt.Errorf("via: receive from rank %d failed: %v (length %d)", p.rank, err, desc.Length)
	}
	h := getHdr(buf)
	p.credits += int(h.credits)
	env := adi.Envelope{Context: h.ctx, Source: p.rank, Tag: int(h.tag)}
	switch h.typ {
	case mEager:
		size := int(h.size)
		data := buf[hdrSize : hdrSize+size]
		if r := d.eng.Arrive(env); r != nil {
			if !d.mismatch(r, env, size, h.sig, nil) {
				n := min(size, r.Buf.Size())
				r.Buf.CopyIn(0, data[:n])
				r.Complete(recv.Status(r, p.rank, env.Tag, size, n))
			}
		} else {
			d.eng.AddUnexpected(&match.Message{Env: env, Size: size, Data: append([]byte(nil), data...), Sig: h.sig})
		}
	case mRTS:
		if r := d.eng.Arrive(env); r != nil {
			d.startRndv(r, p, &h)
		} else {
			d.eng.AddUnexpected(&match.Message{Env: env, Size: int(h.size), Handle: h, Sig: h.sig})
		}
	case mCTS:
		s := d.sends[h.sid]
		if s == nil {
			return fmt.Errorf("via: CTS from rank %d for unknown send %d", p.rank, h.sid)
		}
		delete(d.sends, h.sid)
		n := int(h.size)
		if h.sig == 1 || n == 0 {
			d.sendDone(s, nil, 0)
			break
		}
		lists, offs := segments(s.req.Buf, n, s.h)
		for i, ds := range lists {
			d.postData(p, &outItem{rdma: &Descriptor{Control: OpRDMAWrite, RemoteHandle: h.handle, RemoteAddr: h.addr + uint64(offs[i]), DS: ds}, owner: s.req})
		}
		d.postData(p, &outItem{h: hdr{typ: mFIN, rid: h.rid}, owner: s.req, onSent: func(err error) { d.sendDone(s, err, n) }})
	case mFIN:
		rv := d.recvs[h.rid]
		if rv == nil {
			return fmt.Errorf("via: FIN from rank %d for unknown receive %d", p.rank, h.rid)
		}
		delete(d.recvs, h.rid)
		if rv.tmp != nil {
			rv.req.Buf.CopyIn(0, rv.tmp)
			_ = d.nic.DeregisterMem(rv.h)
		} else {
			d.release(rv.h)
		}
		rv.req.Complete(recv.Status(rv.req, p.rank, rv.tag, rv.size, rv.n))
	case mDONE:
		s := d.sends[h.sid]
		if s == nil {
			return fmt.Errorf("via: DONE from rank %d for unknown send %d", p.rank, h.sid)
		}
		delete(d.sends, h.sid)
		d.sendDone(s, nil, int(s.req.Buf.Size()))
	case mCredit:
	default:
		return fmt.Errorf("via: message of unknown type %d from rank %d", h.typ, p.rank)
	}
	d.repost = append(d.repost, repost{p, desc})
	if p.held++; p.owed+p.held >= d.credits/2 {
		d.repostNow = true
	}
	return nil
}

// sendDone completes a rendezvous send.
func (d *Device) sendDone(s *rvSend, err error, n int) {
	if s.h != 0 {
		d.release(s.h)
		s.h = 0
	}
	d.liveSends--
	if s.big {
		d.liveBig--
	}
	if s.shared {
		d.liveShared.Add(-1)
	}
	if s.req.Done() {
		return
	}
	if err != nil {
		s.req.Complete(adi.Status{Err: adi.Errorf(adi.ErrOther, "send", "to rank %d: %v", s.p.rank, err)})
		return
	}
	s.req.Complete(adi.Status{Bytes: n})
}

// yield gives the core away when a waiter polls and nothing happened while
// data moves for it: this process's NIC has work, or a rendezvous send of
// at least yieldSize bytes is under way, whose data the receiver's NIC
// reads on the receiver's thread. Those threads need a core too, and with
// two cores a polling waiter would keep them off it (unless it stays up to
// move its NIC's part of them, staysUp). Shorter sends do not
// yield: their DONEs come soon, and a yield under load can cost a time
// slice before the sender sees one and posts its next RTS. It reports
// false, so that the idle bookkeeping goes on.
func (d *Device) yield() bool {
	d.cnt.yields++
	syscall.Syscall(syscall.SYS_SCHED_YIELD, 0, 0, 0)
	return false
}

// staysUp reports whether a waiter stays on its core for the shared
// transfers of its sends (see Sleep): a peer of this host reads one of
// them, this process's NIC moves its part (dmashare.go, dmastage.go), and
// the host has a core for every rank. Such a waiter neither sleeps nor
// yields: a yield on a host that other jobs load hands the core to one of
// them for the rest of its time slice, while the reader waits for this
// NIC's chunks.
func (d *Device) staysUp() bool {
	return d.stayUp && d.liveShared.Load() > 0 && d.nic.sharing(shareStay)
}

// Seq is the NIC's completion word.
func (d *Device) Seq() uint32 { return d.nic.Seq() }

// Sleep waits on the NIC's completion futex; but not while a peer of
// this host is reading this process's sends with the shared DMA (one of
// them is live and the NIC copied a piece of a transfer within
// shareStay) and the host has a core for every rank (stayUp): the waiter
// then returns to its polling, whose progress moves its NIC's half of
// every transfer as soon as the reader publishes it. A sleeping waiter
// leaves that to its engine, which the reader's NIC must wake for every
// transfer and which joins after its wake-up, when the reader has moved
// much of the data alone. A send whose receiver has not come for
// shareStay does not keep it up, and with the ranks outnumbering the
// cores the core is worth more to the others.
func (d *Device) Sleep(seq uint32, timeout time.Duration) {
	if d.staysUp() {
		return
	}
	d.nic.Sleep(seq, timeout)
	d.live.Slept()
}

// Wake makes every Sleep return.
func (d *Device) Wake() { d.nic.Wake() }

// alive reports whether p can still be reached: its process is alive (on
// this host) and its VI's connection is not broken (another host).
func (d *Device) alive(p *peer) bool { return d.live.Alive(p.rank) && !p.lost && p.vi.Lost() == nil }

// exited is the error of an operation started (op: "send", "receive")
// towards a peer that cannot be reached.
func (d *Device) exited(op string, p *peer) error {
	if err := p.vi.Lost(); err != nil {
		return adi.Errorf(adi.ErrOther, op, "%s is unreachable: %v", p.where, rootCause(err))
	}
	return d.live.Exited(op, p.rank)
}

// descErr is the error of a descriptor completed on p's VI, naming p: a
// transport error means p cannot be reached (its host or link is gone, the
// connection's own loss report may come later), so the job's error says
// where, as the other devices' do.
func (d *Device) descErr(p *peer, desc *Descriptor) error {
	err := desc.Err()
	if err == nil {
		return nil
	}
	who := p.where
	if who == "" {
		who = fmt.Sprintf("rank %d", p.rank)
	}
	if atomic.LoadUint32(&desc.Status)&StatusTransportError != 0 {
		if lost := p.vi.Lost(); lost != nil {
			err = rootCause(lost)
		}
		return fmt.Errorf("%s is unreachable: %w", who, err)
	}
	return fmt.Errorf("%s: %w", who, err)
}

// rootCause drops the "rank N on host H: " the NIC put in front.
func rootCause(err error) error {
	if u := errors.Unwrap(err); u != nil {
		return u
	}
	return err
}

// checkLost fails the requests that wait on a peer on another host whose
// connection broke.
func (d *Device) checkLost() {
	for _, p := range d.peers {
		if err := p.vi.Lost(); err != nil && !p.lost {
			p.lost = true
			d.failPeer(p, adi.Errorf(adi.ErrOther, "progress", "%s is unreachable: %v", p.where, rootCause(err)))
		}
	}
}

// checkPeers fails the requests that wait on a peer whose process is gone.
func (d *Device) checkPeers() {
	for _, q := range d.live.Scan() {
		d.failPeer(d.peers[q], d.live.Lost(q))
	}
}

// failPeer fails every request that waits on p with err.
func (d *Device) failPeer(p *peer, err error) {
	fail := func(r *adi.Request) {
		if r != nil && !r.Done() {
			r.Complete(adi.Status{Err: err})
		}
	}
	backlog := append(p.out, p.data...)
	p.out, p.data = nil, nil
	for _, it := range backlog {
		fail(it.owner)
		if it.onSent != nil {
			it.onSent(err)
		}
	}
	for id, s := range d.sends {
		if s.p == p {
			delete(d.sends, id)
			d.liveSends--
			if s.big {
				d.liveBig--
			}
			if s.shared {
				d.liveShared.Add(-1)
			}
			fail(s.req)
		}
	}
	for id, rv := range d.recvs {
		if rv.p == p {
			delete(d.recvs, id)
			fail(rv.req)
		}
	}
	for _, r := range d.eng.CancelFrom(p.rank) {
		fail(r)
	}
}
