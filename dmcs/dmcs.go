package dmcs

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/adimpi/adimpi/internal/goid"
	"github.com/adimpi/adimpi/internal/shm"
	"github.com/adimpi/adimpi/mpi"
)

// InlineMax is the largest payload that travels in the request's own
// message; larger payloads follow in a second message.
const InlineMax = 1024

// MaxArgs is the largest number of word arguments of an RSR.
const MaxArgs = 4

// The message kinds.
const (
	kindRSR = iota + 1
	kindPut
	kindAcc
	kindGet
	kindGetReply
	kindMalloc
	kindMallocReply
	kindFree
	kindAck
)

// The header of every request, little-endian: kind u8, nargs u8, flags
// u8, op u8, handler u32, args [4]u64, ptr u64, payload length u64, reply
// id u64; then up to InlineMax bytes of payload.
const (
	hdrLen       = 64
	flagSeparate = 1 // the payload follows in a message on tagData
)

// The tags on DMCS's own communicator.
const (
	tagReq  = 1
	tagData = 2
)

// Handler is a remote service: it runs on the target, inside a poll, with
// the requesting rank, the RSR's word arguments and its payload (valid
// only until the handler returns). It must not block; it may send requests.
type Handler func(d *DMCS, src int, args []uint64, payload []byte)

// Options choose how DMCS runs.
type Options struct {
	// Comm is the communicator whose processes talk (default
	// mpi.World()); DMCS works on a duplicate of it.
	Comm *mpi.Comm
	// PollThread starts a goroutine that serves requests as they arrive;
	// otherwise they are served in Poll (and while this process waits for
	// its own synchronous operations).
	PollThread bool
	// Timing makes DMCS measure where its time goes (Times).
	Timing bool
	// Spin is how long a process waiting for requests (the poll thread,
	// or a synchronous call) keeps polling, yielding the CPU between
	// polls, before it sleeps until a request comes; 0 means 70 µs. A
	// sleeper costs its waker a futex wake-up and itself the scheduler's
	// latency: a longer Spin buys latency with CPU time.
	Spin time.Duration
	// Heap gives every process a heap of this many bytes in an MPI window:
	// HeapAlloc and Malloc take memory there, and Put, Get and PutOp of
	// it from a process of the same host are one-sided RMA operations
	// that the target does not serve (docs/dmcs.md).
	Heap int
	// NoShm sends every request as an MPI message, even between
	// processes of one host (which otherwise use shared-memory rings).
	NoShm bool
}

// Ptr names memory of one process for the others: a segment (made by
// Expose or Malloc) and an offset into it. The zero Ptr is nil.
type Ptr uint64

// Add is p moved n bytes further into its segment.
func (p Ptr) Add(n int) Ptr { return p + Ptr(n) }

func (p Ptr) seg() uint32    { return uint32(p >> 32) }
func (p Ptr) off() uint64    { return uint64(p) & (1<<32 - 1) }
func mkPtr(seg uint32) Ptr   { return Ptr(uint64(seg) << 32) }
func (p Ptr) String() string { return fmt.Sprintf("dmcs.Ptr(%d+%d)", p.seg(), p.off()) }

// Counter counts completed asynchronous operations (a remote
// acknowledgement each). Wait for it with DMCS.WaitCounter.
type Counter struct {
	n   atomic.Int64
	err atomic.Pointer[error]
}

// done counts an operation completed at once (through a window): its
// error goes to the counter, like a target's, and nil is returned.
func (c *Counter) done(err error) error {
	if err != nil {
		c.err.CompareAndSwap(nil, &err)
	}
	c.n.Add(1)
	return nil
}

// Value is the number of operations completed so far, failed ones included.
func (c *Counter) Value() int64 { return c.n.Load() }

// Err is the first error a target reported for an operation counted here
// (a Ptr it does not have, a block it did not allocate), or nil.
func (c *Counter) Err() error {
	if e := c.err.Load(); e != nil {
		return *e
	}
	return nil
}

// pending is an operation waiting for its reply.
type pending struct {
	c    *Counter
	buf  []byte // a Get's destination
	ptr  *Ptr   // a Malloc's result
	live bool
}

// pendTable holds the operations waiting for replies; an operation's id
// is its slot + 1, and slots are reused (no map on the per-request path).
type pendTable struct {
	slots []pending
	free  []uint64
	n     int
}

func (t *pendTable) add(p pending) uint64 {
	p.live = true
	t.n++
	if k := len(t.free); k > 0 {
		id := t.free[k-1]
		t.free = t.free[:k-1]
		t.slots[id-1] = p
		return id
	}
	t.slots = append(t.slots, p)
	return uint64(len(t.slots))
}

// peek returns operation id, if it waits.
func (t *pendTable) peek(id uint64) (pending, bool) {
	if id == 0 || id > uint64(len(t.slots)) || !t.slots[id-1].live {
		return pending{}, false
	}
	return t.slots[id-1], true
}

// remove takes operation id out of the table.
func (t *pendTable) remove(id uint64) (pending, bool) {
	p, ok := t.peek(id)
	if ok {
		t.slots[id-1] = pending{}
		t.free = append(t.free, id)
		t.n--
	}
	return p, ok
}

// DMCS is one process's end of the substrate.
type DMCS struct {
	comm   *mpi.Comm
	rank   int
	size   int
	thread bool

	handlers []Handler     // registered, by number
	deferred []deferredRSR // requests that came before their handler was registered here

	mu       sync.Mutex
	cond     *sync.Cond // completions, for waiters while the poll thread serves
	segs     map[uint32][]byte
	malloced map[Ptr]bool // blocks peers allocated here (Free frees only these)
	nextSeg  uint32
	pend     pendTable
	sends    []*mpi.Request // outstanding sends
	bufs     [][]byte       // header buffers of outstanding sends, by index in sends
	free     [][]byte       // header buffers to reuse
	err      error          // the first error a poll met

	pollMu      sync.Mutex    // whoever holds it serves requests (rings, the posted receive)
	hdr         header        // the request being served (under pollMu: a handler's args point into it)
	shm         *shmPath      // the rings to and from processes of this host; nil: none
	heap        *heap         // Options.Heap's window; nil: none
	native      []bool        // by rank: the heap window reaches its memory directly
	me          *inbox        // this process's doorbell
	stop        atomic.Bool   // Close ends the poll thread and the watcher
	waiters     atomic.Int32  // goroutines that want to serve in the poll thread's place
	parked      atomic.Bool   // the poll thread sleeps while waiters serve
	waiterHolds bool          // under pollMu: a waiter polls in the poll thread's place
	holderG     atomic.Int64  // that waiter's goroutine id, once it has run a handler
	proxy       atomic.Bool   // a waiter counted the parked poll thread among the bell's sleepers
	threadID    atomic.Int64  // the poll thread's goroutine id
	done        chan struct{} // closed when the poll thread ends

	// Requests from other hosts (or every request, without shm) come as
	// MPI messages into one posted receive. The poll tests it; before it
	// sleeps it arms a watcher goroutine, which waits for the message in
	// MPI and hands it over (p2pReady), ringing the doorbell. While armed,
	// only the watcher touches the receive.
	remote    bool
	rbuf      []byte
	rreq      *mpi.Request
	armed     bool // under pollMu
	p2pReady  atomic.Bool
	p2pSt     mpi.Status
	p2pErr    error
	arm       chan struct{} // the poll asks the watcher to wait for the receive
	watchDone chan struct{}
	spin      int64 // how long a waiter polls before it yields (ns)
	yield     int64 // how long it then polls and yields before it sleeps (ns)

	sent, recvd atomic.Int64 // requests sent and handled, for Close's quiescence
	clk         clock
}

// Init starts DMCS over opts.Comm (default mpi.World()); it is collective.
func Init(opts Options) (*DMCS, error) {
	c := opts.Comm
	if c == nil {
		c = mpi.World()
	}
	if c == nil {
		return nil, errors.New("dmcs: Init: MPI is not running")
	}
	dup, err := c.Dup()
	if err != nil {
		return nil, fmt.Errorf("dmcs: Init: %w", err)
	}
	dup.SetName("dmcs")
	d := &DMCS{comm: dup, rank: dup.Rank(), size: dup.Size(), thread: opts.PollThread,
		segs: map[uint32][]byte{}, malloced: map[Ptr]bool{}, nextSeg: 1}
	d.cond = sync.NewCond(&d.mu)
	d.clk.on = opts.Timing
	d.spin, d.yield = spinNs, yieldNs
	if d.size > runtime.NumCPU() {
		d.spin = 0 // processes outnumber cores: a spinning waiter takes a peer's CPU
	}
	if opts.Spin > 0 {
		d.spin, d.yield = min(d.spin, int64(opts.Spin)), max(0, int64(opts.Spin)-d.spin)
	}
	if !opts.NoShm {
		if d.shm, err = setupShm(d); err != nil {
			return nil, err
		}
	}
	if opts.Heap > 0 {
		if d.heap, err = setupHeap(d, opts.Heap); err != nil {
			return nil, err
		}
		d.native = make([]bool, d.size)
		for i := range d.native {
			d.native[i] = d.heap.win.Native(i)
		}
	}
	if d.shm != nil {
		d.me = d.shm.me
		for _, l := range d.shm.local {
			d.remote = d.remote || l < 0
		}
	} else {
		d.me = privateInbox()
		d.remote = true
	}
	if d.remote {
		d.rbuf = make([]byte, hdrLen+InlineMax)
		if err := d.post(); err != nil {
			return nil, err
		}
		d.arm = make(chan struct{}, 1)
		d.watchDone = make(chan struct{})
		go d.watch()
	}
	if d.thread {
		d.done = make(chan struct{})
		go d.pollThread()
	}
	return d, nil
}

// Rank is this process's rank (dmcs_my_proc).
func (d *DMCS) Rank() int { return d.rank }

// Size is the number of processes (dmcs_num_procs).
func (d *DMCS) Size() int { return d.size }

// Comm is the communicator DMCS sends on (a duplicate of Options.Comm).
func (d *DMCS) Comm() *mpi.Comm { return d.comm }

// Register makes h a remote service and returns its number. Every process
// registers the same handlers in the same order. A request that reaches a
// process before it has registered the handler is kept and runs once it
// has (a peer may start sending as soon as its own Register returns).
func (d *DMCS) Register(h Handler) int {
	d.mu.Lock()
	d.handlers = append(d.handlers, h)
	n := len(d.handlers) - 1
	wake := len(d.deferred) > 0
	d.mu.Unlock()
	if wake {
		// The kept requests run in a poll: wake the poll thread.
		d.me.force()
	}
	return n
}

// Expose makes b addressable by the other processes and returns its Ptr.
// Processes that expose buffers in the same order get equal Ptrs. Exposing
// is local: peers must not use the Ptr before it is exposed here (a
// Barrier after the Exposes, for instance); an operation on memory not
// exposed yet fails, at the requester.
func (d *DMCS) Expose(b []byte) Ptr {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.addSeg(b)
}

func (d *DMCS) addSeg(b []byte) Ptr {
	s := d.nextSeg
	d.nextSeg++
	d.segs[s] = b
	return mkPtr(s)
}

// Bytes returns n bytes of this process's memory at p (memory it exposed,
// or that a peer allocated here with Malloc).
func (d *DMCS) Bytes(p Ptr, n int) ([]byte, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.mem(p, n)
}

// mem is Bytes under d.mu.
func (d *DMCS) mem(p Ptr, n int) ([]byte, error) {
	b, ok := d.segs[p.seg()]
	if p.seg() == heapSeg && d.heap != nil {
		b, ok = d.heap.mem, true
	}
	if !ok {
		return nil, fmt.Errorf("dmcs: %v is not memory of rank %d", p, d.rank)
	}
	off := p.off()
	if n < 0 || off+uint64(n) > uint64(len(b)) {
		return nil, fmt.Errorf("dmcs: %d bytes at %v overrun its segment of %d bytes on rank %d", n, p, len(b), d.rank)
	}
	return b[off : off+uint64(n)], nil
}

// header fills a request header.
type header struct {
	kind, nargs, flags, op uint8
	handler                uint32
	args                   [MaxArgs]uint64
	ptr                    Ptr
	n                      uint64
	id                     uint64
}

func (h *header) put(b []byte) {
	b[0], b[1], b[2], b[3] = h.kind, h.nargs, h.flags, h.op
	binary.LittleEndian.PutUint32(b[4:], h.handler)
	for i, a := range h.args {
		binary.LittleEndian.PutUint64(b[8+8*i:], a)
	}
	binary.LittleEndian.PutUint64(b[40:], uint64(h.ptr))
	binary.LittleEndian.PutUint64(b[48:], h.n)
	binary.LittleEndian.PutUint64(b[56:], h.id)
}

func (h *header) get(b []byte) {
	h.kind, h.nargs, h.flags, h.op = b[0], b[1], b[2], b[3]
	h.handler = binary.LittleEndian.Uint32(b[4:])
	for i := range h.args {
		h.args[i] = binary.LittleEndian.Uint64(b[8+8*i:])
	}
	h.ptr = Ptr(binary.LittleEndian.Uint64(b[40:]))
	h.n = binary.LittleEndian.Uint64(b[48:])
	h.id = binary.LittleEndian.Uint64(b[56:])
}

// send starts a request to dest: the header (with payload inline when it
// fits) and, for a larger payload, a second message. The payload of a
// separate message is referenced until its send completes.
func (d *DMCS) send(dest int, h *header, payload []byte) error {
	if dest < 0 || dest >= d.size {
		return fmt.Errorf("dmcs: rank %d is out of range [0, %d)", dest, d.size)
	}
	t0 := d.clk.now()
	h.n = uint64(len(payload))
	if d.shm != nil && d.shm.out[dest] != nil {
		return d.sendShm(dest, h, payload, t0)
	}
	separate := len(payload) > InlineMax
	if separate {
		h.flags |= flagSeparate
	}
	d.mu.Lock()
	var b []byte
	if k := len(d.free); k > 0 {
		b, d.free = d.free[k-1], d.free[:k-1]
	} else {
		b = make([]byte, hdrLen+InlineMax)
	}
	h.put(b)
	n := hdrLen
	if !separate {
		n += copy(b[hdrLen:], payload)
	}
	d.mu.Unlock()
	m0 := d.clk.now()
	q, err := mpi.Isend(d.comm, b[:n], dest, tagReq)
	if err != nil {
		return fmt.Errorf("dmcs: %w", err)
	}
	var q2 *mpi.Request
	if separate {
		if q2, err = mpi.Isend(d.comm, payload, dest, tagData); err != nil {
			return fmt.Errorf("dmcs: %w", err)
		}
	}
	m := d.clk.now() - m0
	d.sent.Add(1)
	d.mu.Lock()
	d.sends = append(d.sends, q)
	d.bufs = append(d.bufs, b)
	if q2 != nil {
		d.sends = append(d.sends, q2)
		d.bufs = append(d.bufs, nil)
	}
	if len(d.sends) >= reapAt {
		m += d.reap()
	}
	d.mu.Unlock()
	d.clk.sent(t0, m)
	return nil
}

// sendShm is send to a process of this host: the request goes into its
// ring, a payload over RingMax as an MPI message beside it.
func (d *DMCS) sendShm(dest int, h *header, payload []byte, t0 int64) error {
	var m int64
	if len(payload) > RingMax {
		h.flags |= flagSeparate
		m0 := d.clk.now()
		q, err := mpi.Isend(d.comm, payload, dest, tagData)
		if err != nil {
			return fmt.Errorf("dmcs: %w", err)
		}
		m = d.clk.now() - m0
		d.mu.Lock()
		d.sends = append(d.sends, q)
		d.bufs = append(d.bufs, nil)
		if len(d.sends) >= reapAt {
			m += d.reap()
		}
		d.mu.Unlock()
		payload = nil
	}
	d.sent.Add(1)
	d.shm.send(dest, h, payload)
	d.clk.sent(t0, m)
	return nil
}

// Copies reports whether RSRPayload copies a payload of n bytes to dest
// into the request, and so returns at once: up to RingMax bytes to a
// process of this host, InlineMax to others.
func (d *DMCS) Copies(dest, n int) bool {
	if d.shm != nil && dest >= 0 && dest < d.size && d.shm.out[dest] != nil {
		return n <= RingMax
	}
	return n <= InlineMax
}

// reapAt is how many sends may be outstanding before send looks for
// completed ones: looking costs a test (a progress pass) per send.
const reapAt = 32

// reap drops the sends that have completed (under d.mu), with one
// progress pass for all of them (MPI_Testsome). It returns the time that
// took (Timing).
func (d *DMCS) reap() int64 {
	if len(d.sends) == 0 {
		return 0
	}
	t0 := d.clk.now()
	idx, sts, err := mpi.Testsome(d.sends)
	if err != nil && d.err == nil {
		d.err = err
	}
	for k, i := range idx {
		if sts[k].Err != nil && d.err == nil {
			d.err = sts[k].Err
		}
		if d.bufs[i] != nil {
			d.free = append(d.free, d.bufs[i])
		}
		d.sends[i] = nil
	}
	j := 0
	for i, q := range d.sends {
		if q != nil {
			d.sends[j], d.bufs[j] = q, d.bufs[i]
			j++
		}
	}
	clear(d.sends[j:])
	clear(d.bufs[j:])
	d.sends, d.bufs = d.sends[:j], d.bufs[:j]
	return d.clk.now() - t0
}

// newOp records an operation that waits for a reply and returns its id.
func (d *DMCS) newOp(p pending) uint64 {
	d.mu.Lock()
	id := d.pend.add(p)
	d.mu.Unlock()
	return id
}

// RSR asks dest to run handler h with up to MaxArgs word arguments
// (dmcs_async_rsr0 ... rsr4). It returns once the request is on its way.
func (d *DMCS) RSR(dest, h int, args ...uint64) error {
	return d.RSRPayload(dest, h, nil, args...)
}

// RSRPayload is RSR with a byte payload, which the handler receives. It
// returns once payload may be reused: at once when the payload is copied
// into the request (up to RingMax bytes to a process of this host,
// InlineMax to another), once the handler has run for larger ones (this
// process serves requests meanwhile).
func (d *DMCS) RSRPayload(dest, h int, payload []byte, args ...uint64) error {
	if len(args) > MaxArgs {
		return fmt.Errorf("dmcs: RSR with %d arguments; at most %d", len(args), MaxArgs)
	}
	if h < 0 || h >= len(d.handlers) {
		return fmt.Errorf("dmcs: RSR of handler %d: %d handlers are registered", h, len(d.handlers))
	}
	hd := header{kind: kindRSR, nargs: uint8(len(args)), handler: uint32(h)}
	copy(hd.args[:], args)
	if d.Copies(dest, len(payload)) {
		return d.send(dest, &hd, payload)
	}
	var c Counter
	hd.id = d.newOp(pending{c: &c})
	if err := d.send(dest, &hd, payload); err != nil {
		return err
	}
	return d.WaitCounter(&c, 1)
}

// RSRPayloadAsync is RSRPayload returning at once: payload must not
// change until c counts the request, once the handler has run.
func (d *DMCS) RSRPayloadAsync(dest, h int, payload []byte, c *Counter, args ...uint64) error {
	if len(args) > MaxArgs {
		return fmt.Errorf("dmcs: RSR with %d arguments; at most %d", len(args), MaxArgs)
	}
	if h < 0 || h >= len(d.handlers) {
		return fmt.Errorf("dmcs: RSR of handler %d: %d handlers are registered", h, len(d.handlers))
	}
	hd := header{kind: kindRSR, nargs: uint8(len(args)), handler: uint32(h), id: d.newOp(pending{c: c})}
	copy(hd.args[:], args)
	return d.send(dest, &hd, payload)
}

// PutAsync stores data at dest's p; c counts it once dest has stored it.
// data must not change until then.
func (d *DMCS) PutAsync(dest int, p Ptr, data []byte, c *Counter) error {
	if d.oneSided(dest, p) {
		return c.done(d.winPut(dest, p, data))
	}
	return d.send(dest, &header{kind: kindPut, ptr: p, id: d.newOp(pending{c: c})}, data)
}

// Put stores data at dest's p and returns once dest has (dmcs_put).
func (d *DMCS) Put(dest int, p Ptr, data []byte) error {
	if d.oneSided(dest, p) {
		return d.winPut(dest, p, data)
	}
	var c Counter
	if err := d.PutAsync(dest, p, data, &c); err != nil {
		return err
	}
	return d.wait1(&c, "Put", dest)
}

// GetAsync fetches len(buf) bytes at dest's p into buf; c counts it once
// they are there.
func (d *DMCS) GetAsync(dest int, p Ptr, buf []byte, c *Counter) error {
	if d.oneSided(dest, p) {
		return c.done(d.winGet(dest, p, buf))
	}
	hd := header{kind: kindGet, ptr: p, id: d.newOp(pending{c: c, buf: buf})}
	hd.args[0], hd.nargs = uint64(len(buf)), 1
	return d.send(dest, &hd, nil)
}

// Get fetches len(buf) bytes at dest's p into buf (dmcs_get).
func (d *DMCS) Get(dest int, p Ptr, buf []byte) error {
	if d.oneSided(dest, p) {
		return d.winGet(dest, p, buf)
	}
	var c Counter
	if err := d.GetAsync(dest, p, buf, &c); err != nil {
		return err
	}
	return d.wait1(&c, "Get", dest)
}

// Malloc allocates n bytes on dest (zeroed) and returns their Ptr (dmcs_malloc).
func (d *DMCS) Malloc(dest, n int) (Ptr, error) {
	var c Counter
	var p Ptr
	hd := header{kind: kindMalloc, id: d.newOp(pending{c: &c, ptr: &p})}
	hd.args[0], hd.nargs = uint64(n), 1
	if err := d.send(dest, &hd, nil); err != nil {
		return 0, err
	}
	if err := d.WaitCounter(&c, 1); err != nil {
		return 0, err
	}
	if p == 0 {
		return 0, fmt.Errorf("dmcs: rank %d could not allocate %d bytes", dest, n)
	}
	return p, nil
}

// Free releases memory that Malloc allocated on dest (dmcs_free).
func (d *DMCS) Free(dest int, p Ptr) error {
	var c Counter
	if err := d.send(dest, &header{kind: kindFree, ptr: p, id: d.newOp(pending{c: &c})}, nil); err != nil {
		return err
	}
	return d.wait1(&c, "Free", dest)
}

// wait1 waits for the one operation c counts and returns its error.
func (d *DMCS) wait1(c *Counter, op string, dest int) error {
	if err := d.WaitCounter(c, 1); err != nil {
		return err
	}
	if err := c.Err(); err != nil {
		return fmt.Errorf("dmcs: %s on rank %d: %w", op, dest, err)
	}
	return nil
}

// WaitCounter returns once c has counted target operations, serving
// requests meanwhile.
func (d *DMCS) WaitCounter(c *Counter, target int64) error {
	if c.Value() >= target {
		return nil
	}
	if d.thread {
		return d.waitThreaded(func() bool { return c.Value() >= target })
	}
	if !d.pollMu.TryLock() {
		return errBlocked
	}
	defer d.pollMu.Unlock()
	return d.waitLoop(func() bool { return c.Value() >= target })
}

var errBlocked = errors.New("dmcs: a handler called a synchronous operation (handlers must not block)")

// Poll serves every request that has arrived and returns how many it
// served. With a poll thread it does nothing.
func (d *DMCS) Poll() (int, error) {
	if !d.pollMu.TryLock() {
		return 0, nil // the poll thread, or a poll further up this stack
	}
	n, err := d.pollOnce()
	d.pollMu.Unlock()
	d.mu.Lock()
	if len(d.sends) > 0 {
		d.clk.mpi.Add(d.reap())
	}
	if err == nil {
		err = d.err
	}
	d.mu.Unlock()
	return n, err
}

// post posts the receive of the next request from another host.
func (d *DMCS) post() error {
	q, err := mpi.Irecv(d.comm, d.rbuf, mpi.AnySource, tagReq)
	if err != nil {
		return fmt.Errorf("dmcs: %w", err)
	}
	d.rreq = q
	return nil
}

// pollThread serves requests until Close stops it. While a goroutine of
// the program waits for its own operations (waitThreaded), that goroutine
// serves instead and the poll thread sleeps: two pollers would only take
// each other's CPU.
func (d *DMCS) pollThread() {
	defer close(d.done)
	d.threadID.Store(goid.ID())
	var err error
	for err == nil && !d.stop.Load() {
		d.pollMu.Lock()
		err = d.waitLoop(func() bool { return d.stop.Load() || d.waiters.Load() > 0 })
		d.pollMu.Unlock()
		// Parked: not counted among the bell's sleepers while a waiter
		// polls (senders need not wake anyone); a waiter that hands the
		// poll back counts this thread in for it (proxy), so that the
		// next request wakes it, and wakes it at once if one waits.
		d.parked.Store(true)
		for err == nil && d.waiters.Load() > 0 && !d.stop.Load() {
			b := d.me
			seq := atomic.LoadUint32(b.bell)
			if d.waiters.Load() > 0 && !d.stop.Load() {
				err = shm.FutexWait(b.bell, seq, 0)
			}
		}
		d.parked.Store(false)
		d.dropProxy()
	}
	d.mu.Lock()
	if err != nil && d.err == nil {
		d.err = err
	}
	d.cond.Broadcast()
	d.mu.Unlock()
}

// waitThreaded is a wait of the program's, with a poll thread, until done
// holds: the waiter takes the poll over (so the reply it waits for is
// served by the goroutine that wants it, with no wake-up in between), or,
// when the poll thread does not hand over soon (it runs a long handler,
// or the waiter is a handler itself), sleeps until the poll thread has
// served it.
func (d *DMCS) waitThreaded(done func() bool) error {
	if done() {
		return nil
	}
	d.waiters.Add(1)
	if !d.parked.Load() {
		d.me.force() // the poll thread may sleep in its own wait: it must see the waiter
	}
	d.dropProxy()
	t0 := nanotime()
	for !d.pollMu.TryLock() {
		if done() {
			d.waiters.Add(-1)
			d.me.wakeAll()
			return nil
		}
		if nanotime()-t0 > handOver {
			d.waiters.Add(-1)
			d.me.wakeAll()
			if g := goid.ID(); g == d.threadID.Load() || g == d.holderG.Load() {
				return errBlocked // a handler, on the goroutine that polls
			}
			d.mu.Lock()
			defer d.mu.Unlock()
			for !done() && d.err == nil {
				d.cond.Wait()
			}
			return d.err
		}
		runtime.Gosched()
	}
	d.waiterHolds = true
	err := d.waitLoop(done)
	d.waiterHolds = false
	d.holderG.Store(0)
	d.pollMu.Unlock()
	if d.waiters.Add(-1) == 0 {
		// Hand the poll back to the parked poll thread: count it among
		// the sleepers so that the next request through a ring wakes it,
		// and wake it now only for one that came before (a wake-up costs
		// a system call), or if messages from other hosts may come
		// (nothing rings for those until the poll arms the watcher).
		if d.proxy.CompareAndSwap(false, true) {
			atomic.AddUint32(d.me.sleepers, 1)
		}
		if d.remote || d.ready() {
			d.me.wakeAll()
		}
	}
	if err != nil {
		d.mu.Lock()
		if d.err == nil {
			d.err = err
		}
		d.cond.Broadcast()
		d.mu.Unlock()
	}
	return err
}

// dropProxy takes back the count a waiter added to the bell's sleepers
// for the parked poll thread.
func (d *DMCS) dropProxy() {
	if d.proxy.CompareAndSwap(true, false) {
		atomic.AddUint32(d.me.sleepers, ^uint32(0))
	}
}

// handOver is how long a waiter tries to take the poll over from the
// poll thread before it sleeps instead.
const handOver = 200_000
