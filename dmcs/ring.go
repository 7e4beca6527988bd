package dmcs

import (
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/adimpi/adimpi/internal/shm"
	"github.com/adimpi/adimpi/mpi"
)

// Requests between processes of one host travel through shared memory:
// every process has an inbox in an MPI shared window (WinAllocateShared
// over the host's processes), made of one single-producer ring per sender
// of the host. A request is one record written into the target's ring and
// published by a store of the ring's tail: no MPI call, no matching, no
// acknowledgement of its own. The target's poll reads the rings, serves
// the records in order and frees their space by a store of the head.
//
// A process asleep waiting for requests sleeps on its inbox's doorbell (a
// futex word) after announcing it in sleepers; a sender that finds a
// sleeper rings the bell. A sender that finds the ring full keeps the
// record in an overflow queue (a request never blocks) and raises the
// ring's want flag; the target, once it has freed space, rings the
// sender's bell, and the sender's next poll moves the queue into the ring.

// The inbox layout: a control block (doorbell, sleepers), then one ring
// per host process, each a control block (tail, head, want on lines of
// their own) and ringBytes of records.
const (
	line       = 64
	inboxCtl   = 2 * line
	ringCtl    = 3 * line
	ringBytes  = 32 << 10
	ringStride = ringCtl + ringBytes
)

// RingMax is the largest payload that travels inside a request through
// shared memory; larger ones follow as an MPI message, received straight
// into the destination memory.
const RingMax = 8 << 10

// The record layout, 8-byte words: kind|nargs<<8|flags<<16|op<<24|handler<<32,
// payload length, ptr, id, the arguments, the payload padded to a word. A
// record whose first word is recWrap sends the reader back to the ring's
// start.
const (
	recFixed = 32
	recWrap  = 0xff
)

// inbox is a process's view of one host process's inbox.
type inbox struct {
	bell     *uint32 // the doorbell: bumped and woken by whoever rings it
	sleepers *uint32 // how many of the owner's goroutines sleep on bell
	mem      []byte
}

func (b *inbox) word(off int) *uint64 { return (*uint64)(unsafe.Pointer(&b.mem[off])) }

// ring wakes the inbox's sleepers, if any.
func (b *inbox) ring() {
	if atomic.LoadUint32(b.sleepers) != 0 {
		atomic.AddUint32(b.bell, 1)
		_ = shm.FutexWake(b.bell, 1<<30)
	}
}

// outRing is this process's end of its ring in a host peer's inbox.
type outRing struct {
	mu         sync.Mutex
	box        *inbox
	tail, head *uint64 // tail is ours; head is the reader's
	want       *uint64
	data       []byte
	over       [][]byte // records that did not fit, in order
}

// inRing is this process's end of the ring that one host peer writes.
type inRing struct {
	src        int // the peer's rank in DMCS's communicator
	tail, head *uint64
	want       *uint64
	data       []byte
	pos        uint64 // the head, as the reader knows it
}

// shmPath is the shared-memory transport of one process.
type shmPath struct {
	win   *mpi.Win
	node  *mpi.Comm
	local []int      // DMCS rank → host index, -1 for other hosts
	boxes []*inbox   // by host index
	me    *inbox     // this process's inbox
	out   []*outRing // by DMCS rank (nil for other hosts)
	in    []*inRing  // by host index
	over  atomic.Int32
}

// setupShm makes the shared inboxes of the processes of this host: it is
// collective over d.comm. It returns nil, nil where there is no shared
// memory to be had (a window the device cannot give), and DMCS then sends
// every request as an MPI message.
func setupShm(d *DMCS) (*shmPath, error) {
	node, err := d.comm.SplitType(mpi.SplitTypeShared, d.rank)
	if err != nil {
		return nil, fmt.Errorf("dmcs: Init: %w", err)
	}
	n := node.Size()
	ranks := make([]int64, n)
	if err := mpi.Allgather(node, []int64{int64(d.rank)}, ranks); err != nil {
		return nil, fmt.Errorf("dmcs: Init: %w", err)
	}
	size := inboxCtl + n*ringStride
	win, mem, err := mpi.WinAllocateSharedBytes(node, size+line, 1, nil)
	if err != nil {
		node.Free()
		return nil, fmt.Errorf("dmcs: Init: %w", err)
	}
	s := &shmPath{win: win, node: node, local: make([]int, d.size), boxes: make([]*inbox, n),
		out: make([]*outRing, d.size), in: make([]*inRing, n)}
	for i := range s.local {
		s.local[i] = -1
	}
	for i, r := range ranks {
		s.local[r] = i
	}
	_ = mem
	me := node.Rank()
	for i := 0; i < n; i++ {
		m, _, err := win.SharedQuery(i)
		if err != nil {
			win.Free()
			node.Free()
			return nil, fmt.Errorf("dmcs: Init: %w", err)
		}
		// Align the inbox to a cache line: the window's memory follows a
		// control block of its own.
		a := int((line - uintptr(unsafe.Pointer(&m[0]))%line) % line)
		m = m[a : a+size]
		b := &inbox{mem: m}
		b.bell = (*uint32)(unsafe.Pointer(&m[0]))
		b.sleepers = (*uint32)(unsafe.Pointer(&m[line]))
		s.boxes[i] = b
		// This process's ring in process i's inbox.
		at := inboxCtl + me*ringStride
		s.out[ranks[i]] = &outRing{box: b, tail: b.word(at), head: b.word(at + line), want: b.word(at + 2*line),
			data: m[at+ringCtl : at+ringStride]}
	}
	s.me = s.boxes[me]
	for i := 0; i < n; i++ {
		at := inboxCtl + i*ringStride
		s.in[i] = &inRing{src: int(ranks[i]), tail: s.me.word(at), head: s.me.word(at + line), want: s.me.word(at + 2*line),
			data: s.me.mem[at+ringCtl : at+ringStride]}
	}
	return s, nil
}

// close frees the window and the host communicator (collective).
func (s *shmPath) close() error {
	err := s.win.Free()
	if ferr := s.node.Free(); err == nil {
		err = ferr
	}
	return err
}

// recLen is the size of a record with nargs arguments and an inline
// payload of n bytes.
func recLen(nargs, n int) int { return recFixed + 8*nargs + (n+7)&^7 }

// encode writes h (and an inline payload) as a record into b, which is
// recLen bytes long.
func encode(b []byte, h *header, payload []byte) {
	le := binary.LittleEndian
	le.PutUint64(b, uint64(h.kind)|uint64(h.nargs)<<8|uint64(h.flags)<<16|uint64(h.op)<<24|uint64(h.handler)<<32)
	le.PutUint64(b[8:], h.n)
	le.PutUint64(b[16:], uint64(h.ptr))
	le.PutUint64(b[24:], h.id)
	at := recFixed
	for i := 0; i < int(h.nargs); i++ {
		le.PutUint64(b[at:], h.args[i])
		at += 8
	}
	copy(b[at:], payload)
}

// decode reads the record at b into h and returns its inline payload and
// its length.
func decode(b []byte, h *header) ([]byte, int) {
	le := binary.LittleEndian
	w := le.Uint64(b)
	h.kind, h.nargs, h.flags, h.op, h.handler = uint8(w), uint8(w>>8), uint8(w>>16), uint8(w>>24), uint32(w>>32)
	h.n = le.Uint64(b[8:])
	h.ptr = Ptr(le.Uint64(b[16:]))
	h.id = le.Uint64(b[24:])
	at := recFixed
	for i := 0; i < int(h.nargs); i++ {
		h.args[i] = le.Uint64(b[at:])
		at += 8
	}
	inline := 0
	if h.flags&flagSeparate == 0 {
		inline = int(h.n)
	}
	return b[at : at+inline], recLen(int(h.nargs), inline)
}

// put appends a record to the ring if it fits (under o.mu): it writes
// the record where the tail is, wrapping to the ring's start when the
// space to its end is too short, and publishes it with the tail.
func (o *outRing) put(h *header, payload []byte) bool {
	n := recLen(int(h.nargs), len(payload))
	tail := *o.tail // ours alone
	at := int(tail % ringBytes)
	need := n
	if at+n > ringBytes {
		need += ringBytes - at // the skipped end
	}
	if tail+uint64(need)-atomic.LoadUint64(o.head) > ringBytes {
		return false
	}
	if at+n > ringBytes {
		binary.LittleEndian.PutUint64(o.data[at:], recWrap)
		tail += uint64(ringBytes - at)
		at = 0
	}
	encode(o.data[at:at+n], h, payload)
	atomic.StoreUint64(o.tail, tail+uint64(n))
	return true
}

// putRaw appends an encoded record (from the overflow queue).
func (o *outRing) putRaw(rec []byte) bool {
	var h header
	payload, _ := decode(rec, &h)
	return o.put(&h, payload)
}

// send writes a request to the ring, or queues it behind earlier ones
// that did not fit; then it rings the target's bell.
func (s *shmPath) send(dest int, h *header, payload []byte) {
	o := s.out[dest]
	o.mu.Lock()
	if len(o.over) > 0 || !o.put(h, payload) {
		rec := make([]byte, recLen(int(h.nargs), len(payload)))
		encode(rec, h, payload)
		if len(o.over) == 0 {
			s.over.Add(1)
		}
		o.over = append(o.over, rec)
		s.flushLocked(o)
	}
	o.mu.Unlock()
	o.box.ring()
}

// flushLocked moves queued records into the ring while they fit (under
// o.mu). It raises want before it looks at the room: a reader that frees
// room after the look sees want and rings this process's bell.
func (s *shmPath) flushLocked(o *outRing) bool {
	atomic.StoreUint64(o.want, 1)
	k := 0
	for k < len(o.over) && o.putRaw(o.over[k]) {
		k++
	}
	if k == 0 {
		return false
	}
	o.over = o.over[k:]
	if len(o.over) == 0 {
		o.over = nil
		s.over.Add(-1)
	}
	o.box.ring()
	return true
}

// flush moves every queue of records that did not fit into its ring, as
// far as they fit now, and reports whether it moved any.
func (s *shmPath) flush() bool {
	if s.over.Load() == 0 {
		return false
	}
	moved := false
	for _, o := range s.out {
		if o == nil {
			continue
		}
		o.mu.Lock()
		if len(o.over) > 0 && s.flushLocked(o) {
			moved = true
		}
		o.mu.Unlock()
	}
	return moved
}

// pending reports whether a record waits in any ring. It reads the
// shared head, not the reader's own position, so any goroutine may ask.
func (s *shmPath) pending() bool {
	for _, r := range s.in {
		if atomic.LoadUint64(r.tail) != atomic.LoadUint64(r.head) {
			return true
		}
	}
	return false
}

// serveRing serves the records that wait in ring r, at most max, and
// returns how many it served. Called with pollMu held.
func (d *DMCS) serveRing(r *inRing, max int) (int, error) {
	s := d.shm
	tail := atomic.LoadUint64(r.tail)
	served := 0
	var err error
	for r.pos != tail && served < max {
		at := int(r.pos % ringBytes)
		if binary.LittleEndian.Uint64(r.data[at:]) == recWrap {
			r.pos += uint64(ringBytes - at)
			atomic.StoreUint64(r.head, r.pos)
			continue
		}
		h := &d.hdr
		payload, n := decode(r.data[at:], h)
		err = d.handle(h, r.src, payload)
		r.pos += uint64(n)
		atomic.StoreUint64(r.head, r.pos)
		served++
		if err != nil {
			break
		}
	}
	if served > 0 && atomic.LoadUint64(r.want) != 0 {
		// The writer queued records for want of space: tell it there is.
		atomic.StoreUint64(r.want, 0)
		s.boxes[s.local[r.src]].ring()
	}
	return served, err
}
