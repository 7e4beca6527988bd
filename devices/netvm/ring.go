package netvm

import (
	"encoding/binary"
	"math"
	"sync/atomic"
	"unsafe"

	field "github.com/adimpi/adimpi/adi/devkit/wire"
	"github.com/adimpi/adimpi/internal/order"
	"github.com/adimpi/adimpi/internal/shm"
)

// This file is the control ring: how control messages and their payloads
// travel to one peer. Everything above it (the protocols, the rendezvous data
// paths) sees a peer's link only through the transport interface.

// Control message types. The first six are MPIN's (Table 3.1 of the thesis).
const (
	ctlUnused     uint32 = iota
	ctlRTR               // receiver → sender: a receive is posted; write the data to this address
	ctlSC                // sender → receiver: the data is in place
	ctlEnaAny            // receiver → all: an ANY_SOURCE receive uses RFA entry id
	ctlRTRAny            // receiver → a flagged sender: write your data for RFA entry id here
	ctlUnaAny            // sender → receiver: no longer interested in that RTR_ANY
	ctlDisableAny        // receiver → all: RFA entry id is retired
	ctlEager             // sender → receiver: a small message, payload in the eager ring
	ctlRTS               // sender → receiver: a message waits to be matched
	ctlCTS               // receiver → sender: RTS matched; write the data to this address
	ctlData              // sender → receiver: one chunk of a message, payload in the eager ring
	ctlCancel            // receiver → sender: withdraw the RTR of receive id
	ctlCancelAck         // sender → receiver: RTR id withdrawn (n=1) or already answered (n=0)
	ctlIov               // receiver → sender: (address, length) pieces of a non-contiguous receive buffer, in the eager ring
	ctlPull              // sender → receiver: read the last n bytes of the message yourself, from my address addr
	ctlPulled            // receiver → sender: the pull of send id is done (n=1) or failed (n=0: write them yourself)
	ctlPullIov           // sender → receiver: as ctlPull, the last tag bytes, from my layout in the eager ring
	ctlOffer             // sender → receiver: my layout for the stream of receive id is this run (offer.go)
	ctlFlag              // sender → receiver on another host: raise my flag in your RFA entry id (MPIN, netlink.go)
)

// hasPayload reports whether a control message of type typ carries n bytes
// of payload in the eager ring.
func hasPayload(typ uint32) bool {
	return typ == ctlEager || typ == ctlData || typ == ctlIov || typ == ctlPullIov
}

// inlineMax is the largest eager payload that a shared-memory ring carries
// in the control slot itself, in the addr field (which otherwise holds the
// payload's place in the eager ring): the receiver then reads one cache
// line per message instead of two.
const inlineMax = 8

// inline reports whether a control message of type typ with n bytes of
// payload carries them in its slot (inlineMax).
func inline(typ uint32, n uint64) bool { return typ == ctlEager && n <= inlineMax }

// Segment layout.
const (
	ringSlots   = 128
	slotSize    = 32
	cmaBytes    = ringSlots * slotSize
	offDoorbell = shm.HeaderSize      // u32: bumped by every writer, futex word
	offSleepers = shm.HeaderSize + 4  // u32: processes sleeping on the doorbell
	offProbe    = shm.HeaderSize + 8  // u64: word peers remote-write to test permission
	offPeers    = shm.HeaderSize + 64 // per-writer blocks start here
	// within a writer's block
	offCMA       = 0
	offCMAHead   = cmaBytes       // u64: written by the reader: its head in the writer's ring
	offEagerHead = cmaBytes + 8   // u64: likewise for the writer's eager bytes
	offClaim     = cmaBytes + 64  // u64: the writer's offered stream: rid<<32 | end of the bytes it packs (offer.go)
	offLimit     = cmaBytes + 128 // u64: the reader's: rid<<32 | first byte of the tail it reads itself (offer.go)
	offEagerRing = cmaBytes + 192
)

// ctl is a decoded control message.
type ctl struct {
	typ  uint32
	ctx  uint32 // context id; for RTR the receiver's request id
	tag  int32
	id   uint32 // request id the message refers to
	addr uint64 // RTR: buffer address; EAGER/DATA: eager ring position
	n    uint64 // bytes
}

// Control slot fields: typ (written last, a release store), ctx, tag, id, addr, n.
// The typ word also carries the lap of the ring that the slot was written
// in (slotWord): a reader knows a slot is new by its lap, so it never writes
// into the slots to mark them free, and a slot's cache line moves only from
// its writer to its reader, not back again before every reuse.
const (
	slotTyp  field.U32 = 0
	slotCtx  field.U32 = 4
	slotTag  field.I32 = 8
	slotID   field.U32 = 12
	slotAddr field.U64 = 16
	slotN    field.U64 = 24
)

// transport is what the protocols need from the link to one peer: control
// messages out (with their payloads) and in, and the remote write of a
// message's data into the peer's receive buffer. A peer on this host is
// reached through a shmRing in shared memory (peer.link, held by value so
// that the hot path's calls stay direct); a peer on another host through a
// netLink over the network (peer.net, netlink.go), whose receiving side
// carries out the remote writes. What else reaches into a peer's memory is
// shared-memory only: the paths gated by peer.remoteOK (split, pull,
// scatter, offer read or write with process_vm_readv/writev), MPIN's RFA
// flags (ctlFlag messages to a peer on another host) and the board.
type transport interface {
	// put writes m's control message, and its payload (m.n bytes of m's
	// data from m.off, for the types that have one), and wakes the peer;
	// false: no room now, nothing written.
	put(m *outMsg) bool
	// next decodes the next control message that arrived into c.
	next(c *ctl) bool
	// payload returns c's payload, in at most two pieces.
	payload(c *ctl) (a, b []byte)
	// consume frees c's payload once it has been read.
	consume(c *ctl)
	// wake rings the peer's doorbell.
	wake()
	// remoteWrite writes pieces, in order, into the peer's memory at addr.
	remoteWrite(addr uintptr, pieces [][]byte) error
}

var _ transport = (*shmRing)(nil)

// shmRing is the shared-memory link between this process and one peer: in
// each direction a ring of ringSlots control messages and an eager byte ring,
// both inside the reader's segment and written only by the writer. A writer
// keeps its own tail and a lazily refreshed copy of the reader's head: the
// reader reports its head only when it has consumed half a ring, so a writer
// never reads remote memory on the way out.
type shmRing struct {
	pid  int     // the peer's process, for remote writes
	size int     // eager ring bytes
	pk   *packer // packs stream chunks (ntpack.go), shared by the device's rings

	// outbound: my rings inside the peer's segment
	out, outEager          []byte
	doorbell, sleepers     *uint32
	eagerTail              uint64
	cmaHeadAt, eagerHeadAt *uint64 // in MY segment: the peer's lazily reported heads

	// inline payloads (inlineMax): the sender's staging, the receiver's copy
	outInline, inInline [inlineMax]byte

	// inbound: its rings inside my segment
	in, inEager              []byte
	eagerHead, eagerReported uint64
	reportCMA, reportEager   *uint64 // in ITS segment: where I report my heads

	// cur holds the control ring's cursors (my tail in the peer's ring,
	// my head in its ring), outside Go's heap so that the C library's
	// fast path moves the same cursors (fastpath.go).
	cur *cursors
}

// newShmRing maps the rings between this process (segment mine, its block
// for the peer at offset mineAt) and a peer (process pid, segment theirs,
// this process's block in it at theirsAt).
func newShmRing(mine, theirs *shm.Segment, pid, mineAt, theirsAt, size int, pk *packer, cur *cursors) shmRing {
	return shmRing{
		cur:         cur,
		pid:         pid,
		size:        size,
		pk:          pk,
		out:         theirs.Mem[theirsAt+offCMA : theirsAt+offCMA+cmaBytes],
		outEager:    theirs.Mem[theirsAt+offEagerRing : theirsAt+offEagerRing+size],
		doorbell:    theirs.Uint32(offDoorbell),
		sleepers:    theirs.Uint32(offSleepers),
		cmaHeadAt:   mine.Uint64(mineAt + offCMAHead),
		eagerHeadAt: mine.Uint64(mineAt + offEagerHead),
		in:          mine.Mem[mineAt+offCMA : mineAt+offCMA+cmaBytes],
		inEager:     mine.Mem[mineAt+offEagerRing : mineAt+offEagerRing+size],
		reportCMA:   theirs.Uint64(theirsAt + offCMAHead),
		reportEager: theirs.Uint64(theirsAt + offEagerHead),
	}
}

// slotWord is the typ word of a slot written at ring position pos: the type
// in the low 8 bits, above them the lap (pos/ringSlots) plus one, modulo
// 2^24. Consecutive laps differ, and a never-written slot (zero) matches no
// lap's word, so a reader at position pos sees a new message exactly when
// the word's lap is pos's.
func slotWord(typ uint32, pos uint64) uint32 {
	return typ | uint32(pos/ringSlots+1)<<8
}

func (l *shmRing) put(m *outMsg) bool {
	if l.cur.outTail-atomic.LoadUint64(l.cmaHeadAt) >= ringSlots {
		return false
	}
	if inline(m.typ, m.n) {
		b := l.outInline[:m.n]
		m.copyOut(m.off, b)
		clear(l.outInline[m.n:])
		m.addr = binary.LittleEndian.Uint64(l.outInline[:])
	} else if hasPayload(m.typ) {
		payload := int(m.n)
		if l.eagerTail+uint64(payload)-atomic.LoadUint64(l.eagerHeadAt) > uint64(l.size) {
			return false
		}
		m.addr = l.eagerTail
		pos := int(l.eagerTail % uint64(l.size))
		first := min(payload, l.size-pos)
		if m.typ == ctlData {
			l.pk.pack(m, m.off, l.outEager[pos:pos+first])
			if first < payload {
				l.pk.pack(m, m.off+first, l.outEager[:payload-first])
			}
			l.pk.fence() // the payload's non-temporal stores before the slot's
		} else {
			m.copyOut(m.off, l.outEager[pos:pos+first])
			if first < payload {
				m.copyOut(m.off+first, l.outEager[:payload-first])
			}
		}
		l.eagerTail += uint64(payload)
	}
	s := l.out[(l.cur.outTail%ringSlots)*slotSize:][:slotSize]
	slotCtx.Set(s, m.ctx)
	slotTag.Set(s, m.tag)
	slotID.Set(s, m.id)
	slotAddr.Set(s, m.addr)
	slotN.Set(s, m.n)
	l.publish(s, m.typ)
	return true
}

// prefetchAhead is how many slots ahead of the one it writes a writer
// fetches the line for writing: two lines of two slots, about the time a
// cross-core fetch takes at the rate a window of small sends fills slots.
const prefetchAhead = 4

// publish makes slot s, filled at outTail, visible to the reader with a
// release store of its typ word, moves the tail on and wakes the peer.
// Before the wake's atomic add, which waits until the slot's stores have
// reached the cache, it starts the fetch of a line a few slots ahead
// (prefetchAhead): the reader has read that line a lap ago, so taking it
// back costs a cross-core round trip, which the prefetch takes off the
// sender's path instead of paying it at every message.
func (l *shmRing) publish(s []byte, typ uint32) {
	order.StoreRelease32(slotTyp.Ptr(s), slotWord(typ, l.cur.outTail))
	l.cur.outTail++
	order.PrefetchW(unsafe.Pointer(&l.out[((l.cur.outTail+prefetchAhead-1)%ringSlots)*slotSize]))
	l.wake()
}

// putSmall writes an eager message of at most inlineMax bytes, whose
// payload travels in the slot itself (inline), and wakes the peer: put's
// path for a small standard send, without an outMsg. False: no room now,
// nothing written.
func (l *shmRing) putSmall(ctx uint32, tag int32, sig uint32, data []byte) bool {
	if l.cur.outTail-atomic.LoadUint64(l.cmaHeadAt) >= ringSlots {
		return false
	}
	// The payload as the slot's word: a word in one load and an empty
	// message in none, without a memmove call (and the registers it
	// spills) for either.
	var word uint64
	switch len(data) {
	case 0:
	case inlineMax:
		word = binary.LittleEndian.Uint64(data)
	default:
		var w [inlineMax]byte
		copy(w[:], data)
		word = binary.LittleEndian.Uint64(w[:])
	}
	s := l.out[(l.cur.outTail%ringSlots)*slotSize:][:slotSize]
	slotCtx.Set(s, ctx)
	slotTag.Set(s, tag)
	slotID.Set(s, sig)
	slotAddr.Set(s, word)
	slotN.Set(s, uint64(len(data)))
	l.publish(s, ctlEager)
	return true
}

// ready reports whether the next control message has arrived: next's look
// at its slot's lap alone, small enough to be inlined into the idle poll,
// which a waiter repeats until its message is there, so that each round of
// it is short and the message is seen sooner.
func (l *shmRing) ready() bool {
	h := l.cur.inHead
	return slotTyp.Load(l.in[(h%ringSlots)*slotSize:])>>8 == slotWord(0, h)>>8
}

func (l *shmRing) next(c *ctl) bool {
	s := l.in[(l.cur.inHead%ringSlots)*slotSize:][:slotSize]
	w := slotTyp.Load(s)
	if w>>8 != slotWord(0, l.cur.inHead)>>8 {
		return false
	}
	// Field by field: a composite literal is built on the stack and
	// copied, and the copy's wide loads of its narrow stores stall.
	c.typ = w & 0xff
	c.ctx, c.tag, c.id = slotCtx.Get(s), slotTag.Get(s), slotID.Get(s)
	c.addr, c.n = slotAddr.Get(s), slotN.Get(s)
	l.cur.inHead++
	if l.cur.inHead-l.cur.inReported >= ringSlots/2 {
		l.release()
	}
	return true
}

// release reports the head, once half a ring is consumed: the writer then
// learns it may reuse the slots. The slots themselves are left as they are
// (their laps tell old from new, slotWord), so the reader writes none of the
// lines the writer fills.
func (l *shmRing) release() {
	l.cur.inReported = l.cur.inHead
	atomic.StoreUint64(l.reportCMA, l.cur.inHead)
	l.wake()
}

func (l *shmRing) payload(c *ctl) (a, b []byte) {
	if inline(c.typ, c.n) {
		binary.LittleEndian.PutUint64(l.inInline[:], c.addr)
		return l.inInline[:c.n], nil
	}
	pos := int(c.addr % uint64(l.size))
	n := int(c.n)
	first := min(n, l.size-pos)
	return l.inEager[pos : pos+first], l.inEager[:n-first]
}

func (l *shmRing) consume(c *ctl) {
	if inline(c.typ, c.n) {
		return // nothing of the eager ring to free
	}
	l.eagerHead = c.addr + c.n
	if l.eagerHead-l.eagerReported >= uint64(l.size/2) {
		l.eagerReported = l.eagerHead
		atomic.StoreUint64(l.reportEager, l.eagerHead)
		l.wake()
	}
}

func (l *shmRing) wake() { ring(l.doorbell, l.sleepers) }

func (l *shmRing) remoteWrite(addr uintptr, pieces [][]byte) error {
	return shm.RemoteWrite(l.pid, addr, pieces)
}

// ring bumps a doorbell and wakes its sleepers, if any.
func ring(doorbell, sleepers *uint32) {
	atomic.AddUint32(doorbell, 1)
	if atomic.LoadUint32(sleepers) > 0 {
		_ = shm.FutexWake(doorbell, math.MaxInt32)
	}
}
