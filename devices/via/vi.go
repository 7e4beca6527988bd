package via

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/adimpi/adimpi/internal/shm"
	"golang.org/x/sys/unix"
)

// ErrQueueFull is returned by a post when the work queue has no room.
var ErrQueueFull = errors.New("via: work queue full")

// ErrTimeout is returned by the Wait calls when the timeout passes.
var ErrTimeout = errors.New("via: wait timed out")

// VI is a virtual interface: a send queue and a receive queue, connected to
// one VI of a peer NIC (or of this one).
type VI struct {
	nic *NIC
	id  int

	mu         sync.Mutex // the application side: posting and completion lists
	sendPosted descRing
	recvPosted descRing
	// rqApp counts the receive descriptors RecvDone has returned: the
	// oldest posted one is in slot rqApp of the receive queue, where
	// RecvDone looks for its completion without taking mu.
	rqApp  atomic.Uint64
	sendCQ *CQ
	recvCQ *CQ

	// D1 doorbell queue: written by the application, read by the engine.
	sq     []sendEntry
	sqTail atomic.Uint64
	sqHead uint64 // engine only

	peer   *view  // connected peer NIC on this host
	net    *netVI // or the connection to a NIC on another host (net.go)
	peerVI int
	conn   atomic.Bool

	rqDesc []*Descriptor // the receive queue's descriptors, by slot (for this NIC's engine)
	// rxXlate is the NIC's translation register per receive-queue slot
	// (engine only; a VI to another host; see translateRecv).
	rxXlate []lastXlate

	pend []sendEntry // engine only: D2 entries dispatched to this VI

	// The connected peer VI's receive queue as this NIC's engine, its only
	// consumer, keeps it (as a NIC keeps queue pointers in its registers):
	// the head it has consumed up to, the tail it last read from the
	// peer's segment, and the peer's receive CQ. Reading the tail only when
	// the descriptors it knows of run out, and not writing the head back,
	// spares a cache line's trip between the processes per message.
	rqHead, rqTail uint64
	peerCQ         uint32
}

// sendEntry is a posted send-queue descriptor as the NIC holds it: with
// desccache=on a copy of what the NIC needs (written at post time, as a host
// would write it into NIC memory), with desccache=off only the descriptor's
// address.
type sendEntry struct {
	d      *Descriptor
	vi     *VI // D2: the VI handle that travels with the descriptor
	cached bool
	ctl    uint32
	imm    uint32
	rh     MemHandle
	raddr  uint64
	segs   []DataSegment
}

// CQ is a completion queue: it merges the completions of the work queues
// associated with it.
type CQ struct {
	nic   *NIC
	id    int
	head  uint64 // CQ1: consumer position (application only)
	calls uint32 // Done calls (application only)
	mu    sync.Mutex
	wqs   []wq // CQ2: the queues to poll
	next  int
}

type wq struct {
	vi   *VI
	recv bool
}

// CreateCQ makes a completion queue.
func (n *NIC) CreateCQ() (*CQ, error) {
	n.viMu.Lock()
	defer n.viMu.Unlock()
	if len(n.cqs) >= n.o.MaxCQs {
		return nil, fmt.Errorf("via: CreateCQ: all %d completion queues are in use", n.o.MaxCQs)
	}
	cq := &CQ{nic: n, id: len(n.cqs)}
	n.cqs = append(n.cqs, cq)
	return cq, nil
}

// CreateVI makes a VI whose send and receive queues report to sendCQ and
// recvCQ (either may be nil: completions are then found with SendDone and
// RecvDone only).
func (n *NIC) CreateVI(sendCQ, recvCQ *CQ) (*VI, error) {
	n.viMu.Lock()
	defer n.viMu.Unlock()
	if len(n.vis) >= n.o.MaxVIs {
		return nil, fmt.Errorf("via: CreateVI: all %d VIs are in use", n.o.MaxVIs)
	}
	vi := &VI{nic: n, id: len(n.vis), sendCQ: sendCQ, recvCQ: recvCQ, rqDesc: make([]*Descriptor, n.lay.rqLen)}
	if n.o.Doorbell == D1 {
		vi.sq = make([]sendEntry, n.o.SendQueue)
	}
	n.vis = append(n.vis, vi)
	snap := append([]*VI(nil), n.vis...)
	n.visSnap.Store(&snap)
	off := n.self.viOff(vi.id)
	if recvCQ != nil {
		atomic.StoreUint32(n.self.u32(off+20), uint32(recvCQ.id+1))
		recvCQ.mu.Lock()
		recvCQ.wqs = append(recvCQ.wqs, wq{vi, true})
		recvCQ.mu.Unlock()
	}
	if sendCQ != nil {
		sendCQ.mu.Lock()
		sendCQ.wqs = append(sendCQ.wqs, wq{vi, false})
		sendCQ.mu.Unlock()
	}
	return vi, nil
}

// ID is the VI's number on its NIC, which a peer passes to Connect.
func (vi *VI) ID() int { return vi.id }

// NIC is the VI's NIC.
func (vi *VI) NIC() *NIC { return vi.nic }

// viewKey names a NIC: the process that runs it and its segment's
// descriptor there (one process may run several NICs, one per rank of a
// job inside a test).
type viewKey struct{ pid, fd int }

// importView finds or maps the NIC at addr.
func (n *NIC) importView(addr string) (*view, error) {
	var pid, fd int
	var key uint64
	var probe uintptr
	if _, err := fmt.Sscanf(strings.TrimSpace(addr), "%d:%d:%x:%x", &pid, &fd, &key, &probe); err != nil {
		return nil, fmt.Errorf("via: NIC address %q: %v", addr, err)
	}
	n.viewMu.Lock()
	defer n.viewMu.Unlock()
	if v := n.views[viewKey{pid, fd}]; v != nil {
		return v, nil
	}
	seg, err := shm.Import(pid, fd, key)
	if err != nil {
		return nil, fmt.Errorf("via: NIC %s: %w", addr, err)
	}
	if !shm.CanRemoteWrite(pid, probe) {
		seg.Close()
		return nil, fmt.Errorf("via: NIC %s: process_vm_writev into pid %d is not permitted (the NIC needs it to move data)", addr, pid)
	}
	v := &view{pid: pid, seg: seg}
	copy(v.lay.words(), (*[16]uint32)(unsafe.Pointer(&seg.Mem[offLayout]))[:])
	if w := atomic.LoadUint64(seg.Uint64(offDesign)); w != n.o.designWord() {
		seg.Close()
		return nil, fmt.Errorf("via: NIC %s uses different design options than this NIC (%s); every NIC of a job must agree", addr, n.o)
	}
	v.o = n.o
	v.o.TLBSize = int(v.lay.tlbSize)
	v.lay.stage = atomic.LoadUint32(seg.Uint32(offStage))
	if uint64(v.lay.stage)+stageBytes > uint64(len(seg.Mem)) {
		v.lay.stage = 0
	}
	if v.lay.total > v.lay.host {
		v.hostVA = atomic.LoadUint64(seg.Uint64(offHostVA))
	}
	n.views[viewKey{pid, fd}] = v
	return v, nil
}

// Connect connects vi to VI peerVI of the NIC at peerAddr (its Address).
// Both sides call Connect, each naming the other; a VI may be connected to
// a VI of the same NIC (loopback).
func (vi *VI) Connect(peerAddr string, peerVI int) error {
	if vi.conn.Load() {
		return errors.New("via: Connect: the VI is already connected")
	}
	v, err := vi.nic.importView(peerAddr)
	if err != nil {
		return err
	}
	if peerVI < 0 || uint32(peerVI) >= v.lay.maxVIs {
		return fmt.Errorf("via: Connect: VI %d does not exist at %s", peerVI, peerAddr)
	}
	vi.peer, vi.peerVI = v, peerVI
	vi.conn.Store(true)
	n := vi.nic
	n.viMu.Lock()
	act := append(append([]*VI(nil), *n.active.Load()...), vi)
	n.active.Store(&act)
	n.viMu.Unlock()
	return nil
}

// prepare checks a descriptor's data segments against the registered
// memory and, under AT1, translates them in the kernel.
func (vi *VI) prepare(op string, d *Descriptor) error {
	n := vi.nic
	for k, s := range d.DS {
		if _, err := n.checkSeg(op, k, s); err != nil {
			return err
		}
	}
	d.phys = d.phys[:0]
	if n.o.AT == AT1 {
		n.kernelCrossing()
		for _, s := range d.DS {
			d.phys = hostTranslate(n.region(s.Handle), s, d.phys)
		}
	}
	return nil
}

// nicSegs are the segments the NIC works from: the host's translation
// (AT1) or the virtual ones.
func (d *Descriptor) nicSegs(at Translation) []DataSegment {
	if at == AT1 {
		return d.phys
	}
	return d.DS
}

// PostSend posts d on the send queue and rings the doorbell. d's operation
// is OpSend, OpRDMAWrite or OpRDMARead; every data segment must lie in
// registered memory of this NIC.
func (vi *VI) PostSend(d *Descriptor) error {
	n := vi.nic
	t0 := n.postT.start()
	switch d.Op() {
	case OpSend:
	case OpRDMAWrite, OpRDMARead:
		if d.RemoteHandle == 0 {
			return errors.New("via: PostSend: an RDMA descriptor needs an address segment (RemoteHandle, RemoteAddr)")
		}
	default:
		return fmt.Errorf("via: PostSend: operation %d is not a send, RDMA write or RDMA read", d.Op())
	}
	if !vi.conn.Load() {
		return errors.New("via: PostSend: the VI is not connected")
	}
	if err := vi.prepare("PostSend", d); err != nil {
		return err
	}
	total := uint64(0)
	for _, s := range d.DS {
		total += uint64(s.Len)
	}
	if total >= 1<<32 {
		return fmt.Errorf("via: PostSend: %d bytes exceed a descriptor's 32-bit length", total)
	}
	d.Length = uint32(total)
	atomic.StoreUint32(&d.Status, 0)
	e := sendEntry{d: d, vi: vi}
	if n.o.DescCache {
		e.cached, e.ctl, e.imm, e.rh, e.raddr = true, d.Control, d.Imm, d.RemoteHandle, d.RemoteAddr
	}
	vi.mu.Lock()
	if vi.sendPosted.len() >= n.o.SendQueue {
		vi.mu.Unlock()
		return ErrQueueFull
	}
	vi.sendPosted.push(d)
	if vi.net != nil {
		vi.net.posted.Add(1)
	}
	if n.o.Doorbell == D1 {
		// The entry's segment copy reuses the slot's: the descriptor that
		// held the slot before is complete (at most SendQueue are posted),
		// and the engine is done with an entry once it completes it.
		t := vi.sqTail.Load()
		slot := &vi.sq[t%uint64(len(vi.sq))]
		if e.cached {
			e.segs = append(slot.segs[:0], d.nicSegs(n.o.AT)...)
		}
		*slot = e
		vi.sqTail.Store(t + 1)
		vi.mu.Unlock()
	} else {
		if e.cached {
			e.segs = append([]DataSegment(nil), d.nicSegs(n.o.AT)...)
		}
		vi.mu.Unlock()
		// D2: through the kernel into the one central queue.
		n.kernelCrossing()
		n.central.mu.Lock()
		n.central.q = append(n.central.q, e)
		n.central.mu.Unlock()
	}
	n.cnt.posts.Add(1)
	n.postT.stop(t0, &n.cnt.postNs) // the doorbell's wake-up is not the post's work
	if n.inline(vi, d) {
		return nil
	}
	n.self.ringNIC()
	return nil
}

// inlineMax is the longest send the doorbell executes inline (NIC.inline):
// an eager MPI message with its envelope. Longer transfers (RDMA, the
// rendezvous) are left to the engine's passes.
const inlineMax = 1 << 15

// inline is the doorbell of an idle NIC: when no engine pass runs, a send
// descriptor is executed at once, on the posting thread, as software VIA
// does the NIC's work in the kernel on behalf of the process that rang
// (see doc.go). The descriptor went through the send queue like any
// other, and the VI's older entries go first. On a VI connected to
// another host its frames go to the wire here, where they would wait for
// the waiter's next pass (after MPI_Send returned and the next call began
// to wait) — on the path of every message across hosts. It reports
// whether nothing is left for the engine, so that the doorbell need not
// wake it.
func (n *NIC) inline(vi *VI, d *Descriptor) bool {
	if n.o.Doorbell != D1 || d.Op() != OpSend || d.Length > inlineMax || !n.eng.mu.TryLock() {
		return false
	}
	// The doorbell's work is the application assisting the engine, as
	// Help's is: it keeps the idle engine asleep and off the lock
	// (assisted), which an engine thread preempted while holding it
	// would keep from the next post for a time slice.
	if n.helps++; n.helps%64 == 0 || n.eng.lastAssist.Load() == 0 {
		n.eng.lastAssist.Store(time.Now().UnixNano())
	}
	// Counted as taken up, not as completed: a send to another host
	// completes later, with the peer's acknowledgement.
	t0 := n.cnt.taken.Load()
	_, stalled := n.runD1(vi)
	n.pc.inline += n.cnt.taken.Load() - t0
	n.eng.mu.Unlock()
	return !stalled
}

// PostRecv posts d on the receive queue. Its data segments are the
// scatter list the next arriving message fills.
func (vi *VI) PostRecv(d *Descriptor) error {
	n := vi.nic
	t0 := n.postT.start()
	n.cnt.recvPosts.Add(1)
	d.Control = d.Control&^0xff | OpRecv
	if err := vi.prepare("PostRecv", d); err != nil {
		return err
	}
	atomic.StoreUint32(&d.Status, 0)
	d.Length = 0
	segs := d.nicSegs(n.o.AT)
	vi.mu.Lock()
	if vi.recvPosted.len() >= n.o.RecvQueue {
		vi.mu.Unlock()
		return ErrQueueFull
	}
	off := n.self.viOff(vi.id)
	t := atomic.LoadUint64(n.self.u64(off + 8))
	s := off + viHdrSize + uint32(t%uint64(n.lay.rqLen))*slotSize
	*n.self.u64(s) = uint64(uintptr(unsafe.Pointer(d)))
	*n.self.u32(s + 8) = uint32(len(segs))
	cached := uint32(0)
	if n.o.DescCache && len(segs) <= slotSegs {
		cached = 1
		for k, sg := range segs {
			*(*DataSegment)(unsafe.Pointer(&n.seg.Mem[s+slotSeg0+uint32(k)*16])) = sg
		}
	}
	*n.self.u32(s + 12) = cached
	d.comp = (*[3]uint32)(unsafe.Pointer(&n.seg.Mem[s+slotComp]))
	atomic.StoreUint32(&d.comp[2], 0)
	vi.rqDesc[t%uint64(len(vi.rqDesc))] = d
	vi.recvPosted.push(d)
	atomic.StoreUint64(n.self.u64(off+8), t+1)
	vi.mu.Unlock()
	n.postT.stop(t0, &n.cnt.postNs)
	// This NIC holds frames from another host that waited for it, or the
	// VI's connection is broken (the engine completes it in error).
	if vi.net != nil && (vi.net.holding.Load() || vi.net.lost.Load() != nil) {
		n.self.ringNIC()
		return nil
	}
	// A peer NIC that found no receive descriptor waits for this one.
	if atomic.LoadUint32(n.self.u32(off+16)) != 0 && atomic.SwapUint32(n.self.u32(off+16), 0) != 0 && vi.peer != nil {
		vi.peer.ringNIC()
	}
	return nil
}

// SendDone returns the oldest send descriptor if the NIC has completed it
// (VipSendDone), or nil.
func (vi *VI) SendDone() *Descriptor {
	vi.mu.Lock()
	defer vi.mu.Unlock()
	if d := vi.sendPosted.front(); d == nil || !d.Done() {
		return nil
	}
	return vi.sendPosted.pop()
}

// RecvDone returns the oldest receive descriptor if a message has filled
// it (VipRecvDone), or nil.
//
// A poll that finds nothing costs no lock: on a VI connected on this host
// the completion of the oldest posted descriptor appears in its
// receive-queue slot, which is read first; on one connected to another
// host the NIC counts the descriptors it completed, against those
// returned.
func (vi *VI) RecvDone() *Descriptor {
	if vi.net == nil && !vi.recvReady() || vi.net != nil && vi.net.recvs.Load() == vi.rqApp.Load() {
		return nil
	}
	vi.mu.Lock()
	defer vi.mu.Unlock()
	if d := vi.recvPosted.front(); d == nil || !d.Done() {
		return nil
	}
	vi.rqApp.Add(1)
	return vi.recvPosted.pop()
}

// recvReady reports whether the receive-queue slot of the oldest posted
// receive descriptor holds its completion (a NIC of this host writes it
// there; see writeBack).
func (vi *VI) recvReady() bool {
	n := vi.nic
	off := n.self.viOff(vi.id)
	h := vi.rqApp.Load()
	if h == atomic.LoadUint64(n.self.u64(off+8)) {
		return false
	}
	s := off + viHdrSize + uint32(h%uint64(n.lay.rqLen))*slotSize
	return atomic.LoadUint32(n.self.u32(s+slotComp+8))&StatusDone != 0
}

// descRing is a work queue's posted descriptors, oldest first, in a ring
// that grows to the queue's length once: a post and its completion move
// no memory.
type descRing struct {
	d       []*Descriptor
	head, n int
}

func (r *descRing) len() int { return r.n }

func (r *descRing) push(d *Descriptor) {
	if r.n == len(r.d) {
		grown := make([]*Descriptor, max(8, 2*len(r.d)))
		for i := range r.n {
			grown[i] = r.d[(r.head+i)%len(r.d)]
		}
		r.d, r.head = grown, 0
	}
	r.d[(r.head+r.n)%len(r.d)] = d
	r.n++
}

// front is the oldest descriptor, or nil.
func (r *descRing) front() *Descriptor {
	if r.n == 0 {
		return nil
	}
	return r.d[r.head]
}

// pop removes and returns the oldest descriptor.
func (r *descRing) pop() *Descriptor {
	d := r.d[r.head]
	r.d[r.head] = nil
	r.head = (r.head + 1) % len(r.d)
	r.n--
	return d
}

// Pending reports how many send and receive descriptors are posted and not
// yet taken back with SendDone/RecvDone.
func (vi *VI) Pending() (sends, recvs int) {
	vi.mu.Lock()
	defer vi.mu.Unlock()
	return vi.sendPosted.len(), vi.recvPosted.len()
}

func (vi *VI) headDone(recv bool) bool {
	vi.mu.Lock()
	defer vi.mu.Unlock()
	q := &vi.sendPosted
	if recv {
		q = &vi.recvPosted
	}
	d := q.front()
	return d != nil && d.Done()
}

// SendWait blocks until the oldest send descriptor completes
// (VipSendWait): it polls briefly, then sleeps on the NIC's completion
// futex. timeout 0 waits for ever.
func (vi *VI) SendWait(timeout time.Duration) (*Descriptor, error) {
	var d *Descriptor
	err := vi.nic.wait(timeout, func() bool { d = vi.SendDone(); return d != nil })
	return d, err
}

// RecvWait blocks until a message fills the oldest receive descriptor
// (VipRecvWait).
func (vi *VI) RecvWait(timeout time.Duration) (*Descriptor, error) {
	var d *Descriptor
	err := vi.nic.wait(timeout, func() bool { d = vi.RecvDone(); return d != nil })
	return d, err
}

// Done reports a work queue of the CQ with a completed descriptor
// (VipCQDone): the VI and whether it is its receive queue. Take the
// descriptor with SendDone/RecvDone. A work queue associated with a CQ
// should have its completions found through the CQ: under CQ1 every
// completion leaves an entry there until Done takes it. Under CQ1 the NIC appended an entry
// per completion; under CQ2 Done polls every associated queue's head.
func (cq *CQ) Done() (vi *VI, recv bool, ok bool) {
	// One check in sampleEvery is timed and counted (sampleEvery times):
	// an atomic add per check would cost more than the check itself.
	// The count is the consumer's alone, like head.
	if cq.calls++; !cq.nic.o.Timers || cq.calls%sampleEvery != 0 {
		if cq.calls%sampleEvery == 0 {
			cq.nic.cnt.cqCalls.Add(sampleEvery)
		}
		return cq.done()
	}
	n := cq.nic
	t0 := nanotime()
	vi, recv, ok = cq.done()
	n.cnt.cqNs.Add((nanotime() - t0) * sampleEvery)
	n.cnt.cqCalls.Add(sampleEvery)
	return vi, recv, ok
}

// done is Done without its timer.
func (cq *CQ) done() (vi *VI, recv bool, ok bool) {
	n := cq.nic
	if n.o.CQ == CQ1 {
		off := n.self.cqOff(cq.id)
		e := n.self.u64(off + cqHdrSize + uint32(cq.head%uint64(n.lay.cqLen))*8)
		v := atomic.LoadUint64(e)
		if v == 0 {
			return nil, false, false
		}
		atomic.StoreUint64(e, 0)
		cq.head++
		atomic.StoreUint64(n.self.u64(off+64), cq.head)
		v--
		return (*n.visSnap.Load())[v>>1], v&1 != 0, true
	}
	cq.mu.Lock()
	wqs := cq.wqs
	start := cq.next
	cq.mu.Unlock()
	for k := range wqs {
		i := (start + k) % len(wqs)
		if wqs[i].vi.headDone(wqs[i].recv) {
			cq.mu.Lock()
			cq.next = i + 1
			cq.mu.Unlock()
			return wqs[i].vi, wqs[i].recv, true
		}
	}
	return nil, false, false
}

// Wait blocks until Done has something to report (VipCQWait).
func (cq *CQ) Wait(timeout time.Duration) (vi *VI, recv bool, err error) {
	err = cq.nic.wait(timeout, func() bool {
		var ok bool
		vi, recv, ok = cq.Done()
		return ok
	})
	return vi, recv, err
}

// cqAppend is CQ1: the NIC writes an entry into CQ id of NIC v.
func (v *view) cqAppend(id uint32, vi int, recv bool) {
	off := v.cqOff(int(id - 1))
	t := atomic.AddUint64(v.u64(off), 1) - 1
	val := uint64(vi)<<1 + 1
	if recv {
		val++
	}
	atomic.StoreUint64(v.u64(off+cqHdrSize+uint32(t%uint64(v.lay.cqLen))*8), val)
}

// Seq is the NIC's completion sequence word: it moves whenever this
// process's NIC completes a descriptor, and whenever a peer's NIC
// completes one while a waiter sleeps (see Sleep).
func (n *NIC) Seq() uint32 { return atomic.LoadUint32(n.self.u32(offAppBell)) }

// Sleep blocks until Seq differs from seq or timeout passes. It first
// announces the sleep, which makes the peers' NICs move Seq, then looks
// once more at the CQs and the oldest descriptor of every work queue, and
// returns at once if something completed in the meantime: a peer that
// completed it before the announcement did not move Seq.
func (n *NIC) Sleep(seq uint32, timeout time.Duration) {
	if port := n.port.Load(); port != nil && runtime.GOMAXPROCS(0) == 1 {
		n.sleepOnPort(port, seq, timeout)
		return
	}
	if n.eng.lastAssist.Swap(0) != 0 && atomic.LoadUint32(n.self.u32(offNICSleep)) == sleepAssisted {
		// The engine takes the network back: wake it into epoll.
		atomic.AddUint32(n.self.u32(offNICBell), 1)
		n.wakeEngine()
		_ = shm.FutexWake(n.self.u32(offNICBell), 1)
	}
	sl := n.self.u32(offAppSleep)
	atomic.AddUint32(sl, 1)
	if !n.completed() {
		_ = shm.FutexWait(n.self.u32(offAppBell), seq, timeout)
	}
	atomic.AddUint32(sl, ^uint32(0))
}

// assistedSleep is the engine's sleep while the application assists: at
// most d, or until Sleep or Close wakes it (wakeEngine); it reports
// whether the timeout ended it. It
// parks the goroutine on a Go timer rather than in a futex system call:
// the runtime's monitor takes the processor of a goroutine blocked in a
// system call for more than a few microseconds and then polls every 20 µs
// for a millisecond, so a futex sleep renewed every assistedFor kept it
// polling without end, each of its wake-ups taking a core from a spinning
// rank for a moment. Peers' rings do not end this sleep; while the
// application assists its passes serve them.
func (n *NIC) assistedSleep(d time.Duration) bool {
	a := &n.asleep
	if a.timer == nil {
		a.timer = time.NewTimer(d)
	} else {
		a.timer.Reset(d)
	}
	select {
	case <-a.timer.C:
		return true
	case <-a.wake:
		a.timer.Stop()
		return false
	}
}

// assistedSleeper is what assistedSleep waits on.
type assistedSleeper struct {
	wake  chan struct{} // wakeEngine's token
	timer *time.Timer   // engine only
	next  time.Duration // engine only: the next assisted sleep across hosts (0: assistedFor)
}

// wakeEngine ends the engine's assistedSleep, now or when it next sleeps
// so.
func (n *NIC) wakeEngine() {
	select {
	case n.asleep.wake <- struct{}{}:
	default:
	}
}

// completed reports whether a CQ holds an entry or the oldest descriptor
// of a work queue is complete: what a waiter looks at once more after it
// announced its sleep.
func (n *NIC) completed() bool {
	if n.o.CQ == CQ1 {
		n.viMu.Lock()
		cqs := n.cqs
		n.viMu.Unlock()
		for _, cq := range cqs {
			off := n.self.cqOff(cq.id)
			h := atomic.LoadUint64(n.self.u64(off + 64))
			if atomic.LoadUint64(n.self.u64(off+cqHdrSize+uint32(h%uint64(n.lay.cqLen))*8)) != 0 {
				return true
			}
		}
	}
	for _, vi := range *n.visSnap.Load() {
		if vi.headDone(true) || vi.headDone(false) {
			return true
		}
	}
	return false
}

// Wake makes every Sleep of this NIC return.
func (n *NIC) Wake() { n.self.ringApp() }

// wait polls cond briefly and then sleeps on the completion futex.
func (n *NIC) wait(timeout time.Duration, cond func() bool) error {
	start := time.Now()
	for i := 0; ; i++ {
		seq := n.Seq()
		if cond() {
			return nil
		}
		if n.closed.Load() {
			return errors.New("via: the NIC is closed")
		}
		left := time.Duration(0)
		if timeout > 0 {
			if left = timeout - time.Since(start); left <= 0 {
				return ErrTimeout
			}
		}
		if n.Help() {
			continue
		}
		if i < 64 {
			n.Yield()
			continue
		}
		if left == 0 || left > 100*time.Millisecond {
			left = 100 * time.Millisecond
		}
		n.Sleep(seq, left)
	}
}

// Help runs the NIC engine's pass on the calling thread, as a waiting
// application does while it polls for completions: the descriptors posted
// since the last pass are executed here, without waking the engine
// goroutine. It reports whether the pass did any work. Across hosts it is
// Assist; on one host it runs only when posted send descriptors wait
// (Busy), so that an idle poll costs two loads. While the application
// helps, posts from this process leave the sleeping engine asleep (see
// the engine's sleep); it takes over when the application stops calling
// (assistedFor after the last help, or at once when it calls Sleep).
func (n *NIC) Help() bool {
	if n.port.Load() != nil {
		return n.Assist()
	}
	if !n.Busy() && atomic.LoadUint32(n.self.u32(offShare)) == 0 {
		// Nothing to run, but the application is here and runs the
		// next pass: it keeps the engine in its assisted sleep. Else an
		// engine that took one descriptor first (after a Sleep woke it)
		// stayed awake, was woken by every post of this process and ran
		// the transfers on a third and fourth thread for two cores,
		// holding eng.mu while the application spun beside it: the slow
		// mode of docs/via-bandwidth.md (session 9).
		if n.polls.Add(1)%64 == 0 || n.eng.lastAssist.Load() == 0 {
			n.eng.lastAssist.Store(time.Now().UnixNano())
		}
		return false
	}
	if !n.eng.mu.TryLock() {
		return false
	}
	defer n.eng.mu.Unlock()
	// The time of the help is refreshed once in a while, or at once after
	// a Sleep cleared it: reading the clock costs as much as a pass.
	if n.helps++; n.helps%64 == 0 || n.eng.lastAssist.Load() == 0 {
		n.eng.lastAssist.Store(time.Now().UnixNano())
	}
	e0 := n.cnt.executed.Load()
	did, _ := n.pass(false)
	n.pc.helped += n.cnt.executed.Load() - e0
	return did
}

// Busy reports whether the NIC holds posted send descriptors it has not
// carried out yet. A descriptor to another host that is on the wire and
// waits for the remote NIC's acknowledgement does not count: what is left
// of it is the other host's work, not this process's NIC's, for which a
// waiter would give its core away.
func (n *NIC) Busy() bool { return n.cnt.taken.Load() < n.cnt.posts.Load() }

// Drained reports whether every send descriptor posted to this NIC has
// been carried out (to another host: its frames handed to the network),
// with no pass running that may still be carrying one out.
func (n *NIC) Drained() bool {
	if n.Busy() || !n.eng.mu.TryLock() {
		return false
	}
	defer n.eng.mu.Unlock()
	n.central.mu.Lock()
	queued := len(n.central.q)
	n.central.mu.Unlock()
	return !n.Busy() && queued == 0 && len(n.eng.d2) == 0
}

// Yield gives the CPU away for a moment while waiting: to the engine if it
// has work (it is another thread, which may need this very core), else to
// other goroutines.
func (n *NIC) Yield() {
	if n.Busy() {
		syscall.Syscall(syscall.SYS_SCHED_YIELD, 0, 0, 0)
		return
	}
	runtime.Gosched()
}

// ---------------------------------------------------------------------------
// The engine: what the NIC firmware does.

func (n *NIC) engine() {
	defer close(n.done)
	defer n.closeNet()
	bell, sleep := n.self.u32(offNICBell), n.self.u32(offNICSleep)
	var idleSince time.Time
	idle := 0
	for !n.closed.Load() {
		seq := atomic.LoadUint32(bell)
		if n.assisted() {
			// The application runs the passes (Help, or Assist across
			// hosts). The engine stays off their lock and off the
			// cores: a host this busy preempts threads, an engine
			// preempted while holding the lock would stop the
			// application's passes for a time slice, and one that
			// polls and spins beside the ranks takes a core from them.
			// It looks again when the application sleeps (Sleep wakes
			// it), a peer rings, or assistedFor passes. Across hosts
			// (Assist polls the network whatever it finds) it runs a
			// pass only once the application has stopped assisting, or
			// for posted descriptors not taken up yet (a doorbell of
			// this process rang it in vain), which would otherwise
			// wait for the application's next poll.
			// Across hosts a sleep that ends at its timeout with the
			// application still assisting and nothing posted for the
			// engine makes the next one twice as long (up to
			// assistedMax): each wake-up is a thread put on a core that
			// a spinning rank holds, and a ping-pong's ranks assist
			// without end. Posted work found at a wake-up (RDMA,
			// which the doorbell leaves to a pass) brings the sleep
			// back to assistedFor.
			atomic.StoreUint32(sleep, sleepAssisted)
			d, timedOut := assistedFor, false
			if n.port.Load() != nil {
				d = max(n.asleep.next, assistedFor)
			}
			if atomic.LoadUint32(bell) == seq && !n.closed.Load() {
				n.cnt.sleeps.Add(1)
				timedOut = n.assistedSleep(d)
			}
			atomic.StoreUint32(sleep, 0)
			if timedOut && atomic.LoadUint32(bell) == seq && n.assisted() && !n.Busy() {
				n.asleep.next = min(2*d, assistedMax)
			} else {
				n.asleep.next = assistedFor
			}
			if atomic.LoadUint32(bell) != seq || n.port.Load() != nil && !n.Busy() {
				continue
			}
		}
		n.asleep.next = assistedFor // the engine takes the network: its next assisted sleep starts short
		// The engine never waits for the lock: a holder is the
		// application running the pass itself (Help, Assist, the
		// doorbell), and an engine parked on the mutex made the
		// holder's Unlock wake it, a futex call and a thread put on a
		// core, on the path of the application's message
		// (TestEngineNeverWaitsForLock). It looks again instead; by
		// then the holder has marked its assist.
		if !n.eng.mu.TryLock() {
			n.cnt.lockBusy.Add(1)
			runtime.Gosched()
			continue
		}
		n.cnt.enginePasses.Add(1)
		did, stalled := n.pass(false)
		n.eng.mu.Unlock()
		if did {
			idle = 0
			continue
		}
		if idle == 0 {
			idleSince = time.Now()
		}
		if idle++; idle < 4 || time.Since(idleSince) < n.o.Spin {
			runtime.Gosched()
			continue
		}
		// Acks still owed leave before the engine sleeps, and the hits
		// counted in peers' translation caches are added to theirs.
		if !n.eng.mu.TryLock() {
			n.cnt.lockBusy.Add(1)
			runtime.Gosched()
			continue
		}
		n.cnt.enginePasses.Add(1)
		did, stalled = n.pass(true)
		n.flushHits()
		n.eng.mu.Unlock()
		if did {
			idle = 0
			continue
		}
		// Sleep until a doorbell rings (or, with a stalled send, a while).
		// With a network port the engine sleeps in the endpoint's epoll,
		// which this process's doorbell rings wake too (ringNIC); only a
		// peer on this host whose receive descriptor a stalled send waits
		// for rings the futex alone, so a stalled engine looks again soon.
		// While the application assists (net.go), the network is its.
		// On one host an application that assisted within assistRecent
		// keeps the engine in its assisted sleep, which its own posts do
		// not interrupt: under load the application loses its core for
		// longer than assistedFor, and an engine that fell back to the
		// plain sleep was then woken by each of its next posts, each
		// wake-up a thread that took a core from a rank in mid-transfer.
		// The assisted sleep's timeout still brings the engine to the
		// posted work within assistedFor of the application's last help.
		port := n.port.Load()
		mode := uint32(1)
		help := n.assisted() || port == nil && n.assistedWithin(n.recentAssist())
		switch {
		case help:
			mode = sleepAssisted
		case port != nil:
			mode = sleepEpoll
		}
		atomic.StoreUint32(sleep, mode)
		if atomic.LoadUint32(bell) == seq && !n.closed.Load() {
			n.cnt.sleeps.Add(1)
			switch {
			case help && port == nil && !n.assisted():
				// The application assisted lately but is away: a
				// peer's ring (the futex) must still wake the engine.
				_ = shm.FutexWait(bell, seq, assistedFor)
			case help:
				n.assistedSleep(assistedFor)
			case port != nil && stalled:
				port.ep.Wait(time.Millisecond)
			case port != nil:
				port.ep.Wait(time.Second)
			case stalled:
				_ = shm.FutexWait(bell, seq, 20*time.Millisecond)
			default:
				_ = shm.FutexWait(bell, seq, 0)
			}
		}
		atomic.StoreUint32(sleep, 0)
		idle = 0
	}
}

// assistRecent is how long after an application's last assist the idle
// engine of a NIC without a network port keeps sleeping as an assisted
// one (see engine).
const assistRecent = 100 * time.Millisecond

// recentAssist is assistRecent, or the span a test set in
// n.eng.recent so that a loaded machine cannot stretch a preemption past
// it.
func (n *NIC) recentAssist() time.Duration {
	if d := n.eng.recent.Load(); d != 0 {
		return time.Duration(d)
	}
	return assistRecent
}

// assistedWithin reports whether an application assisted the engine
// within d.
func (n *NIC) assistedWithin(d time.Duration) bool {
	t := n.eng.lastAssist.Load()
	return t != 0 && time.Duration(time.Now().UnixNano()-t) < d
}

// pass is one turn of the engine: the doorbell queues, then the network;
// flush sends the acks owed at once (see ackDue). The caller holds
// n.eng.mu (the engine, or an application assisting it).
func (n *NIC) pass(flush bool) (did, stalled bool) {
	did = n.shareHelp() // this NIC's pieces of peers' RDMA transfers (dmashare.go)
	if n.o.Doorbell == D1 {
		// Poll the doorbell queue of every active VI.
		for _, vi := range *n.active.Load() {
			n.pc.polls++
			w, s := n.runD1(vi)
			did, stalled = did || w, stalled || s
		}
	} else {
		n.central.mu.Lock()
		q := n.central.q
		n.central.q = nil
		n.central.mu.Unlock()
		n.pc.polls++
		byVI := n.eng.byVI
		for _, e := range q {
			vi := e.vi
			vi.pend = append(vi.pend, e)
			if !byVI[vi] {
				byVI[vi] = true
				n.eng.d2 = append(n.eng.d2, vi)
			}
		}
		keep := n.eng.d2[:0]
		for _, vi := range n.eng.d2 {
			w, s := n.runD2(vi)
			did, stalled = did || w, stalled || s
			if len(vi.pend) > 0 {
				keep = append(keep, vi)
			} else {
				delete(byVI, vi)
			}
		}
		clear(n.eng.d2[len(keep):])
		n.eng.d2 = keep
	}
	if port := n.port.Load(); port != nil && n.pollNet(port, n.ackDue(did, flush)) {
		did = true
	}
	return did, stalled
}

func (n *NIC) runD1(vi *VI) (did, stalled bool) {
	defer n.flush()
	for vi.sqHead != vi.sqTail.Load() {
		e := &vi.sq[vi.sqHead%uint64(len(vi.sq))]
		if !n.execute(vi, e) {
			return did, true
		}
		// The slot is not cleared: once the descriptor is complete the
		// application may already be reusing it.
		vi.sqHead++
		n.cnt.taken.Add(1)
		did = true
	}
	return did, false
}

func (n *NIC) runD2(vi *VI) (did, stalled bool) {
	defer n.flush()
	for len(vi.pend) > 0 {
		if !n.execute(vi, &vi.pend[0]) {
			return did, true
		}
		vi.pend[0] = sendEntry{}
		vi.pend = vi.pend[1:]
		n.cnt.taken.Add(1)
		did = true
	}
	return did, false
}

// fetch reads a descriptor from host memory by DMA (process_vm_readv): the
// control and address segments, then its segment list.
func fetch(pid int, addr uint64, at Translation) (descHdr, []DataSegment, error) {
	var h descHdr
	if err := shm.RemoteRead(pid, uintptr(addr), [][]byte{unsafe.Slice((*byte)(unsafe.Pointer(&h)), unsafe.Sizeof(h))}); err != nil {
		return h, nil, err
	}
	p, l := h.dsPtr, h.dsLen
	if at == AT1 {
		p, l = h.physPtr, h.physLen
	}
	if l < 0 || l > 1<<20 {
		return h, nil, fmt.Errorf("descriptor at %#x has %d segments", addr, l)
	}
	segs := make([]DataSegment, l)
	if l > 0 {
		if err := shm.RemoteRead(pid, p, [][]byte{unsafe.Slice((*byte)(unsafe.Pointer(&segs[0])), l*int(unsafe.Sizeof(segs[0])))}); err != nil {
			return h, nil, err
		}
	}
	return h, segs, nil
}

// fetchEntry reads an uncached send-queue entry's descriptor from host
// memory by DMA; it reports false when the read failed, and completes the
// descriptor in error then.
func (n *NIC) fetchEntry(vi *VI, e *sendEntry) bool {
	if e.cached {
		return true
	}
	h, segs, err := fetch(n.self.pid, uint64(uintptr(unsafe.Pointer(e.d))), n.o.AT)
	n.cnt.fetches.Add(1)
	if err != nil {
		n.flush()
		n.complete(vi, e.d, 0, StatusDone|StatusProtectionError)
		return false
	}
	e.cached, e.ctl, e.imm, e.rh, e.raddr, e.segs = true, h.Control, h.Imm, h.RemoteHandle, h.RemoteAddr, segs
	return true
}

// executeRemote performs a send-queue descriptor of a VI connected to
// another host (net.go).
func (n *NIC) executeRemote(vi *VI, e *sendEntry) {
	if !n.fetchEntry(vi, e) {
		return
	}
	n.flush()
	n.executeNet(vi, e)
}

// execute performs one send-queue descriptor. It reports false when the
// descriptor needs a receive descriptor the peer has not posted yet.
func (n *NIC) execute(vi *VI, e *sendEntry) bool {
	t0 := n.execT.start()
	if vi.net != nil {
		// Across hosts the calls that follow a descriptor are made
		// here, not deferred: this function's many returns keep Go from
		// inlining its deferred calls, and the runtime's defer records
		// were a cost on every message's way to the wire.
		n.executeRemote(vi, e)
		n.execT.stop(t0, &n.cnt.execNs)
		n.wakeAll()
		vi.net.executed.Add(1)
		return true
	}
	defer func() {
		n.execT.stop(t0, &n.cnt.execNs)
		n.wakeAll()
	}()
	if !n.fetchEntry(vi, e) {
		return true
	}
	op := e.ctl & 0xff
	if op != OpSend || n.batch.vi != vi {
		n.flush() // whatever is not batched with them goes after them
	}
	phys, err := n.self.translateSegs(e.segs, n.physBuf[:0])
	n.physBuf = phys
	var local [][]byte
	if err == nil {
		local, err = n.localPieces(e.segs, phys, n.localBuf[:0])
		n.localBuf = local
	}
	defer clear(n.localBuf) // no references to user memory stay behind
	if err != nil {
		n.flush()
		n.complete(vi, e.d, 0, StatusDone|StatusProtectionError)
		return true
	}
	total := uint64(0)
	for _, p := range local {
		total += uint64(len(p))
	}
	p := vi.peer
	pvi := p.viOff(vi.peerVI)
	needRecv := op == OpSend || (op == OpRDMAWrite && e.ctl&FlagImmediate != 0)
	var rdesc uint64
	var slot uint32 // the consumed receive descriptor's slot in p's segment
	var rsegs []DataSegment
	if needRecv {
		head := vi.rqHead
		if n.batch.vi == vi {
			head += uint64(len(n.batch.recs)) // taken by the batch already
		}
		if head == vi.rqTail {
			vi.rqTail = atomic.LoadUint64(p.u64(pvi + 8))
		}
		if head == vi.rqTail {
			atomic.StoreUint32(p.u32(pvi+16), 1)
			if vi.rqTail = atomic.LoadUint64(p.u64(pvi + 8)); head == vi.rqTail {
				if !shm.Alive(p.pid) {
					n.flush()
					n.complete(vi, e.d, 0, StatusDone|StatusTransportError)
					return true
				}
				n.cnt.stalls.Add(1)
				return false
			}
		}
		s := pvi + viHdrSize + uint32(head%uint64(p.lay.rqLen))*slotSize
		slot = s
		rdesc = atomic.LoadUint64(p.u64(s))
		if *p.u32(s + 12) != 0 {
			ns := *p.u32(s + 8)
			rsegs = n.rsegBuf[:0]
			for k := uint32(0); k < ns; k++ {
				rsegs = append(rsegs, *(*DataSegment)(unsafe.Pointer(&p.seg.Mem[s+slotSeg0+k*16])))
			}
			n.rsegBuf = rsegs
		} else {
			_, segs, err := fetch(p.pid, rdesc, p.o.AT)
			n.cnt.fetches.Add(1)
			if err != nil {
				n.flush()
				n.complete(vi, e.d, 0, StatusDone|StatusTransportError)
				return true
			}
			rsegs = segs
		}
	}
	var remote []shm.RemoteSeg
	st := StatusDone
	switch op {
	case OpSend:
		remote, err = p.translateSegs(rsegs, n.remoteBuf[:0])
		n.remoteBuf = remote
		if err != nil {
			st |= StatusProtectionError
		}
	case OpRDMAWrite, OpRDMARead:
		remote, err = p.nicTranslate(e.rh, e.raddr, total, n.remoteBuf[:0])
		n.remoteBuf = remote
		if err != nil {
			st |= StatusProtectionError
		}
	}
	rlen := uint64(0)
	for _, r := range remote {
		rlen += r.Len
	}
	if op == OpSend && st == StatusDone && total > rlen {
		st |= StatusLengthError
	}
	if op == OpSend && st == StatusDone {
		remote = trim(remote, total)
		if n.batchAdd(vi, e, local, remote, slot, total) {
			return true
		}
	}
	n.flush()
	// Move the data, then (for a consumed receive descriptor) write its
	// length, immediate data and status into its slot: the status last.
	shared := false
	if st == StatusDone && op != OpSend && len(local) == 1 && len(remote) >= 1 {
		dir := uint32(dirToInit)
		if op == OpRDMAWrite {
			remote, dir = trim(remote, total), dirToTarg
		}
		if len(remote) == 1 {
			shared, err = n.shareDMA(vi, p, dir, local[0], remote[0], e.rh)
		}
		if shared {
			if op == OpRDMARead {
				n.pc.rdmaR++
			} else {
				n.pc.rdmaW++
			}
			if err != nil {
				st |= StatusTransportError
			} else {
				n.pc.bytes += int64(total)
			}
		}
	}
	if st == StatusDone && !shared {
		switch op {
		case OpRDMARead:
			err = readRemote(p.pid, remote, local)
			n.pc.rdmaR++
		default:
			remote = trim(remote, total)
			if op == OpRDMAWrite {
				n.pc.rdmaW++
			} else {
				n.pc.sends++
			}
			err = n.scatter(p, local, remote)
		}
		if err != nil {
			st |= StatusTransportError
		} else {
			n.pc.bytes += int64(total)
		}
	}
	if needRecv {
		// The receive descriptor is consumed, with the error if any.
		if st == StatusDone {
			p.recvComplete(slot, uint32(total), e.imm, st)
		} else {
			p.recvComplete(slot, 0, 0, st)
		}
		vi.rqHead++
		if cq := vi.recvCQOf(p, pvi); cq != 0 && p.o.CQ == CQ1 {
			p.cqAppend(cq, vi.peerVI, true)
		}
		if p != n.self {
			n.ring(p)
		}
	}
	n.complete(vi, e.d, uint32(total), st)
	return true
}

// batchMax is how many consecutive sends of one VI the engine moves with
// one process_vm_writev (their data and receive-descriptor statuses, in
// order), as a NIC pipelines its DMAs.
const batchMax = 32

type batchRec struct {
	d          *Descriptor
	total, imm uint32
	slot       uint32 // the receive descriptor's slot in the peer's segment
}

type batch struct {
	vi     *VI
	recs   []batchRec
	local  [][]byte
	remote []shm.RemoteSeg
}

// batchAdd queues a send whose receive descriptor and translations are
// ready; it reports false (and queues nothing) when the batch is full.
func (n *NIC) batchAdd(vi *VI, e *sendEntry, local [][]byte, remote []shm.RemoteSeg, slot uint32, total uint64) bool {
	b := &n.batch
	if b.vi != nil && b.vi != vi || len(b.recs) == batchMax || len(b.local)+len(local) > 900 || len(b.remote)+len(remote) > 900 {
		return false
	}
	b.vi = vi
	b.local = append(b.local, local...)
	b.remote = append(b.remote, remote...)
	b.recs = append(b.recs, batchRec{d: e.d, total: uint32(total), imm: e.imm, slot: slot})
	n.pc.sends++
	return true
}

// recvCQOf is the receive CQ (its id + 1; 0: none) of the peer VI, at
// pvi in p's segment.
func (vi *VI) recvCQOf(p *view, pvi uint32) uint32 {
	if vi.peerCQ == 0 {
		vi.peerCQ = atomic.LoadUint32(p.u32(pvi + 20))
	}
	return vi.peerCQ
}

// recvComplete writes the completion of the receive descriptor in slot of
// v's receive queue: its length and immediate data, then its status.
func (v *view) recvComplete(slot, length, imm, st uint32) {
	c := (*[3]uint32)(unsafe.Pointer(&v.seg.Mem[slot+slotComp]))
	atomic.StoreUint32(&c[0], length)
	atomic.StoreUint32(&c[1], imm)
	atomic.StoreUint32(&c[2], st)
}

// flush moves the batched sends: one copy (or one remote write), then the
// receive descriptors' completions, the receive queue's head, CQ entries
// and the send descriptors' completions.
func (n *NIC) flush() {
	b := &n.batch
	if len(b.recs) == 0 {
		return
	}
	t0 := n.execT.start()
	vi := b.vi
	p := vi.peer
	pvi := p.viOff(vi.peerVI)
	err := n.scatter(p, b.local, b.remote)
	for _, r := range b.recs {
		st := StatusDone
		if err != nil {
			st |= StatusTransportError
		}
		p.recvComplete(r.slot, r.total, r.imm, st)
	}
	vi.rqHead += uint64(len(b.recs))
	cq := vi.recvCQOf(p, pvi)
	for i, r := range b.recs {
		st := StatusDone
		if err != nil {
			st |= StatusTransportError
		} else {
			n.pc.bytes += int64(r.total)
		}
		if cq != 0 && p.o.CQ == CQ1 {
			p.cqAppend(cq, vi.peerVI, true)
		}
		n.complete(vi, r.d, r.total, st)
		b.recs[i] = batchRec{}
	}
	if p != n.self {
		n.ring(p)
	}
	clear(b.local)
	b.vi, b.recs, b.local, b.remote = nil, b.recs[:0], b.local[:0], b.remote[:0]
	n.execT.stop(t0, &n.cnt.execNs)
	n.wakeAll()
}

// wakeAll wakes the applications the last descriptors completed work for,
// after the clock stops: nic_exec_ns is the NIC's own work, not the
// scheduler's.
func (n *NIC) wakeAll() {
	for i, v := range n.toRing {
		v.ringApp()
		n.toRing[i] = nil
	}
	n.toRing = n.toRing[:0]
}

// ring notes that v's application is to be woken once the descriptor is done.
func (n *NIC) ring(v *view) {
	for _, x := range n.toRing {
		if x == v {
			return
		}
	}
	n.toRing = append(n.toRing, v)
}

// complete marks a send-queue descriptor and (CQ1) appends its CQ entry.
// The status store is the NIC's last touch of d: once it is visible the
// host may reuse the descriptor at once.
func (n *NIC) complete(vi *VI, d *Descriptor, length, st uint32) {
	n.cnt.executed.Add(1)
	if d.Op() == OpRDMARead {
		d.Length = length
	}
	quiet := d.Control&FlagQuiet != 0
	atomic.StoreUint32(&d.Status, st)
	if vi.sendCQ != nil && n.o.CQ == CQ1 {
		n.self.cqAppend(uint32(vi.sendCQ.id+1), vi.id, false)
	}
	if !quiet || st != StatusDone {
		n.ring(n.self)
	} else {
		atomic.AddUint32(n.self.u32(offAppBell), 1)
	}
}

// copyHost copies the local pieces into the remote segments if these all
// lie in p's host memory, and reports whether they did (else it copies
// nothing).
func copyHost(p *view, local [][]byte, remote []shm.RemoteSeg) bool {
	total, rtotal := 0, uint64(0)
	for _, r := range remote {
		if r.Len > 0 && p.hostBytes(r.Addr, r.Len) == nil {
			return false
		}
		rtotal += r.Len
	}
	for _, l := range local {
		total += len(l)
	}
	if uint64(total) != rtotal {
		return false // the kernel's path reports the mismatch
	}
	var dst []byte
	for _, l := range local {
		for len(l) > 0 {
			if len(dst) == 0 {
				for remote[0].Len == 0 {
					remote = remote[1:]
				}
				dst = p.hostBytes(remote[0].Addr, remote[0].Len)
				remote = remote[1:]
			}
			k := copy(dst, l)
			dst, l = dst[k:], l[k:]
		}
	}
	return true
}

// trim cuts a segment list to n bytes.
func trim(segs []shm.RemoteSeg, n uint64) []shm.RemoteSeg {
	for i := range segs {
		if segs[i].Len >= n {
			segs[i].Len = n
			return segs[:i+1]
		}
		n -= segs[i].Len
	}
	return segs
}

// readRemote reads remote segments of process pid into the local pieces.
func readRemote(pid int, remote []shm.RemoteSeg, local [][]byte) error {
	for _, r := range remote {
		left := r.Len
		var pieces [][]byte
		for left > 0 && len(local) > 0 {
			k := min(uint64(len(local[0])), left)
			pieces = append(pieces, local[0][:k])
			local[0] = local[0][k:]
			if len(local[0]) == 0 {
				local = local[1:]
			}
			left -= k
		}
		if err := shm.RemoteRead(pid, uintptr(r.Addr), pieces); err != nil {
			return err
		}
	}
	return nil
}

// Counters reports the NIC's activity: posts, kernel crossings, descriptor
// fetches by DMA, stalls, engine sleeps, doorbell polls, bytes moved, the
// descriptors executed by the application's Help (nic_helped) and by the
// doorbell of an idle NIC on the posting thread (nic_inline), the data
// moves done with a copy into host memory (nic_host_copies) or with
// process_vm_writev (nic_kernel_writes), the
// time spent in posts (host_post_ns, sends and receives), in the engine per
// descriptor (nic_exec_ns over nic_executed) and in CQ checks (cq_done_ns
// over cq_done_calls), and (AT3) the hits and misses of this NIC's
// translation cache, and the frames its network port sent and received,
// held for want of a receive descriptor, and the naks it sent; the passes
// the engine goroutine ran itself (nic_engine_passes, not the
// application's Help or Assist), and the polls of the network endpoint
// (wire_polls).
func (n *NIC) Counters() map[string]int64 {
	n.eng.mu.Lock() // the pass counters (n.pc)
	defer n.eng.mu.Unlock()
	return map[string]int64{
		"nic_posts":            n.cnt.posts.Load(),
		"nic_kernel_crossings": n.cnt.kernel.Load(),
		"nic_desc_fetches":     n.cnt.fetches.Load(),
		"nic_stalls":           n.cnt.stalls.Load(),
		"nic_sleeps":           n.cnt.sleeps.Load(),
		"nic_port_sleeps":      n.cnt.portSleeps.Load(),
		"nic_doorbell_polls":   n.pc.polls,
		"nic_bytes":            n.pc.bytes,
		"nic_sends":            n.pc.sends,
		"nic_rdma_writes":      n.pc.rdmaW,
		"nic_rdma_reads":       n.pc.rdmaR,
		"nic_recv_posts":       n.cnt.recvPosts.Load(),
		"nic_executed":         n.cnt.executed.Load(),
		"nic_helped":           n.pc.helped,
		"nic_inline":           n.pc.inline,
		"nic_host_copies":      n.cnt.hostCopies.Load(),
		"nic_kernel_writes":    n.cnt.kernelWrites.Load(),
		"nic_shared_init":      n.shared.init.Load(),
		"nic_shared_target":    n.shared.target.Load(),
		"nic_stage_staged":     n.stageCnt.staged.Load(),
		"nic_stage_early":      n.stageCnt.early.Load(),
		"nic_stage_late":       n.stageCnt.late.Load(),
		"nic_stage_direct":     n.stageCnt.direct.Load(),
		"nic_stage_busy":       n.stageCnt.busy.Load(),
		"nic_stage_reads":      n.stageCnt.reads.Load(),
		"host_post_ns":         n.cnt.postNs.Load(),
		"nic_exec_ns":          n.cnt.execNs.Load(),
		"cq_done_ns":           n.cnt.cqNs.Load(),
		"cq_done_calls":        n.cnt.cqCalls.Load(),
		"tlb_hits":             int64(atomic.LoadUint64(n.self.u64(offTLBHits))),
		"tlb_misses":           int64(atomic.LoadUint64(n.self.u64(offTLBMisses))),
		"tlb_reads":            int64(atomic.LoadUint64(n.self.u64(offTLBReads))),
		"wire_frames_out":      n.pc.framesOut,
		"wire_frames_in":       n.pc.framesIn,
		"wire_held_frames":     n.cnt.held.Load(),
		"wire_naks":            n.cnt.naks.Load(),
		"nic_engine_passes":    n.cnt.enginePasses.Load(),
		"nic_engine_lock_busy": n.cnt.lockBusy.Load(),
		"wire_polls":           n.pc.netPolls,
	}
}

// scatter writes the local pieces into the remote segments of NIC p's
// process: with a plain copy when they all lie in p's host memory
// (AllocHostMem), else with one process_vm_writev (the kernel walks both
// lists, whatever their piece boundaries), reusing the engine's iovec
// arrays; long lists or a short transfer go through shm.RemoteScatter.
func (n *NIC) scatter(p *view, local [][]byte, remote []shm.RemoteSeg) error {
	if p.hostVA != 0 && copyHost(p, local, remote) {
		n.cnt.hostCopies.Add(1)
		return nil
	}
	n.cnt.kernelWrites.Add(1)
	pid := p.pid
	const iovMax = 1024
	if len(local) > iovMax || len(remote) > iovMax {
		return shm.RemoteScatter(pid, local, remote)
	}
	liov, riov := n.liov[:0], n.riov[:0]
	total := 0
	for _, p := range local {
		if len(p) == 0 {
			continue
		}
		iv := unix.Iovec{Base: &p[0]}
		iv.SetLen(len(p))
		liov = append(liov, iv)
		total += len(p)
	}
	rtotal := 0
	for _, r := range remote {
		if r.Len > 0 {
			riov = append(riov, unix.RemoteIovec{Base: uintptr(r.Addr), Len: int(r.Len)})
			rtotal += int(r.Len)
		}
	}
	n.liov, n.riov = liov, riov
	if total != rtotal {
		return fmt.Errorf("via: scatter of %d bytes into %d", total, rtotal)
	}
	if total == 0 {
		return nil
	}
	w, err := unix.ProcessVMWritev(pid, liov, riov, 0)
	clear(liov) // drop the references to the pieces
	if err == nil && w == total {
		return nil
	}
	if err != nil && err != syscall.EINTR {
		return fmt.Errorf("via: process_vm_writev pid %d: %w", pid, err)
	}
	return shm.RemoteScatter(pid, local, remote)
}
