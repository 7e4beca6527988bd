package netvm

import (
	"fmt"
	"maps"
	"os"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/adimpi/adimpi/adi"
	"github.com/adimpi/adimpi/adi/devkit/liveness"
	"github.com/adimpi/adimpi/internal/shm"
	"github.com/adimpi/adimpi/internal/wire"
	"golang.org/x/sys/unix"
)

func init() { adi.Register("netvm", func() adi.Device { return new(Device) }) }

// The capabilities the device offers besides adi.Device.
var (
	_ adi.Device       = (*Device)(nil)
	_ adi.ShortSender  = (*Device)(nil)
	_ adi.Board        = (*Device)(nil)
	_ adi.OptionHelper = (*Device)(nil)
	_ adi.CrossHost    = (*Device)(nil)
)

// This file is the device: its state, Init and the adi.Device methods, which
// hand messages to the protocol. The rest, by layer: the control ring and
// the transport a peer is reached through (ring.go), the outbox (outbox.go),
// the two protocols (eager.go with rndv.go, and mpin.go), the rendezvous
// data paths (stream.go, offer.go, split.go, scatter.go, vmcopy.go,
// ntpack.go), and the board (board.go).

// idlePolls is how many idle polls of Progress pass between two looks at
// the peers' processes (liveness.Peers.Idle).
const idlePolls = 1024

// protocol matches sends with receives above the rings: matched (eager.go,
// the default) or mpin (mpin.go, eager=0). Both use the device's rings,
// its rendezvous data paths and its receives in Device.recvs.
type protocol interface {
	// send starts send r to p (alive).
	send(p *peer, r *adi.Request) error
	// sendShort sends a small message without a request, if it can now.
	sendShort(ctx uint32, p *peer, tag int, sig uint32, data []byte) bool
	// recv posts receive r.
	recv(r *adi.Request)
	probe(ctx uint32, src, tag int) (adi.Status, bool, error)
	cancelRecv(r *adi.Request) bool
	// handle handles a control message from p.
	handle(p *peer, c *ctl) error
	// poll does the protocol's own work of a progress pass.
	poll()
	// peerGone fails what waits on p, which has exited.
	peerGone(p *peer, fail func(*adi.Request))
	// counters adds the protocol's counters (protocolCounters) to c.
	counters(c map[string]int64)
}

// protocolCounters are the counters of either protocol; Counters reports
// all of them whichever runs, so that runs can be compared.
var protocolCounters = []string{"posted_receives", "unexpected_messages", "inline_receives",
	"mpin_waiting_sends", "mpin_unmatched_rtrs", "mpin_held_receives", "mpin_open_rtrs"}

// peer is one process of the job (this one too) as this process sees it.
type peer struct {
	rank, pid int
	seg       *shm.Segment
	remoteOK  bool      // process_vm_writev into this peer is allowed
	link      shmRing   // control messages to and from a peer on this host (ring.go)
	net       *netLink  // the link to a peer on another host (netlink.go), else nil
	backlog   []*outMsg // messages waiting for room in link, in order

	// offered streams (offer.go)
	claimOut, limitOut *uint64 // in ITS segment: my offered stream's claim, its reader's limit
	claimIn, limitIn   *uint64 // in MY segment: its offered stream's claim, my limit
}

// Device is the netvm device. Create it through the adi registry.
type Device struct {
	rank, size int
	seg        *shm.Segment
	peers      []*peer
	proto      protocol
	matched    *matched // proto, when it is the matched protocol: the direct calls of SendShort, Irecv and drain
	eager      int
	ring       int
	chunk      int
	offRFA     int // MPIN's RFA flags in the segment
	offBoard   int // the board in the segment: its line of words, then two slots (board.go)
	cma        bool
	pk         packer    // packs stream chunks (ntpack.go)
	cur        []cursors // every link's ring cursors, outside Go's heap (fastpath.go)
	curMem     []byte    // their mapping
	lostPeer   bool      // some peer was found gone (the C fast path stays off)

	nextID     uint32
	sends      map[uint32]*outSend // RTS sent, waiting for CTS
	scatters   map[uint32]*outSend // CTS with a layout: waiting for its ctlIov batches
	scratch    []byte              // builds and reads ctlIov batches
	runs       []vrun              // a remote layout being built or read
	lruns      []vrun              // a local layout
	recvs      map[uint32]*rvRecv  // RTR or CTS sent, waiting for data and SC
	pulls      map[uint32]*outSend // split copies: the receiver reads the tail; waiting for its ctlPulled
	split      int                 // smallest contiguous rendezvous message whose copy both sides share (0: never)
	scatterMin int                 // smallest block of a non-contiguous receive that the sender writes in place (0: never)
	pullMin    int                 // smallest non-contiguous receive that reads the sender's buffer itself (0: never)
	sink       []byte              // receives the gap bytes a read takes along (see vmCopy)
	bounce     []byte              // reads of small remote blocks land here first (vmReadBounce)
	offerMin   int                 // smallest stream offered for takeover (0: never)
	streamMin  int                 // smallest contiguous rendezvous receive taken as a stream of chunks (0: never)
	offerQ     []uint32            // receives with offered streams, oldest first
	taken      map[uint32]bool     // taken-over receives whose SC is still to come
	stallAt    atomic.Int64        // unix ns at which the oldest offered stream counts as stalled, 0: none
	stall      time.Duration       // see defaultStall
	stalled    bool                // the last offered stream was taken over and no live stream moved since
	live       *liveness.Peers     // which peers are alive: same-host ones by their process, others by their connection
	in         ctl                 // the control message being handled (a field: handing a local to the protocol would allocate it)
	tookLast   bool                // drain stopped at an eager message that took the last posted receive
	backlogged int                 // peers whose backlog holds messages
	predict    bool                // option predict: guess the next sender, poll its ring first (predict.go)
	pred       predictor

	// the network, when some peer runs on another host (netlink.go)
	ep      *wire.Endpoint
	sleeper *wire.Sleeper       // wakes a doorbell sleeper for frames, with peers on this host too
	direct  *wire.DirectSleeper // with every peer on another host: waiters sleep in the wire
	netDid  bool                // a frame was handled or a link unblocked during the last Poll
	netErr  error               // the first error a frame's handling met
	netGone bool                // some link's connection broke (netLost has work)

	cnt counters
}

// payload returns c's payload, in at most two pieces.
func (p *peer) payload(c *ctl) (a, b []byte) {
	if p.net != nil {
		return p.net.payload(c)
	}
	return p.link.payload(c)
}

// consume frees c's payload once it has been read.
func (p *peer) consume(c *ctl) {
	if p.net == nil {
		p.link.consume(c)
	}
}

// wake rings the peer's doorbell (a peer on another host needs none).
func (p *peer) wake() {
	if p.net == nil {
		p.link.wake()
	}
}

type counters struct {
	eagerMsgs, rndvMsgs, remoteWrites, remoteReads, chunks, ringFull, bytesOut, takeovers int64
	rmaWrites, rmaReads                                                                   int64 // RemoteWrite and RemoteRead calls (rma.go)
}

// Init exports this process's segment, publishes it through the KVS, and
// imports every peer's.
func (d *Device) Init(cfg adi.Config) error {
	d.rank, d.size = cfg.Rank, cfg.Size
	d.live = liveness.New(d.rank, d.size, idlePolls)
	if err := d.parseOptions(cfg); err != nil {
		return err
	}
	mpin := d.eager == 0
	block := offEagerRing + d.ring
	d.offRFA = offPeers + d.size*block
	d.offBoard = (d.offRFA + rfaEntries*d.size*4 + 63) &^ 63
	var err error
	d.seg, err = shm.Export(fmt.Sprintf("adimpi-netvm-%d", d.rank), d.offBoard+boardHead+2*boardSlot)
	if err != nil {
		return err
	}
	// The wire comes first: its Setup publishes this rank's address before
	// the barrier below, after which peers may dial it.
	if d.ep, err = wire.Setup(wire.Job{Rank: d.rank, Size: d.size, Hosts: cfg.Hosts, KVS: cfg.KVS, Prefix: "netvm", Handler: d}); err != nil {
		d.seg.Close()
		return fmt.Errorf("netvm: %w", err)
	}
	if d.ep != nil {
		host, _ := os.Hostname()
		if err := cfg.KVS.Put(fmt.Sprintf("netvm-host-%d", d.rank), host); err != nil {
			return err
		}
	}
	probe := uintptr(unsafe.Pointer(&d.seg.Mem[offProbe]))
	// The ring size and the protocol (eager=0: MPIN's receiver-initiated
	// one) must be the same in every process; the other options are each
	// side's own choices, which the protocol's messages carry.
	me := fmt.Sprintf("%d:%d:%x:%x:%d:%t", os.Getpid(), d.seg.FD, d.seg.Key, probe, d.ring, mpin)
	if err := cfg.KVS.Put(fmt.Sprintf("netvm-%d", d.rank), me); err != nil {
		return err
	}
	if err := cfg.KVS.Barrier(); err != nil {
		return err
	}
	if d.cur, d.curMem, err = newCursors(d.size); err != nil {
		return err
	}
	d.peers = make([]*peer, d.size)
	for r := 0; r < d.size; r++ {
		p := &peer{rank: r, pid: os.Getpid(), seg: d.seg, remoteOK: d.cma}
		if cfg.Hosts != nil && cfg.Hosts[r] != cfg.Hosts[d.rank] {
			host, err := cfg.KVS.Get(fmt.Sprintf("netvm-host-%d", r))
			if err != nil {
				return err
			}
			p.pid, p.seg, p.remoteOK = 0, nil, false
			p.net = &netLink{d: d, ep: d.ep, rank: r, host: host}
			d.peers[r] = p
			d.live.SetHost(r, host)
			continue
		}
		if r != d.rank {
			if err := d.importPeer(cfg, p, mpin); err != nil {
				return err
			}
		}
		mine := offPeers + r*block        // p's block in my segment
		theirs := offPeers + d.rank*block // my block in p's segment
		p.link = newShmRing(d.seg, p.seg, p.pid, mine, theirs, d.ring, &d.pk, &d.cur[r])
		p.claimOut, p.limitOut = p.seg.Uint64(theirs+offClaim), p.seg.Uint64(theirs+offLimit)
		p.claimIn, p.limitIn = d.seg.Uint64(mine+offClaim), d.seg.Uint64(mine+offLimit)
		d.peers[r] = p
		d.live.SetPid(r, p.pid)
	}
	d.sends = map[uint32]*outSend{}
	d.scatters = map[uint32]*outSend{}
	d.scratch = make([]byte, d.chunk)
	d.recvs = map[uint32]*rvRecv{}
	d.pulls = map[uint32]*outSend{}
	d.taken = map[uint32]bool{}
	if mpin {
		d.proto = newMpin(d)
	} else {
		d.matched = &matched{d: d}
		d.proto = d.matched
	}
	if d.ep != nil {
		d.startSleeper()
	}
	return nil
}

// importPeer reads what peer p published, checks that it runs the same ring
// and protocol (mpin), and maps its segment.
func (d *Device) importPeer(cfg adi.Config, p *peer, mpin bool) error {
	r := p.rank
	v, err := cfg.KVS.Get(fmt.Sprintf("netvm-%d", r))
	if err != nil {
		return err
	}
	var fd, ring int
	var key uint64
	var paddr uintptr
	var theirMpin bool
	if _, err := fmt.Sscanf(v, "%d:%d:%x:%x:%d:%t", &p.pid, &fd, &key, &paddr, &ring, &theirMpin); err != nil {
		return fmt.Errorf("netvm: rank %d published %q: %v", r, v, err)
	}
	if ring != d.ring {
		return fmt.Errorf("netvm: rank %d uses ring=%d, this rank ring=%d; options must agree", r, ring, d.ring)
	}
	if theirMpin != mpin {
		return fmt.Errorf("netvm: rank %d runs the %s protocol, this rank the %s one (option eager=0 is MPIN's); options must agree", r, protocolName(theirMpin), protocolName(mpin))
	}
	if p.seg, err = shm.Import(p.pid, fd, key); err != nil {
		return fmt.Errorf("netvm: rank %d: %w", r, err)
	}
	p.remoteOK = d.cma && shm.CanRemoteWrite(p.pid, paddr)
	return nil
}

// Finalize drains pending control messages and releases the segments.
func (d *Device) Finalize() error {
	var err error
	if d.ep != nil {
		d.drainNet()
		if d.sleeper != nil {
			d.sleeper.Stop()
		}
		if d.direct != nil {
			d.direct.Stop()
		}
		err = d.ep.Close()
	}
	for _, p := range d.peers {
		if p.seg != d.seg && p.seg != nil {
			if cerr := p.seg.Close(); err == nil {
				err = cerr
			}
		}
	}
	if cerr := d.seg.Close(); err == nil {
		err = cerr
	}
	if d.curMem != nil {
		if cerr := unix.Munmap(d.curMem); err == nil {
			err = cerr
		}
	}
	return err
}

// Counters reports the device's live objects and traffic.
func (d *Device) Counters() map[string]int64 {
	backlog := 0
	for _, p := range d.peers {
		backlog += len(p.backlog)
	}
	c := map[string]int64{
		"rendezvous_sends":    int64(len(d.sends) + len(d.pulls)),
		"rendezvous_receives": int64(len(d.recvs)),
		"backlog":             int64(backlog),
		"eager_messages":      d.cnt.eagerMsgs,
		"rendezvous_messages": d.cnt.rndvMsgs,
		"remote_writes":       d.cnt.remoteWrites,
		"data_chunks":         d.cnt.chunks,
		"ring_full_waits":     d.cnt.ringFull,
		"bytes_sent":          d.cnt.bytesOut,
		"stream_takeovers":    d.cnt.takeovers,
		"nt_chunks":           d.pk.chunks,
		"nt_switches":         d.pk.switches,
		"remote_reads":        d.cnt.remoteReads,
		"rma_remote_writes":   d.cnt.rmaWrites,
		"rma_remote_reads":    d.cnt.rmaReads,
		"predict_messages":    d.pred.msgs,
		"predict_hits":        d.pred.hits,
		"predict_fast_passes": d.pred.fast,
	}
	for _, k := range protocolCounters {
		c[k] = 0
	}
	d.proto.counters(c)
	if d.ep != nil {
		maps.Copy(c, d.ep.XDPCounters())
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

// Isend starts a send.
func (d *Device) Isend(r *adi.Request) error {
	p := d.peers[r.Peer]
	if !d.live.Alive(r.Peer) {
		return d.live.Exited("send", r.Peer)
	}
	return d.proto.send(p, r)
}

// SendShort sends an eager message without a request (adi.ShortSender):
// payload and control message go into peer's rings at once, if they have
// room and nothing waits in the backlog before them. To a peer on another
// host they go as one frame, if the wire hands it to the kernel at once
// (netLink.putShort); otherwise the send gets a request: a frame that
// waits in the endpoint leaves only while this process polls, so such a
// send completes once the kernel has its frame (netlink.go).
func (d *Device) SendShort(ctx uint32, peer, tag int, sig uint32, data []byte) bool {
	p := d.peers[peer]
	if !d.live.Alive(peer) {
		return false
	}
	if p.net != nil {
		if d.matched == nil || len(data) > d.eager || len(p.backlog) != 0 || !p.net.putShort(ctx, int32(tag), sig, data) {
			return false
		}
		d.cnt.eagerMsgs++
		d.cnt.bytesOut += int64(len(data))
		return true
	}
	if d.matched != nil {
		return d.matched.sendShort(ctx, p, tag, sig, data) // no dispatch
	}
	return d.proto.sendShort(ctx, p, tag, sig, data)
}

// Irecv posts a receive.
func (d *Device) Irecv(r *adi.Request) error {
	if r.Peer != adi.AnySource && !d.live.Alive(r.Peer) {
		return d.live.Exited("receive", r.Peer)
	}
	if d.matched != nil {
		d.matched.recv(r) // every receive of the default protocol: no dispatch
		return nil
	}
	d.proto.recv(r)
	return nil
}

// Iprobe looks for a matching message that has arrived.
func (d *Device) Iprobe(ctx uint32, src, tag int) (adi.Status, bool, error) {
	return d.proto.probe(ctx, src, tag)
}

// CancelRecv withdraws r if no message has matched it.
func (d *Device) CancelRecv(r *adi.Request) bool { return d.proto.cancelRecv(r) }

// Progress flushes backlogs and handles every control message that arrived.
func (d *Device) Progress() (bool, error) {
	did := false
	if d.ep != nil {
		if err := d.pollNet(); err != nil {
			return true, err
		}
		did = d.netDid
	}
	// The predicted sender's ring first (predict.go): when it brings
	// messages and no backlog waits, the pass leaves the other rings
	// alone, up to fullScanEvery passes in a row.
	fast := false
	if g := d.pred.guess(); g >= 0 && d.backlogged == 0 && d.pred.skipped < fullScanEvery {
		if p := d.peers[g]; p.net == nil && p.link.ready() {
			n, err := d.drain(p)
			if err != nil {
				return true, err
			}
			fast = n > 0
		}
	}
	if fast {
		did = true
		d.pred.skipped++
		d.pred.fast++
	} else {
		d.pred.skipped = 0
		d.tookLast = false
		for _, p := range d.peers {
			if len(p.backlog) > 0 && d.flush(p) {
				did = true
			}
			if p.net != nil || d.tookLast || !p.link.ready() {
				// Empty (ready, inlined: drain's call only for a
				// message), or left for the next Progress once the
				// last posted receive is taken (drain).
				continue
			}
			n, err := d.drain(p)
			if err != nil {
				return true, err
			}
			if n > 0 {
				did = true
			}
		}
	}
	if d.matched == nil {
		d.proto.poll() // the matched protocol's has nothing to do: no call
	}
	if len(d.offerQ) > 0 && d.takeOver() {
		did = true
	}
	if did {
		d.live.Busy()
	} else if d.live.Idle() {
		d.checkPeers()
	}
	return did, nil
}

// drain handles every control message that p's ring holds and reports how
// many there were; with prediction on it tells the predictor who sent them.
// It stops early, setting tookLast, once an eager message takes the last
// posted receive (matched.eagerIn): the rest of p's ring, and the other
// rings, wait for the next Progress.
func (d *Device) drain(p *peer) (int, error) {
	if p.rank == d.rank && p.link.cur.outTail == p.link.cur.inHead {
		return 0, nil // this process's own ring, which it writes itself: empty
	}
	c := &d.in
	n := 0
	for p.link.next(c) {
		if d.predict {
			d.pred.observe(p.rank)
		}
		if c.typ == ctlEager && d.matched != nil {
			// The stream of small messages: no dispatch. Once the last
			// posted receive is taken, the next slot is left for the
			// next Progress (eagerIn).
			if d.matched.eagerIn(p, c) {
				d.tookLast = true
				return n + 1, nil
			}
		} else if err := d.proto.handle(p, c); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// Seq is the doorbell every writer bumps.
func (d *Device) Seq() uint32 { return atomic.LoadUint32(d.seg.Uint32(offDoorbell)) }

// Sleep waits on the doorbell futex until it moves from seq or d passes.
func (d *Device) Sleep(seq uint32, timeout time.Duration) {
	if d.direct != nil {
		d.direct.Sleep(seq, d.sleepFor(timeout)) // frames wake it; the doorbell too
		d.live.Slept()
		return
	}
	sl := d.seg.Uint32(offSleepers)
	atomic.AddUint32(sl, 1)
	if d.sleeper != nil {
		d.sleeper.Arm() // a frame rings the doorbell too
	}
	_ = shm.FutexWait(d.seg.Uint32(offDoorbell), seq, d.sleepFor(timeout))
	d.live.Slept()
	atomic.AddUint32(sl, ^uint32(0))
}

// startSleeper starts the goroutine that wakes a sleeping waiter for the
// network; when every other rank runs on another host, the waiter sleeps
// in the wire itself and the goroutine watches the doorbell, which only
// this process rings then (wire.DirectSleeper).
func (d *Device) startSleeper() {
	for _, p := range d.peers {
		if p.rank != d.rank && p.net == nil {
			d.sleeper = d.ep.NewSleeper(d.Wake)
			return
		}
	}
	d.direct = d.ep.NewDirectSleeper(d.seg.Uint32(offDoorbell), d.seg.Uint32(offSleepers))
}

// Wake rings this process's own doorbell.
func (d *Device) Wake() { ring(d.seg.Uint32(offDoorbell), d.seg.Uint32(offSleepers)) }

// checkPeers fails the requests that wait on a peer on this host whose
// process is gone (peers on other hosts: netLost).
func (d *Device) checkPeers() {
	for _, q := range d.live.Scan() {
		d.peerGone(d.peers[q], d.live.Lost(q))
	}
}

// peerGone fails every request that depends on peer p, no longer alive,
// with error gone.
func (d *Device) peerGone(p *peer, gone error) {
	d.lostPeer = true
	fail := func(r *adi.Request) {
		if r != nil && !r.Done() {
			r.Complete(adi.Status{Err: gone})
		}
	}
	for _, m := range p.backlog {
		fail(m.req)
	}
	if len(p.backlog) > 0 {
		d.backlogged--
	}
	p.backlog = nil
	for id, s := range d.sends {
		if s.peer == p {
			delete(d.sends, id)
			fail(s.req)
		}
	}
	for id, s := range d.pulls {
		if s.peer == p {
			delete(d.pulls, id)
			fail(s.req)
		}
	}
	for id, rv := range d.recvs {
		if rv.src == p.rank {
			delete(d.recvs, id)
			fail(rv.req)
		}
	}
	if p.net != nil {
		for _, dn := range p.net.dones {
			fail(dn.req)
		}
		p.net.dones = nil
	}
	d.proto.peerGone(p, fail)
}

// pollNet reads and handles what the network brought, and fails what
// depends on a peer whose connection broke; such a loss ends the job (the
// error returned), as a rank's death does.
func (d *Device) pollNet() error {
	d.netDid = false
	d.ep.Poll()
	if err := d.netErr; err != nil {
		d.netErr = nil
		return err
	}
	return d.netLost()
}

// drainNet gives frames still queued for the network (eager messages whose
// sends completed) up to drainWait to leave before the endpoint closes.
func (d *Device) drainNet() {
	deadline := time.Now().Add(drainWait)
	for d.ep.Pending() > 0 && time.Now().Before(deadline) {
		d.ep.Poll()
		d.ep.Wait(time.Millisecond)
	}
}

// drainWait bounds Finalize's wait for queued frames.
const drainWait = 10 * time.Second

// protocolName names the protocol an eager setting selects.
func protocolName(mpin bool) string {
	if mpin {
		return "MPIN receiver-initiated (eager=0)"
	}
	return "eager/rendezvous"
}

// CompletesUnderLock declares adi.LockedCompleter: netvm completes requests
// only inside the core's calls into it (it runs no goroutine of its own).
func (d *Device) CompletesUnderLock() {}
