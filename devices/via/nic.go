package via

import (
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"github.com/adimpi/adimpi/internal/shm"
	"golang.org/x/sys/unix"
)

// pageSize is the translation granularity.
const pageSize = 4096

// MemHandle names a registered memory region of one NIC; 0 is no region.
type MemHandle uint32

// DataSegment is one piece of a gather or scatter list: Len bytes at
// virtual address Addr inside the registered region Handle.
type DataSegment struct {
	Addr   uint64
	Len    uint32
	Handle MemHandle
}

// Seg builds the data segment for b, which must lie inside region h.
func Seg(h MemHandle, b []byte) DataSegment {
	if len(b) == 0 {
		return DataSegment{Handle: h}
	}
	return DataSegment{Addr: uint64(uintptr(unsafe.Pointer(&b[0]))), Len: uint32(len(b)), Handle: h}
}

// Addr is the virtual address of b's first byte (for address segments).
func Addr(b []byte) uint64 {
	if len(b) == 0 {
		return 0
	}
	return uint64(uintptr(unsafe.Pointer(&b[0])))
}

// Operations, in the low byte of Descriptor.Control.
const (
	OpSend      uint32 = 1 // send/receive model: consumes a receive descriptor at the peer
	OpRecv      uint32 = 2 // a receive descriptor
	OpRDMAWrite uint32 = 3 // write the gather list to the peer's (RemoteHandle, RemoteAddr)
	OpRDMARead  uint32 = 4 // read the peer's (RemoteHandle, RemoteAddr) into the scatter list
)

// FlagImmediate in Descriptor.Control: Imm travels with the data (a send,
// or an RDMA write, which then consumes a receive descriptor at the peer
// and reports Imm there).
const FlagImmediate uint32 = 1 << 8

// FlagQuiet in a send-queue descriptor's Control: its completion is marked
// (status, CQ entry) but does not wake a sleeping waiter of this process;
// for descriptors whose completion only frees resources the application
// reclaims when it next polls.
const FlagQuiet uint32 = 1 << 9

// Status bits, written by the NIC into Descriptor.Status when it is done
// with the descriptor.
const (
	StatusDone            uint32 = 1
	StatusLengthError     uint32 = 2 // the data is longer than the receive descriptor's buffers
	StatusProtectionError uint32 = 4 // a segment names unregistered memory at the NIC
	StatusTransportError  uint32 = 8 // the peer is gone or not connected
)

// Descriptor is a VIA descriptor: the control segment (Control, Length,
// Imm, Status), the address segment (RemoteHandle, RemoteAddr; RDMA only)
// and the data segments DS. It lives in the process's memory; the NIC reads
// it either from its descriptor cache (option desccache=on, filled when the
// descriptor is posted) or by DMA from host memory (desccache=off), and
// writes Length, Imm and Status back when it completes it. The fields up to
// DS must not be changed while the descriptor is posted.
type Descriptor struct {
	Control      uint32 // op | flags
	Length       uint32 // total bytes; for receives set by the NIC
	Imm          uint32 // immediate data
	Status       uint32 // 0 while posted; StatusDone|errors when complete
	RemoteHandle MemHandle
	_            uint32
	RemoteAddr   uint64
	DS           []DataSegment
	phys         []DataSegment // AT1: the host's translation of DS, made at post time
	comp         *[3]uint32    // a posted receive: its completion in the receive-queue slot (NIC memory)
	// User is the application's own cookie; the NIC never reads it.
	User any
}

// descHdr is a Descriptor as the NIC reads it by DMA: no Go pointers.
type descHdr struct {
	Control, Length, Imm, Status uint32
	RemoteHandle                 MemHandle
	_                            uint32
	RemoteAddr                   uint64
	dsPtr                        uintptr
	dsLen, dsCap                 int
	physPtr                      uintptr
	physLen, physCap             int
}

// Done reports whether the NIC has completed d.
func (d *Descriptor) Done() bool {
	return atomic.LoadUint32(&d.Status)&StatusDone != 0 || d.writeBack()
}

// writeBack is the last step of a receive a NIC of this host completed:
// that NIC wrote the completion (length, immediate data, status) into the
// descriptor's receive-queue slot in this NIC's memory, where a store
// costs no system call, and the descriptor in host memory takes it from
// there the first time it is looked at (see doc.go, "The NIC engine").
func (d *Descriptor) writeBack() bool {
	c := d.comp
	if c == nil {
		return false
	}
	st := atomic.LoadUint32(&c[2])
	if st&StatusDone == 0 {
		return false
	}
	atomic.StoreUint32(&d.Length, atomic.LoadUint32(&c[0]))
	atomic.StoreUint32(&d.Imm, atomic.LoadUint32(&c[1]))
	d.comp = nil
	atomic.StoreUint32(&d.Status, st)
	return true
}

// Err describes a completed descriptor's error bits, or nil.
func (d *Descriptor) Err() error {
	d.Done()
	st := atomic.LoadUint32(&d.Status)
	switch {
	case st&StatusTransportError != 0:
		return errors.New("via: transport error: the connected peer is gone or the VI is not connected")
	case st&StatusProtectionError != 0:
		return errors.New("via: protection error: a segment names memory that is not registered at the NIC")
	case st&StatusLengthError != 0:
		return errors.New("via: length error: the data does not fit the receive descriptor's buffers")
	}
	return nil
}

// Op is the descriptor's operation.
func (d *Descriptor) Op() uint32 { return d.Control & 0xff }

// Segment layout, after shm.HeaderSize. Words that different processes
// write (a NIC's doorbell, its application's doorbell, the translation
// counters) have cache lines of their own, so that ringing one does not
// take the others' line away from the process polling them.
const (
	offNICBell   = shm.HeaderSize + 0   // u32 futex: the NIC's doorbell word
	offNICSleep  = shm.HeaderSize + 4   // u32: the NIC engine sleeps
	offAppBell   = shm.HeaderSize + 64  // u32 futex: completions for the application
	offTLBHits   = shm.HeaderSize + 128 // u64
	offTLBMisses = shm.HeaderSize + 136 // u64
	offTLBReads  = shm.HeaderSize + 144 // u64: host-table DMAs of AT3 misses
	offShare     = shm.HeaderSize + 152 // u32: shared-DMA jobs open in this NIC's job lines (dmashare.go)
	offDesign    = shm.HeaderSize + 192 // u64: Options.designWord
	offProbe     = shm.HeaderSize + 200 // u64: remote-write permission probe
	offHostVA    = shm.HeaderSize + 208 // u64: the host memory's address in the NIC's process
	offStage     = shm.HeaderSize + 216 // u32: the staging buffers' offset in the segment (dmastage.go); 0: none
	offAppSleep  = shm.HeaderSize + 256 // u32: application waiters sleeping (a line that only sleepers write)
	offLayout    = shm.HeaderSize + 320 // layout words (u32 each)
	offTables    = shm.HeaderSize + 384

	regionSize = 32  // gen u32, npages u32, base u64, len u64, table u64
	viHdrSize  = 128 // rqHead u64 (kept here by a NIC on another host only), rqTail u64, peerStalled u32, recvCQ u32; the shared-DMA job line (jobOff)
	slotSegs   = 4
	slotComp   = 16  // the completion: length u32, imm u32, status u32
	slotSeg0   = 32  // the cached segments, slotSegs of 16 bytes
	slotSize   = 128 // desc u64, nseg u32, cached u32, completion, segs: two whole lines
	cqHdrSize  = 128 // tail u64; head u64 on the next line (producers and the consumer write them)
	cacheEntry = 32  // version u64, tag u64, frame u64, padding: an entry never straddles two lines
)

// layout locates a NIC's tables in its segment; it is written into the
// segment so that peers read it from there.
type layout struct {
	regions, maxRegions  uint32
	vis, viStride, rqLen uint32
	cqs, cqStride, cqLen uint32
	maxVIs, maxCQs       uint32
	at2, at2Pages        uint32
	at3, tlbSize         uint32
	total                uint32
	host                 uint32 // host memory (AllocHostMem): [host, total)
	stage                uint32 // the staging buffers (dmastage.go), 0: none; peers read it from offStage
}

func makeLayout(o Options) layout {
	l := layout{maxRegions: uint32(o.MaxRegions), maxVIs: uint32(o.MaxVIs), rqLen: uint32(o.RecvQueue), maxCQs: uint32(o.MaxCQs)}
	off := uint32(offTables)
	l.regions = off
	off += l.maxRegions * regionSize
	// A receive-queue slot starts a cache line: a receive descriptor with
	// one segment (MPI's buffers) is then one line, which the owner writes
	// when it posts and the peer's NIC reads and completes, and no two
	// slots share a line.
	off = (off + 63) &^ 63
	l.vis, l.viStride = off, viHdrSize+l.rqLen*slotSize
	off += l.maxVIs * l.viStride
	// A CQ can take an entry for every descriptor of every queue it serves.
	l.cqLen = l.maxVIs * uint32(o.RecvQueue+o.SendQueue)
	l.cqs, l.cqStride = off, cqHdrSize+l.cqLen*8
	if o.CQ == CQ2 {
		l.cqLen, l.cqStride = 0, 0 // no CQ memory at all
	}
	off += l.maxCQs * l.cqStride
	if o.AT == AT2 {
		l.at2, l.at2Pages = off, uint32(o.NICTablePages)
		off += l.at2Pages * 8
	}
	if o.AT == AT3 {
		off = (off + 63) &^ 63
		l.at3, l.tlbSize = off, uint32(o.TLBSize)
		off += l.tlbSize * cacheEntry
	}
	if o.SharedDMA {
		l.stage = (off + pageSize - 1) &^ (pageSize - 1)
		off = l.stage + stageBytes
	}
	l.host = (off + pageSize - 1) &^ (pageSize - 1)
	l.total = l.host + (uint32(o.HostMem)+pageSize-1)&^(pageSize-1)
	return l
}

func (l *layout) words() []uint32 {
	return (*[16]uint32)(unsafe.Pointer(l))[:]
}

// view is a NIC as an engine sees it: its segment, process and layout. An
// engine uses the views of its own NIC and of the NICs it is connected to.
type view struct {
	pid  int
	seg  *shm.Segment
	lay  layout
	o    Options
	self *NIC // the local NIC, if this is its view
	// hostVA is where v's host memory (AllocHostMem) starts in v's
	// process; 0 when it has none.
	hostVA uint64
	// hits are translation-cache hits in v's cache by this process's
	// engine not yet added to v's counter (a peer's view; under eng.mu).
	hits    uint64
	run     tlbRun       // AT3: nicTranslate's entries read by its last miss (engine only)
	last    [2]lastXlate // AT3, the NIC's own view: its last one-page translations (engine only)
	lastUse int          // the entry used last (a fill replaces the other)
}

// lastXlate is an entry of the NIC's last-translation registers (AT3): the
// region and page of a recent translation that stayed within one page,
// with its frame and the region's bounds, so that the next one of the same
// page skips the region entry and the cache's seqlock, as a NIC keeps the
// last entries of its translation cache at hand. Two entries, the older
// replaced: a ping-pong's sends reuse one page while its receives rotate
// through the posted buffers. They hold only for the NIC's own memory:
// DeregisterMem of this process clears them (gen), where a peer's
// deregistration would not be seen.
type lastXlate struct {
	h            MemHandle // 0: empty
	vpn, frame   uint64
	base, length uint64
	gen          uint64 // the NIC's xlateGen when filled
}

// lastHit returns the frame of (h, addr, n) from the registers when they
// hold it (n > 0, within one page).
func (v *view) lastHit(h MemHandle, addr, n uint64) (uint64, bool) {
	vpn := addr >> 12
	if n == 0 || (addr+n-1)>>12 != vpn {
		return 0, false
	}
	for i := range v.last {
		r := &v.last[i]
		if r.h == h && r.vpn == vpn && r.h != 0 && addr >= r.base && addr+n <= r.base+r.length && r.gen == v.self.xlateGen.Load() {
			v.lastUse = i
			return r.frame, true
		}
	}
	return 0, false
}

// hitBatch is how many hits in a peer's translation cache an engine
// counts before it adds them to the peer's counter: an atomic add to a
// line of the peer's segment per message would move that line between
// the processes at every message. The engine adds what is left before it
// sleeps.
const hitBatch = 64

// countHits counts k hits in v's translation cache: a translation adds
// its hits once, not one atomic add per page (a 1 MiB transfer is 256
// pages on each side).
func (v *view) countHits(k uint64) {
	if k == 0 {
		return
	}
	if v.self != nil {
		atomic.AddUint64(v.u64(offTLBHits), k)
		return
	}
	if v.hits += k; v.hits >= hitBatch {
		v.flushHits()
	}
}

// flushHits adds the hits counted here to v's counter.
func (v *view) flushHits() {
	if v.hits > 0 {
		atomic.AddUint64(v.u64(offTLBHits), v.hits)
		v.hits = 0
	}
}

// flushHits adds every peer's hits counted here to its counter (under
// eng.mu).
func (n *NIC) flushHits() {
	n.viewMu.Lock()
	for _, v := range n.views {
		v.flushHits()
	}
	n.viewMu.Unlock()
}

func (v *view) u32(off uint32) *uint32 { return v.seg.Uint32(int(off)) }
func (v *view) u64(off uint32) *uint64 { return v.seg.Uint64(int(off)) }

func (v *view) viOff(id int) uint32 { return v.lay.vis + uint32(id)*v.lay.viStride }
func (v *view) cqOff(id int) uint32 { return v.lay.cqs + uint32(id)*v.lay.cqStride }

// ringApp tells the NIC's application that something completed. The NIC
// of the application's own process always moves its completion word (a
// line of its own); a peer's NIC, which completes receive descriptors
// only, moves it only while a waiter has announced its sleep: a store
// into another process's line per message would take that line away from
// the application that polls beside it. A waiter therefore announces
// itself, then looks at its queues once more before it sleeps (NIC.Sleep).
func (v *view) ringApp() {
	if v.self == nil && atomic.LoadUint32(v.u32(offAppSleep)) == 0 {
		return
	}
	v.wakeApp()
}

// wakeApp moves the application's completion word and wakes its sleepers.
func (v *view) wakeApp() {
	atomic.AddUint32(v.u32(offAppBell), 1)
	if atomic.LoadUint32(v.u32(offAppSleep)) > 0 {
		_ = shm.FutexWake(v.u32(offAppBell), math.MaxInt32)
	}
}

// sleepEpoll in offNICSleep: the engine sleeps in its network endpoint's
// epoll, not on the doorbell futex.
const sleepEpoll = 2

// sleepAssisted in offNICSleep: the engine sleeps while this process's
// application assists it (NIC.Help, NIC.Assist): rings from this process
// do not wake it, the application runs the pass itself; peers' rings
// wake it only once the application is away (see NIC.engine).
const sleepAssisted = 3

// ringNIC rings the NIC's doorbell word, and wakes its engine: from the
// futex, or (this process's NIC, sleeping in epoll) through the endpoint.
func (v *view) ringNIC() {
	atomic.AddUint32(v.u32(offNICBell), 1)
	switch atomic.LoadUint32(v.u32(offNICSleep)) {
	case 0:
	case sleepAssisted:
		if v.self == nil {
			_ = shm.FutexWake(v.u32(offNICBell), 1)
		}
	case sleepEpoll:
		if v.self != nil && v.self.wakeNet() {
			return
		}
		_ = shm.FutexWake(v.u32(offNICBell), 1)
	default:
		_ = shm.FutexWake(v.u32(offNICBell), 1)
	}
}

// region is a registered memory region as the host knows it.
type region struct {
	h     MemHandle
	mem   []byte
	base  uint64
	first uint64   // page-aligned base
	pages []uint64 // the host translation table: one frame per page
	at2   int      // AT2: first entry in the NIC's table
}

// NIC is one process's virtual network interface: the registered memory,
// the VIs and CQs, and the engine goroutine that plays the NIC firmware.
type NIC struct {
	o    Options
	lay  layout
	seg  *shm.Segment
	self *view

	regMu   sync.Mutex
	regs    []atomic.Pointer[region]
	freeReg []int
	at2Free []span // free runs of the AT2 table

	viMu    sync.Mutex
	vis     []*VI
	visSnap atomic.Pointer[[]*VI] // vis as of the last CreateVI, read without viMu
	active  atomic.Pointer[[]*VI] // connected VIs, polled by the engine (D1)
	cqs     []*CQ

	viewMu sync.Mutex
	views  map[viewKey]*view

	central struct { // D2: the kernel's central descriptor queue
		mu sync.Mutex
		q  []sendEntry
	}

	closed atomic.Bool
	done   chan struct{}

	port     atomic.Pointer[netPort] // the wire to other hosts (net.go), if any
	portMu   sync.Mutex              // orders a ring's Wake of the endpoint before the engine closes it (net.go)
	remote   atomic.Pointer[[]*VI]   // VIs connected to NICs on other hosts
	lostGen  atomic.Uint32           // moves when such a VI's connection breaks
	hostMu   sync.Mutex
	hostFree uint32       // the first byte of host memory not handed out
	stage    []byte       // engine only: packs small pieces into frames
	early    []earlyFrame // engine only: frames for VIs not connected yet

	// recvsDone counts the receive descriptors completed from the wire
	// (engine only; net.go pollNet).
	recvsDone uint64
	asleep    assistedSleeper // the engine's sleep while the application assists (vi.go)
	// head is the frame head netSend fills (engine only), headBusy
	// while a Send uses it.
	head     [fhSize]byte
	headBusy bool

	liov      []unix.Iovec // engine only: reused by scatter
	riov      []unix.RemoteIovec
	physBuf   []shm.RemoteSeg // engine only: reused by execute
	remoteBuf []shm.RemoteSeg
	localBuf  [][]byte
	toRing    []*view       // engine only: applications to wake after a descriptor
	rsegBuf   []DataSegment // engine only: a receive descriptor's cached segments
	helps     uint32        // passes run by Help (under eng.mu)
	xlateGen  atomic.Uint64 // moved by DeregisterMem: the last-translation register is stale (lastXlate)
	polls     atomic.Uint32 // Help calls that found nothing to run (see Help)
	batch     batch         // engine only: sends moved together

	// eng is the engine's turn: whoever holds mu runs a pass (the engine
	// goroutine, or an application thread assisting it, net.go).
	eng struct {
		mu         sync.Mutex
		lastAssist atomic.Int64 // UnixNano of an application's last Assist (net.go); 0: none since it slept
		recent     atomic.Int64 // tests only: the span recentAssist returns, in ns; 0: assistRecent
		byVI       map[*VI]bool // D2: VIs in d2
		d2         []*VI        // D2: VIs with dispatched entries, in order of first arrival
		idleAt     int64        // nanotime since which passes found nothing to do (net.go ackDue); 0: busy
		idlePasses uint32       // passes since idleAt (ackDue)
	}

	cnt struct {
		posts, taken, executed, kernel, fetches, stalls, sleeps atomic.Int64
		portSleeps                                              atomic.Int64 // the application's sleeps on the network port (procs.go)
		recvPosts, postNs, execNs, cqNs, cqCalls                atomic.Int64
		hostCopies, kernelWrites                                atomic.Int64
		held, naks                                              atomic.Int64 // the wire (net.go)
		enginePasses                                            atomic.Int64 // the engine goroutine's own passes
		lockBusy                                                atomic.Int64 // passes the engine left to the lock's holder (engine)
	}
	// pc are the counters only a pass moves, under eng.mu, which
	// Counters takes to read them: plain adds, where a locked add in
	// every poll of a waiter and several per message held up its
	// loop and each message's way through the NIC.
	pc struct {
		polls, bytes, rdmaW, rdmaR, sends int64
		helped, inline                    int64
		framesOut, framesIn               int64 // the wire (net.go)
		netPolls                          int64 // endpoint polls (net.go)
	}
	postT, execT sampler // the timers of postNs, execNs

	// shared counts the pieces of shared DMA transfers (dmashare.go) this
	// NIC moved as the initiator and as the target.
	shared struct{ init, target atomic.Int64 }
	// stage counts staged reads' chunks (dmastage.go): copied out of the
	// staging buffers (staged), read by the initiator itself before the
	// target staged any chunk of the transfer (early) or after (late),
	// written straight by a target whose next buffer stayed full
	// (direct), and staged reads that found the buffers taken (busy).
	stageCnt struct{ staged, early, late, direct, busy, reads atomic.Int64 }
	// sharedAt is when this NIC last copied a piece of a peer's shared
	// transfer as its target (UnixNano; 0: never), for the MPI device's
	// waiter (Device.Sleep).
	sharedAt atomic.Int64
}

type span struct{ at, n int }

// Open starts a NIC with the given options (use DefaultOptions and
// ParseOptions): it creates its shared segment and starts its engine.
func OpenNIC(o Options) (*NIC, error) {
	if o.Doorbell == 0 || o.AT == 0 || o.CQ == 0 {
		return nil, errors.New("via: options lack a doorbell, translation or CQ design; start from DefaultOptions")
	}
	if o.MaxVIs < 1 || o.RecvQueue < 1 || o.SendQueue < 1 || o.MaxRegions < 1 || o.MaxCQs < 1 || o.HostMem < 0 || o.HostMem > 1<<30 {
		return nil, fmt.Errorf("via: queue sizes must be positive: %+v", o)
	}
	lay := makeLayout(o)
	seg, err := shm.Export(fmt.Sprintf("adimpi-via-%d", os.Getpid()), int(lay.total))
	if err != nil {
		return nil, err
	}
	n := &NIC{o: o, lay: lay, seg: seg, views: map[viewKey]*view{}, done: make(chan struct{})}
	n.self = &view{pid: os.Getpid(), seg: seg, lay: lay, o: o, self: n}
	if lay.total > lay.host {
		n.self.hostVA = uint64(uintptr(unsafe.Pointer(&seg.Mem[lay.host])))
	}
	n.views[viewKey{n.self.pid, seg.FD}] = n.self
	copy((*[16]uint32)(unsafe.Pointer(&seg.Mem[offLayout]))[:], lay.words())
	atomic.StoreUint64(seg.Uint64(offDesign), o.designWord())
	atomic.StoreUint32(seg.Uint32(offStage), lay.stage)
	if lay.total > lay.host {
		atomic.StoreUint64(seg.Uint64(offHostVA), uint64(uintptr(unsafe.Pointer(&seg.Mem[lay.host]))))
	}
	n.hostFree = lay.host
	n.regs = make([]atomic.Pointer[region], o.MaxRegions)
	for i := o.MaxRegions - 1; i >= 0; i-- {
		n.freeReg = append(n.freeReg, i)
	}
	if o.AT == AT2 {
		n.at2Free = []span{{0, o.NICTablePages}}
	}
	empty, none := []*VI{}, []*VI{}
	n.active.Store(&empty)
	n.visSnap.Store(&none)
	n.remote.Store(&none)
	n.eng.byVI = map[*VI]bool{}
	n.asleep.wake = make(chan struct{}, 1)
	n.postT.on, n.execT.on = o.Timers, o.Timers
	go n.engine()
	return n, nil
}

// Options are the NIC's options.
func (n *NIC) Options() Options { return n.o }

// Address is what a peer passes to VI.Connect to reach this NIC.
func (n *NIC) Address() string {
	return fmt.Sprintf("%d:%d:%x:%x", os.Getpid(), n.seg.FD, n.seg.Key, uintptr(unsafe.Pointer(&n.seg.Mem[offProbe])))
}

// Close stops the engine and releases the NIC's memory. Descriptors still
// posted are abandoned.
func (n *NIC) Close() error {
	if n.closed.Swap(true) {
		return nil
	}
	n.self.ringNIC()
	n.wakeEngine()
	<-n.done
	n.viewMu.Lock()
	defer n.viewMu.Unlock()
	var err error
	for k, v := range n.views {
		if v != n.self {
			if cerr := v.seg.Close(); err == nil {
				err = cerr
			}
		}
		delete(n.views, k)
	}
	if cerr := n.seg.Close(); err == nil {
		err = cerr
	}
	return err
}

// AllocHostMem hands out n bytes of the NIC's host memory (Options.HostMem
// in all, 64-byte aligned), valid until Close. It is ordinary memory that
// must be registered before descriptors name it; what sets it apart is
// that the NICs of this host can reach it without the kernel: it lies in
// pages the peers map, as a real NIC reaches pinned host memory by DMA, so
// a NIC moves data into it (and out of it) with a plain copy instead of
// process_vm_writev. Memory from anywhere else works too, through the
// kernel.
func (n *NIC) AllocHostMem(size int) ([]byte, error) {
	n.hostMu.Lock()
	defer n.hostMu.Unlock()
	at := (n.hostFree + 63) &^ 63
	if size <= 0 || uint64(at)+uint64(size) > uint64(n.lay.total) {
		return nil, fmt.Errorf("via: AllocHostMem: %d bytes do not fit the %d bytes of host memory left (Options.HostMem)", size, n.lay.total-min(at, n.lay.total))
	}
	n.hostFree = at + uint32(size)
	return n.seg.Mem[at : at+uint32(size) : at+uint32(size)], nil
}

// hostBytes maps n bytes at address addr of v's process to v's host
// memory as this process maps it, or returns nil when they are not all in
// it.
func (v *view) hostBytes(addr, n uint64) []byte {
	if v.hostVA == 0 || addr < v.hostVA || addr+n > v.hostVA+uint64(v.lay.total-v.lay.host) {
		return nil
	}
	off := uint64(v.lay.host) + addr - v.hostVA
	return v.seg.Mem[off : off+n : off+n]
}

// kernelCrossing is one user→kernel→user switch: the price the seed charges
// for D2's kernel-mediated post and AT1's in-kernel translation.
func (n *NIC) kernelCrossing() {
	syscall.Syscall(syscall.SYS_GETPPID, 0, 0, 0)
	n.cnt.kernel.Add(1)
}

// ---------------------------------------------------------------------------
// Memory registration and translation

// RegisterMem registers b so that descriptors may name it, and returns its
// handle. The memory must stay alive (referenced) until DeregisterMem.
func (n *NIC) RegisterMem(b []byte) (MemHandle, error) {
	if len(b) == 0 {
		return 0, errors.New("via: RegisterMem: empty region")
	}
	base := Addr(b)
	first := base &^ (pageSize - 1)
	np := int((base + uint64(len(b)) - first + pageSize - 1) / pageSize)
	r := &region{mem: b, base: base, first: first, pages: make([]uint64, np), at2: -1}
	for i := range r.pages {
		r.pages[i] = first + uint64(i)*pageSize // the page's frame: see doc.go on addresses
	}
	n.regMu.Lock()
	defer n.regMu.Unlock()
	if len(n.freeReg) == 0 {
		return 0, fmt.Errorf("via: RegisterMem: all %d regions are in use", n.o.MaxRegions)
	}
	if n.o.AT == AT2 {
		// The whole table lives in NIC memory: write every page's entry.
		at := n.at2Alloc(np)
		if at < 0 {
			return 0, fmt.Errorf("via: RegisterMem: the NIC's translation table (%d pages, at=at2) has no room for %d more pages", n.o.NICTablePages, np)
		}
		r.at2 = at
		for i, f := range r.pages {
			atomic.StoreUint64(n.self.u64(n.lay.at2+uint32(at+i)*8), f)
		}
	}
	idx := n.freeReg[len(n.freeReg)-1]
	n.freeReg = n.freeReg[:len(n.freeReg)-1]
	r.h = MemHandle(idx + 1)
	off := n.lay.regions + uint32(idx)*regionSize
	atomic.StoreUint32(n.self.u32(off+4), uint32(np))
	atomic.StoreUint64(n.self.u64(off+8), base)
	atomic.StoreUint64(n.self.u64(off+16), uint64(len(b)))
	table := uint64(uintptr(unsafe.Pointer(&r.pages[0])))
	if r.at2 >= 0 {
		table = uint64(r.at2)
	}
	atomic.StoreUint64(n.self.u64(off+24), table)
	n.regs[idx].Store(r)
	atomic.StoreUint32(n.self.u32(off), 1)
	return r.h, nil
}

// DeregisterMem releases region h. No posted descriptor may still name it.
func (n *NIC) DeregisterMem(h MemHandle) error {
	r := n.region(h)
	if r == nil {
		return fmt.Errorf("via: DeregisterMem: %d is not a registered region", h)
	}
	n.regMu.Lock()
	defer n.regMu.Unlock()
	idx := int(h) - 1
	atomic.StoreUint32(n.self.u32(n.lay.regions+uint32(idx)*regionSize), 0)
	n.regs[idx].Store(nil)
	n.xlateGen.Add(1) // the last-translation register may hold this region
	if n.o.AT == AT3 {
		for i := range r.pages {
			n.self.cacheInvalidate((r.first >> 12) + uint64(i))
		}
	}
	if r.at2 >= 0 {
		n.at2Release(span{r.at2, len(r.pages)})
	}
	n.freeReg = append(n.freeReg, idx)
	return nil
}

func (n *NIC) region(h MemHandle) *region {
	if h == 0 || int(h) > len(n.regs) {
		return nil
	}
	return n.regs[h-1].Load()
}

func (n *NIC) at2Alloc(np int) int {
	for i, s := range n.at2Free {
		if s.n >= np {
			n.at2Free[i] = span{s.at + np, s.n - np}
			return s.at
		}
	}
	return -1
}

func (n *NIC) at2Release(s span) {
	n.at2Free = append(n.at2Free, s)
	// merge neighbours
	for changed := true; changed; {
		changed = false
		for i := range n.at2Free {
			for j := range n.at2Free {
				a, b := n.at2Free[i], n.at2Free[j]
				if i != j && a.at+a.n == b.at && b.n > 0 {
					n.at2Free[i] = span{a.at, a.n + b.n}
					n.at2Free = append(n.at2Free[:j], n.at2Free[j+1:]...)
					changed = true
					break
				}
			}
			if changed {
				break
			}
		}
	}
}

// checkSeg verifies that a data segment lies inside a registered region of
// this NIC: a descriptor may name registered memory only.
func (n *NIC) checkSeg(op string, k int, s DataSegment) (*region, error) {
	r := n.region(s.Handle)
	if r == nil {
		return nil, fmt.Errorf("via: %s: data segment %d (addr %#x, %d bytes) names memory handle %d, which is not a registered region of this NIC", op, k, s.Addr, s.Len, s.Handle)
	}
	if s.Len > 0 && (s.Addr < r.base || s.Addr+uint64(s.Len) > r.base+uint64(len(r.mem))) {
		return nil, fmt.Errorf("via: %s: data segment %d (addr %#x, %d bytes) is not inside registered region %d [%#x, %#x)", op, k, s.Addr, s.Len, s.Handle, r.base, r.base+uint64(len(r.mem)))
	}
	return r, nil
}

// hostTranslate is AT1: the host translates a segment page by page from the
// region's own table (in the kernel: the caller pays one crossing per post).
func hostTranslate(r *region, s DataSegment, out []DataSegment) []DataSegment {
	start := len(out)
	addr, left := s.Addr, uint64(s.Len)
	for left > 0 {
		pg := (addr - r.first) / pageSize
		in := addr & (pageSize - 1)
		k := min(left, pageSize-in)
		phys := r.pages[pg] + in
		if m := len(out) - 1; m >= start && out[m].Addr+uint64(out[m].Len) == phys && uint64(out[m].Len)+k < 1<<31 {
			out[m].Len += uint32(k)
		} else {
			out = append(out, DataSegment{Addr: phys, Len: uint32(k), Handle: s.Handle})
		}
		addr += k
		left -= k
	}
	return out
}

// regionEntry reads region h of a NIC from its segment (NIC memory).
func (v *view) regionEntry(h MemHandle) (np uint32, base, length, table uint64, ok bool) {
	if h == 0 || uint32(h) > v.lay.maxRegions {
		return 0, 0, 0, 0, false
	}
	off := v.lay.regions + uint32(h-1)*regionSize
	if atomic.LoadUint32(v.u32(off)) == 0 {
		return 0, 0, 0, 0, false
	}
	return atomic.LoadUint32(v.u32(off + 4)), atomic.LoadUint64(v.u64(off + 8)), atomic.LoadUint64(v.u64(off + 16)), atomic.LoadUint64(v.u64(off + 24)), true
}

// cache entry access (AT3): a seqlock per entry, since several engines
// (this process's and its peers') translate through one NIC's cache.
func (v *view) cacheLookup(vpn uint64) (uint64, bool) {
	e := v.lay.at3 + uint32(vpn%uint64(v.lay.tlbSize))*cacheEntry
	s1 := atomic.LoadUint64(v.u64(e))
	if s1&1 != 0 {
		return 0, false
	}
	tag, frame := atomic.LoadUint64(v.u64(e+8)), atomic.LoadUint64(v.u64(e+16))
	if atomic.LoadUint64(v.u64(e)) != s1 || tag != vpn+1 {
		return 0, false
	}
	return frame, true
}

func (v *view) cacheFill(vpn, frame uint64) {
	e := v.lay.at3 + uint32(vpn%uint64(v.lay.tlbSize))*cacheEntry
	s := atomic.LoadUint64(v.u64(e))
	if s&1 != 0 || !atomic.CompareAndSwapUint64(v.u64(e), s, s+1) {
		return // another engine is filling it
	}
	atomic.StoreUint64(v.u64(e+8), vpn+1)
	atomic.StoreUint64(v.u64(e+16), frame)
	atomic.StoreUint64(v.u64(e), s+2)
}

func (v *view) cacheInvalidate(vpn uint64) {
	e := v.lay.at3 + uint32(vpn%uint64(v.lay.tlbSize))*cacheEntry
	for {
		s := atomic.LoadUint64(v.u64(e))
		if s&1 != 0 {
			runtime.Gosched()
			continue
		}
		if atomic.LoadUint64(v.u64(e+8)) != vpn+1 {
			return
		}
		if atomic.CompareAndSwapUint64(v.u64(e), s, s+1) {
			atomic.StoreUint64(v.u64(e+8), 0)
			atomic.StoreUint64(v.u64(e), s+2)
			return
		}
	}
}

// nicTranslate is the NIC translating (h, addr, n) of NIC v's registered
// memory into physical segments: AT2 from the table in v's NIC memory, AT3
// through v's translation cache (a miss reads the page's entry of v's host
// table by DMA), AT1 (only for RDMA targets, which the initiator's host
// cannot translate) from v's host table, the range's entries in one DMA.
func (v *view) nicTranslate(h MemHandle, addr, n uint64, out []shm.RemoteSeg) ([]shm.RemoteSeg, error) {
	if v.self != nil {
		if frame, ok := v.lastHit(h, addr, n); ok {
			v.countHits(1)
			return append(out, shm.RemoteSeg{Addr: frame + addr&(pageSize-1), Len: n}), nil
		}
	}
	var gen uint64
	if v.self != nil {
		gen = v.self.xlateGen.Load() // before the region is read: a deregistration after it is not missed
	}
	np, base, length, table, ok := v.regionEntry(h)
	if !ok {
		return out, fmt.Errorf("memory handle %d is not registered at the peer", h)
	}
	if n > 0 && (addr < base || addr+n > base+length) {
		return out, fmt.Errorf("[%#x, %#x) is outside registered region %d [%#x, %#x)", addr, addr+n, h, base, base+length)
	}
	first := base &^ (pageSize - 1)
	start := len(out)
	hits := uint64(0)
	defer func() { v.countHits(hits) }()
	var host []uint64 // AT1: the range's host table entries, read in one DMA
	run := &v.run     // AT3: the entries the last miss read
	run.n = 0
	if v.o.AT == AT1 && n > 0 {
		p0, p1 := (addr-first)/pageSize, (addr+n-1-first)/pageSize
		if p1 >= uint64(np) {
			return out, fmt.Errorf("page %d outside region %d", p1, h)
		}
		host = make([]uint64, p1-p0+1)
		if err := shm.RemoteRead(v.pid, uintptr(table+p0*8), [][]byte{unsafe.Slice((*byte)(unsafe.Pointer(&host[0])), len(host)*8)}); err != nil {
			return out, err
		}
		host = host[:len(host):len(host)]
		table = p0 // index base for host below
	}
	for n > 0 {
		pg := (addr - first) / pageSize
		if pg >= uint64(np) {
			return out, fmt.Errorf("page %d outside region %d", pg, h)
		}
		in := addr & (pageSize - 1)
		k := min(n, pageSize-in)
		var frame uint64
		switch v.o.AT {
		case AT2:
			frame = atomic.LoadUint64(v.u64(v.lay.at2 + uint32(table+pg)*8))
		case AT3:
			vpn := (first >> 12) + pg
			f, hit := v.cacheLookup(vpn)
			if hit {
				hits++
				if v.self != nil && k == n && in+k <= pageSize {
					v.lastUse ^= 1 // the older entry goes
					v.last[v.lastUse] = lastXlate{h: h, vpn: addr >> 12, frame: f, base: base, length: length, gen: gen}
				}
			} else {
				atomic.AddUint64(v.u64(offTLBMisses), 1)
				if !run.has(pg) {
					last := min((addr+n-1-first)/pageSize, uint64(np)-1)
					if err := run.read(v, table, first>>12, pg, last); err != nil {
						return out, err
					}
				}
				f = run.e[pg-run.lo]
			}
			frame = f
		default:
			frame = host[pg-table]
		}
		phys := frame + in
		if m := len(out) - 1; m >= start && out[m].Addr+out[m].Len == phys {
			out[m].Len += k
		} else {
			out = append(out, shm.RemoteSeg{Addr: phys, Len: k})
		}
		addr += k
		n -= k
	}
	return out, nil
}

// tlbBurst is how many host-table entries an AT3 miss reads in one DMA:
// the entry that missed and those of the following pages of the same
// transfer, which the NIC is about to need. A transfer larger than the
// cache's reach (tlbsize pages) misses on every page, because by the time
// it comes back to a page its entry was displaced; fetching one entry per
// DMA made such a transfer cost a process_vm_readv per 4 KiB page.
const tlbBurst = 64

// tlbRun is the host-table entries of consecutive pages [lo, lo+n)
// that one AT3 miss read.
type tlbRun struct {
	lo, n uint64
	e     [tlbBurst]uint64
}

func (r *tlbRun) has(pg uint64) bool { return pg >= r.lo && pg < r.lo+r.n }

// read fetches the entries of pages [pg, min(last, pg+tlbBurst-1)] of the
// host table at table in one DMA and fills the translation cache with them
// (firstVPN is the region's first page).
func (r *tlbRun) read(v *view, table, firstVPN, pg, last uint64) error {
	k := min(last-pg+1, tlbBurst)
	b := unsafe.Slice((*byte)(unsafe.Pointer(&r.e[0])), k*8)
	if err := shm.RemoteRead(v.pid, uintptr(table+pg*8), [][]byte{b}); err != nil {
		return err
	}
	atomic.AddUint64(v.u64(offTLBReads), 1)
	r.lo, r.n = pg, k
	for i, f := range r.e[:k] {
		v.cacheFill(firstVPN+pg+uint64(i), f)
	}
	return nil
}

// translateSegs turns a descriptor's segments into physical segments of
// NIC v: already translated by the host (AT1), or by the NIC now.
func (v *view) translateSegs(segs []DataSegment, out []shm.RemoteSeg) ([]shm.RemoteSeg, error) {
	for _, s := range segs {
		if s.Len == 0 {
			continue
		}
		if v.o.AT == AT1 {
			out = append(out, shm.RemoteSeg{Addr: s.Addr, Len: uint64(s.Len)})
			continue
		}
		var err error
		if out, err = v.nicTranslate(s.Handle, s.Addr, uint64(s.Len), out); err != nil {
			return out, err
		}
	}
	return out, nil
}

// localPieces maps the engine's own physical segments to memory it can
// copy from or into. The physical address of a page is its virtual address
// in this process (see doc.go), so the region's slice gives the bytes.
func (n *NIC) localPieces(segs []DataSegment, phys []shm.RemoteSeg, out [][]byte) ([][]byte, error) {
	// phys came from segs in order; walk both to find each piece's region.
	si, used := 0, uint64(0)
	for _, p := range phys {
		for si < len(segs) && uint64(segs[si].Len) == used {
			si, used = si+1, 0
		}
		if si == len(segs) {
			return out, errors.New("translation produced more bytes than the segments hold")
		}
		r := n.region(segs[si].Handle)
		if r == nil || p.Addr < r.base || p.Addr+p.Len > r.base+uint64(len(r.mem)) {
			return out, fmt.Errorf("physical segment [%#x, +%d) is outside region %d", p.Addr, p.Len, segs[si].Handle)
		}
		off := p.Addr - r.base
		out = append(out, r.mem[off:off+p.Len])
		used += p.Len
	}
	return out, nil
}
