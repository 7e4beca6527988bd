package fm

import (
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/adimpi/adimpi/adi"
	"github.com/adimpi/adimpi/adi/devkit/liveness"
	"github.com/adimpi/adimpi/adi/devkit/wire"
	"github.com/adimpi/adimpi/internal/order"
	"github.com/adimpi/adimpi/internal/pmi"
	"github.com/adimpi/adimpi/internal/shm"
	netwire "github.com/adimpi/adimpi/internal/wire"
)

// Packet layout: a 24-byte header, then the payload.
//
//	[0:4]   flags (valid|first|last), stored last: the packet is in the region
//	[4:6]   handler id
//	[6:8]   payload bytes in this packet
//	[8:12]  stream id (the sender's)
//	[12:16] credits piggybacked: packets of the receiver's this sender consumed
//	[16:24] the message's length (first packet)
const (
	// HeaderSize is the per-packet header; Payload = packet - HeaderSize.
	HeaderSize = 24

	pFlags   wire.U32 = 0
	pHandler wire.U16 = 4
	pLen     wire.U16 = 6
	pStream  wire.U32 = 8
	pCredits wire.U32 = 12
	pLength  wire.U64 = 16

	flagValid = 1
	flagFirst = 2
	flagLast  = 4

	// DefaultPacket is the packet size (the seed's FM used 1–1.5 KiB packets).
	DefaultPacket = 1536
	// DefaultSlots is the number of packets in each per-sender receive
	// region, i.e. the credits a sender starts with.
	DefaultSlots = 64

	minPacket = 128
	maxPacket = 65536

	offDoorbell = shm.HeaderSize     // u32: bumped by every writer, futex word
	offSleepers = shm.HeaderSize + 4 // u32: processes sleeping on the doorbell
	offProbe    = shm.HeaderSize + 8 // u64: a word peers write to test process_vm_writev
	offCredits  = shm.HeaderSize + 64
	creditLine  = 64 // one cache line per sender's explicit credit word
)

// Config sets up an Endpoint. Rank, Size and KVS are the job's (Open fills
// them from PMI); zero Packet and Slots take the defaults.
type Config struct {
	Rank, Size int
	KVS        adi.KVS
	Packet     int    // bytes per packet, header included
	Slots      int    // packets per sender's receive region (initial credits)
	Name       string // KVS key prefix, default "fm"
	// NoRemoteWrite keeps this endpoint from writing into other processes'
	// memory (WriteTo, ScatterTo report false), as when the system forbids
	// process_vm_writev: for testing the fallback.
	NoRemoteWrite bool
	// Bulk is the size in bytes (a multiple of 64) of an extra region per
	// sender in every process's segment, outside the packet model, that a
	// layer above may use for bulk data (BulkOut, BulkIn); 0: none.
	Bulk int
	// Hosts is every rank's host number (nil: all on this one). Peers on
	// another host than this process's are reached over the wire (net.go).
	Hosts []int
}

// Handler is called during Extract for every packet of an incoming stream
// whose message named it: first when the stream's first packet arrives,
// then once per further packet, in arrival order. It takes the packet's
// bytes with Receive (or drops them with Skip); what it leaves is dropped
// when it returns. It keeps its own place in s.Ctx. See the package
// documentation for what a handler may do.
type Handler func(e *Endpoint, s *Stream)

// Stream is one message: a send stream from BeginMessage, or an incoming
// stream handed to a handler.
type Stream struct {
	// Ctx is the handler's (or sender's) own state for this stream.
	Ctx any

	e       *Endpoint
	id      uint32
	handler uint16
	length  int

	// send side
	dests []*peer
	slot  []int // per dest: byte offset of the current packet in its region
	sent  int   // payload bytes written
	fill  int   // payload bytes in the current packet (0: none reserved)
	first bool  // the next packet is the stream's first
	ended bool
	batch bool // leave doorbells to the caller's RingPending

	// receive side
	src     int
	pkt     []byte // the current packet's payload
	pos     int    // bytes of pkt taken
	arrived int    // payload bytes that arrived, this packet included
	last    bool   // the current packet is the stream's last
	taken   int    // bytes taken by Receive over the whole stream
}

type peer struct {
	rank, pid int
	seg       *shm.Segment
	remote    bool   // process_vm_writev into it works
	bulkOut   []byte // my bulk region in its segment
	bulkIn    []byte // its bulk region in my segment

	// outbound: my region inside its segment
	out                []byte
	doorbell, sleepers *uint32

	// Its region positions and credits (sent, sendAt, returned, head,
	// headAt, owed, owedPass), which the C fast path moves too
	// (fastpath.go).
	cursors

	mailbox *uint64 // in MY segment: credits it returned explicitly
	open    *Stream // a send stream holding an unflushed packet here
	unrung  bool    // packets handed over since its doorbell last rang

	// inbound: its region inside my segment
	in       []byte
	report   *uint64 // in ITS segment: credits I returned to it explicitly
	streams  map[uint32]*Stream
	busy     bool // a handler of one of its packets is running
	received int64

	// a peer on another host (net.go)
	net      bool   // reached over the wire: out is a private mirror of its region
	host     string // its host's name
	flushed  uint64 // packets handed over (flushed) into out
	netSent  uint64 // of those, packets sent as frames
	arriveAt int    // byte offset in in where its next frame's packet goes
	lost     error  // its connection broke
	queued   int    // frames to it that wait for the kernel
	ready    bool   // a frame to it went to the kernel at once: its connection is open
}

// Endpoint is one process's FM interface: a receive region per sender in a
// shared-memory segment it exports, handlers, and its send streams into the
// peers' regions.
type Endpoint struct {
	rank, size    int
	packet, slots int
	payload       int
	seg           *shm.Segment
	peers         []*peer
	handlers      []Handler
	nextStream    uint32
	pass          uint64 // Extract calls (read by the C fast path: fastpath.go)
	retAt         uint32 // owed credits returned explicitly at once
	freeSend      []*Stream
	freeRecv      []*Stream
	unrung        []*peer     // peers with packets whose doorbell has not rung yet
	pmi           *pmi.Client // set by Open
	// mpi, when the MPI device runs on this endpoint, takes every
	// one-packet message of its handler straight from Extract: no stream,
	// no handler call through the table.
	mpi  *Device
	live *liveness.Peers

	// the wire, when some rank runs on another host (net.go)
	net      *netwire.Endpoint
	sleeper  *netwire.Sleeper       // wakes a doorbell sleeper for frames, with peers on this host too
	direct   *netwire.DirectSleeper // with every peer on another host: waiters sleep in the wire
	hosts    []int
	hooks    NetHooks
	netBuf   []byte // the body of a packets frame
	polling  bool   // inside net.Poll
	netErr   error  // the first protocol error a frame met
	netMoved bool   // credits or a loss came over the wire
	lostNew  []int  // peers lost since the last CheckPeers

	// Stats are the endpoint's traffic counters.
	Stats Stats
}

// Stats counts an endpoint's traffic.
type Stats struct {
	PacketsSent, PacketsReceived int64
	Piggybacked                  int64 // credits that came back on data packets
	ExplicitReturns              int64 // explicit credit returns this endpoint made
	CreditWaits                  int64 // times a blocking send found no credit
}

// Open starts a standalone FM endpoint in a process started by a PMI
// launcher (mpirun): it connects to PMI for its rank, size and key-value
// space and wires up with the other processes. It is collective. Fields of
// cfg other than Packet, Slots and Name are ignored.
func Open(cfg Config) (*Endpoint, error) {
	c, err := pmi.Connect()
	if err != nil {
		return nil, fmt.Errorf("fm: %w", err)
	}
	cfg.Rank, cfg.Size, cfg.KVS = c.Rank(), c.Size(), c
	name := cfg.Name
	if name == "" {
		name = "fm"
	}
	if cfg.Hosts, err = hostsFromKVS(c, name, cfg.Rank, cfg.Size); err != nil {
		_ = c.Abort(1, err.Error())
		return nil, err
	}
	e, err := New(cfg)
	if err != nil {
		_ = c.Abort(1, err.Error())
		return nil, err
	}
	e.pmi = c
	return e, nil
}

// Close ends an endpoint made by Open: it waits for every process (a PMI
// barrier), releases the segments and leaves PMI. Endpoints made with New
// use Release instead.
func (e *Endpoint) Close() error {
	if e.pmi == nil {
		return e.Release()
	}
	for _, p := range e.peers { // nothing more will carry them
		if p.owed > 0 {
			e.returnCredits(p)
		}
	}
	if e.net != nil { // let the frames leave before the barrier
		_ = e.pollNet()
		for deadline := time.Now().Add(netDrain); e.net.Pending() > 0 && time.Now().Before(deadline); {
			e.net.Wait(time.Millisecond)
			_ = e.pollNet()
		}
	}
	err := e.pmi.Barrier()
	if rerr := e.Release(); err == nil {
		err = rerr
	}
	if ferr := e.pmi.Finalize(); err == nil {
		err = ferr
	}
	return err
}

// New exports this process's receive regions, publishes them through
// cfg.KVS and maps every peer's. It is collective over the job.
func New(cfg Config) (*Endpoint, error) {
	e := &Endpoint{rank: cfg.Rank, size: cfg.Size, packet: cfg.Packet, slots: cfg.Slots, live: liveness.New(cfg.Rank, cfg.Size, idlePolls)}
	if cfg.Bulk < 0 || cfg.Bulk%64 != 0 || cfg.Bulk > 1<<30 {
		return nil, fmt.Errorf("fm: bulk region of %d bytes: want a multiple of 64 in [0, 1 GiB]", cfg.Bulk)
	}
	if e.packet == 0 {
		e.packet = DefaultPacket
	}
	if e.slots == 0 {
		e.slots = DefaultSlots
	}
	if e.packet < minPacket || e.packet > maxPacket || e.packet%8 != 0 {
		return nil, fmt.Errorf("fm: packet=%d: want a multiple of 8 in [%d, %d]", e.packet, minPacket, maxPacket)
	}
	if e.slots < 2 || e.slots > 1<<16 {
		return nil, fmt.Errorf("fm: slots=%d: want 2..65536", e.slots)
	}
	e.payload = e.packet - HeaderSize
	e.retAt = uint32(3*e.slots+3) / 4
	name := cfg.Name
	if name == "" {
		name = "fm"
	}
	region := e.packet * e.slots
	offRegions := offCredits + e.size*creditLine
	var err error
	offBulk := offRegions + e.size*region
	e.seg, err = shm.Export(fmt.Sprintf("adimpi-%s-%d", name, e.rank), offBulk+e.size*cfg.Bulk)
	if err != nil {
		return nil, err
	}
	probe := uintptr(unsafe.Pointer(&e.seg.Mem[offProbe]))
	me := fmt.Sprintf("%d:%d:%x:%d:%d:%x:%d", os.Getpid(), e.seg.FD, e.seg.Key, e.packet, e.slots, probe, cfg.Bulk)
	if err := e.setupNet(cfg, name); err != nil {
		e.seg.Close()
		return nil, err
	}
	if err := cfg.KVS.Put(fmt.Sprintf("%s-%d", name, e.rank), me); err != nil {
		return nil, err
	}
	if err := cfg.KVS.Barrier(); err != nil {
		return nil, err
	}
	e.peers = make([]*peer, e.size)
	for r := 0; r < e.size; r++ {
		p := &peer{rank: r, pid: os.Getpid(), seg: e.seg, streams: map[uint32]*Stream{}}
		paddr := probe
		if r != e.rank {
			v, err := cfg.KVS.Get(fmt.Sprintf("%s-%d", name, r))
			if err != nil {
				return nil, err
			}
			var fd, packet, slots, bulk int
			var key uint64
			if _, err := fmt.Sscanf(v, "%d:%d:%x:%d:%d:%x:%d", &p.pid, &fd, &key, &packet, &slots, &paddr, &bulk); err != nil {
				return nil, fmt.Errorf("fm: rank %d published %q: %v", r, v, err)
			}
			if packet != e.packet || slots != e.slots || bulk != cfg.Bulk {
				return nil, fmt.Errorf("fm: rank %d uses packet=%d slots=%d bulk=%d, this rank packet=%d slots=%d bulk=%d; options must agree", r, packet, slots, bulk, e.packet, e.slots, cfg.Bulk)
			}
			if e.net != nil && e.hosts[r] != e.hosts[e.rank] {
				if err := e.netPeer(p, cfg.KVS, name); err != nil {
					return nil, err
				}
				mine := offRegions + r*region
				p.in = e.seg.Mem[mine : mine+region]
				p.report = p.mailbox // unused: credits go back in frames
				e.peers[r] = p
				// Its pid names nothing on this host: liveness watches
				// this process instead, and the wire reports the loss.
				e.live.SetPid(r, os.Getpid())
				continue
			}
			if p.seg, err = shm.Import(p.pid, fd, key); err != nil {
				return nil, fmt.Errorf("fm: rank %d: %w", r, err)
			}
		}
		p.remote = !cfg.NoRemoteWrite && shm.CanRemoteWrite(p.pid, paddr)
		mine := offRegions + r*region
		theirs := offRegions + e.rank*region
		p.out = p.seg.Mem[theirs : theirs+region]
		p.in = e.seg.Mem[mine : mine+region]
		p.bulkOut = p.seg.Mem[offBulk+e.rank*cfg.Bulk : offBulk+(e.rank+1)*cfg.Bulk]
		p.bulkIn = e.seg.Mem[offBulk+r*cfg.Bulk : offBulk+(r+1)*cfg.Bulk]
		p.doorbell, p.sleepers = p.seg.Uint32(offDoorbell), p.seg.Uint32(offSleepers)
		p.mailbox = e.seg.Uint64(offCredits + r*creditLine)
		p.report = p.seg.Uint64(offCredits + e.rank*creditLine)
		e.peers[r] = p
		e.live.SetPid(r, p.pid)
	}
	if e.net != nil {
		e.netBuf = make([]byte, 0, e.slots*e.packet)
		if e.allRemote() {
			e.direct = e.net.NewDirectSleeper(e.seg.Uint32(offDoorbell), e.seg.Uint32(offSleepers))
		} else {
			e.sleeper = e.net.NewSleeper(e.Wake)
		}
	}
	return e, nil
}

// Release unmaps every segment. No stream may be in use.
func (e *Endpoint) Release() error {
	err := e.closeNet()
	for _, p := range e.peers {
		if p.seg != e.seg && p.seg != nil {
			if cerr := p.seg.Close(); err == nil {
				err = cerr
			}
		}
	}
	if cerr := e.seg.Close(); err == nil {
		err = cerr
	}
	return err
}

// Rank is this process's rank; Size the number of processes.
func (e *Endpoint) Rank() int { return e.rank }

// Size is the number of processes in the job.
func (e *Endpoint) Size() int { return e.size }

// Payload is the number of message bytes one packet carries.
func (e *Endpoint) Payload() int { return e.payload }

// Packet is the packet size, header included.
func (e *Endpoint) Packet() int { return e.packet }

// Slots is the number of packets in each sender's receive region.
func (e *Endpoint) Slots() int { return e.slots }

// SetHandler registers h under id; a message begun with handler id runs h
// at its receiver. Register every handler before anything can extract
// (Extract, Poll, or a SendPiece waiting for credits): a packet for an
// unregistered handler is a protocol error.
func (e *Endpoint) SetHandler(id uint16, h Handler) {
	for len(e.handlers) <= int(id) {
		e.handlers = append(e.handlers, nil)
	}
	e.handlers[id] = h
}

// Credits is the number of packets this process may put into dest's
// receive region now without waiting.
func (e *Endpoint) Credits(dest int) int {
	p := e.peers[dest]
	return e.slots - int(p.sent-p.returned-atomic.LoadUint64(p.mailbox))
}

// CanWrite reports whether this process may write straight into dest's
// memory (process_vm_writev, probed at start; false when the system forbids
// it or Config.NoRemoteWrite is set). It is outside FM's message model: the
// MPI device uses it for the data of large messages (see the package
// documentation).
func (e *Endpoint) CanWrite(dest int) bool { return e.peers[dest].remote && e.Alive(dest) }

// WriteTo copies the local pieces, in order, into dest's memory starting
// at addr (an address in dest's address space that dest handed out): one
// copy, a gather from the pieces, without dest taking part.
func (e *Endpoint) WriteTo(dest int, addr uintptr, pieces [][]byte) error {
	p := e.peers[dest]
	if !p.remote {
		return fmt.Errorf("fm: no remote write into rank %d", dest)
	}
	return shm.RemoteWrite(p.pid, addr, pieces)
}

// ScatterTo copies the local pieces, in order, into dest's memory pieces
// remote, in order (both lists cover the same bytes).
func (e *Endpoint) ScatterTo(dest int, local [][]byte, remote []shm.RemoteSeg) error {
	p := e.peers[dest]
	if !p.remote {
		return fmt.Errorf("fm: no remote write into rank %d", dest)
	}
	return shm.RemoteScatter(p.pid, local, remote)
}

// BulkOut is this process's bulk region in dest's segment (Config.Bulk
// bytes, shared with dest); BulkIn is src's bulk region in this process's
// segment. FM does not use them: a layer above defines their contents and
// rings the doorbell (Ring) when it has put something there.
func (e *Endpoint) BulkOut(dest int) []byte { return e.peers[dest].bulkOut }

// BulkIn is src's bulk region in this process's segment (see BulkOut).
func (e *Endpoint) BulkIn(src int) []byte { return e.peers[src].bulkIn }

// Ring rings rank's doorbell (its Seq moves and a Sleep there returns).
func (e *Endpoint) Ring(rank int) {
	p := e.peers[rank]
	if !p.net {
		ring(p.doorbell, p.sleepers)
	}
}

// BeginMessage starts a message of length bytes to dest, to be handled
// there by the handler registered as handler. It never waits: packets (and
// credits) are taken as SendPiece fills them.
func (e *Endpoint) BeginMessage(dest, length int, handler uint16) (*Stream, error) {
	if dest < 0 || dest >= e.size {
		return nil, fmt.Errorf("fm: BeginMessage: destination %d out of range [0,%d)", dest, e.size)
	}
	return e.begin([]*peer{e.peers[dest]}, length, handler)
}

// BeginMessageMulti starts one message to every rank in dests (distinct):
// each packet goes into every destination's region, and is written only
// when every destination has a credit for it.
func (e *Endpoint) BeginMessageMulti(dests []int, length int, handler uint16) (*Stream, error) {
	ps := make([]*peer, len(dests))
	for i, d := range dests {
		if d < 0 || d >= e.size {
			return nil, fmt.Errorf("fm: BeginMessageMulti: destination %d out of range [0,%d)", d, e.size)
		}
		ps[i] = e.peers[d]
		for _, q := range ps[:i] {
			if q == ps[i] {
				return nil, fmt.Errorf("fm: BeginMessageMulti: destination %d named twice", d)
			}
		}
	}
	if len(ps) == 0 {
		return nil, errors.New("fm: BeginMessageMulti: no destination")
	}
	return e.begin(ps, length, handler)
}

func (e *Endpoint) begin(ps []*peer, length int, handler uint16) (*Stream, error) {
	if length < 0 {
		return nil, fmt.Errorf("fm: message length %d is negative", length)
	}
	for _, p := range ps {
		if !e.Alive(p.rank) {
			return nil, e.gone(p)
		}
	}
	var s *Stream
	if n := len(e.freeSend); n > 0 {
		s = e.freeSend[n-1]
		e.freeSend = e.freeSend[:n-1]
		*s = Stream{dests: s.dests[:0], slot: s.slot[:0]}
	} else {
		s = new(Stream)
	}
	e.nextStream++
	s.e, s.id, s.handler, s.length, s.first = e, e.nextStream, handler, length, true
	s.dests = append(s.dests, ps...)
	for range ps {
		s.slot = append(s.slot, 0)
	}
	return s, nil
}

// dropDest takes a destination that has died out of a send stream, so the
// stream goes on to the others.
func (e *Endpoint) dropDest(s *Stream, rank int) {
	for i, p := range s.dests {
		if p.rank == rank {
			if p.open == s {
				p.open = nil
			}
			s.dests = slices.Delete(s.dests, i, i+1)
			s.slot = slices.Delete(s.slot, i, i+1)
			return
		}
	}
}

// Room is the number of bytes SendPiece can take on s now without waiting
// for credits.
func (e *Endpoint) Room(s *Stream) int {
	room := s.length - s.sent
	for _, p := range s.dests {
		r := e.Credits(p.rank) * e.payload
		if s.fill > 0 {
			r += e.payload - s.fill
		}
		room = min(room, r)
	}
	return room
}

// nextPacket moves p's send position past the packet just reserved.
func (e *Endpoint) nextPacket(p *peer) {
	p.sent++
	if p.sendAt += e.packet; p.sendAt == len(p.out) {
		p.sendAt = 0
	}
}

// SendShort sends a whole message of len(hdr)+len(data) bytes to dest in
// one packet, with no stream, as FM's short sends did: the two pieces are
// copied into dest's region, the packet handed over and dest's doorbell
// rung. It never waits: it reports false, having sent nothing, when the
// message does not fit one packet, dest has no credit left, dest is gone,
// or a stream to dest is half way through a packet. The handler at dest
// sees an ordinary one-packet stream.
func (e *Endpoint) SendShort(dest int, handler uint16, hdr, data []byte) bool {
	n := len(hdr) + len(data)
	p, h := e.shortPacket(dest, n)
	if p == nil {
		return false
	}
	copy(h[HeaderSize+copy(h[HeaderSize:], hdr):], data)
	e.handShort(p, h, handler, n)
	return true
}

// shortPacket reserves a one-packet message of n payload bytes to dest, as
// SendShort does, and returns the packet for the caller to fill from
// HeaderSize on and hand over with handShort at once; a nil peer when
// SendShort would report false (nothing reserved).
func (e *Endpoint) shortPacket(dest, n int) (*peer, []byte) {
	if dest < 0 || dest >= e.size || n > e.payload {
		return nil, nil
	}
	p := e.peers[dest]
	if p.open != nil || !e.Alive(p.rank) || p.sent-p.returned-atomic.LoadUint64(p.mailbox) >= uint64(e.slots) {
		return nil, nil
	}
	if p.net && (!p.ready || p.queued > 0) {
		// The packet would wait in this process for its connection:
		// the caller's send, complete at once, would depend on it.
		return nil, nil
	}
	h := p.out[p.sendAt:]
	e.nextPacket(p)
	return p, h
}

// handShort hands over the packet h of n payload bytes that shortPacket
// reserved in p's region and the caller filled, and rings p's doorbell.
func (e *Endpoint) handShort(p *peer, h []byte, handler uint16, n int) {
	e.nextStream++
	pHandler.Set(h, handler)
	pLen.Set(h, uint16(n))
	pStream.Set(h, e.nextStream)
	pCredits.Set(h, p.owed)
	p.owed = 0
	pLength.Set(h, uint64(n))
	order.StoreRelease32(pFlags.Ptr(h), flagValid|flagFirst|flagLast)
	e.Stats.PacketsSent++
	if p.net {
		p.flushed++
		e.sendNet(p)
		return
	}
	// The next packet's header line, which the receiver wrote last (it
	// clears the flags), is fetched for writing now, before the
	// doorbell's atomic add waits for this packet's stores: the next
	// short send then finds it owned instead of paying a cross-core
	// round trip at its flag's store.
	order.PrefetchW(unsafe.Pointer(&p.out[p.sendAt]))
	ring(p.doorbell, p.sleepers)
}

// SendPiece appends buf to the message. Pieces are gathered into packets;
// a packet is handed over as soon as it is full (or holds the message's
// last byte). When a destination has no credit left, SendPiece runs the
// engine (Extract) until credits come back, so two processes flooding each
// other do not deadlock.
func (e *Endpoint) SendPiece(s *Stream, buf []byte) error {
	if s.ended {
		return errors.New("fm: SendPiece after EndMessage")
	}
	if len(buf) > s.length-s.sent {
		return fmt.Errorf("fm: SendPiece of %d bytes overruns the message (%d of %d bytes sent)", len(buf), s.sent, s.length)
	}
	for len(buf) > 0 {
		if s.fill == 0 {
			if err := e.reserve(s); err != nil {
				return err
			}
		}
		k := min(len(buf), e.payload-s.fill)
		for i, p := range s.dests {
			copy(p.out[s.slot[i]+HeaderSize+s.fill:], buf[:k])
		}
		s.fill += k
		s.sent += k
		buf = buf[k:]
		if s.fill == e.payload || s.sent == s.length {
			e.flush(s)
		}
	}
	if !s.batch {
		e.ringPending()
		return e.handedOver(s)
	}
	return nil
}

// handedOver waits (extracting, as for credits) until the packets of s to
// peers on other hosts are with the kernel: in FM a packet handed over is
// in the receiver's region, and the caller must not have to call in again
// for it to get there.
func (e *Endpoint) handedOver(s *Stream) error {
	var start time.Time
	for _, p := range s.dests {
		for p.net && p.queued > 0 {
			if p.lost != nil {
				return e.gone(p)
			}
			if err := e.wait(&start); err != nil {
				return err
			}
		}
	}
	return nil
}

// EndMessage ends a message; every byte of its length must have been sent.
// The stream must not be used afterwards.
func (e *Endpoint) EndMessage(s *Stream) error {
	if s.ended {
		return errors.New("fm: EndMessage twice")
	}
	if s.sent != s.length {
		return fmt.Errorf("fm: EndMessage after %d of %d bytes", s.sent, s.length)
	}
	if s.length == 0 { // an empty message still takes a packet
		if err := e.reserve(s); err != nil {
			return err
		}
		e.flush(s)
		if !s.batch {
			e.ringPending()
			if err := e.handedOver(s); err != nil {
				return err
			}
		}
	}
	s.ended = true
	s.Ctx = nil
	e.freeSend = append(e.freeSend, s)
	return nil
}

// reserve takes a credit and a packet in every destination's region,
// waiting (and extracting) when one is out of credits.
func (e *Endpoint) reserve(s *Stream) error {
	for _, p := range s.dests {
		if p.open != nil && p.open != s {
			return fmt.Errorf("fm: a message to rank %d is already half way through a packet; end it first", p.rank)
		}
	}
	var start time.Time
	for {
		ok := true
		for _, p := range s.dests {
			if e.Credits(p.rank) <= 0 {
				ok = false
				if !e.Alive(p.rank) {
					return e.gone(p)
				}
			}
		}
		if ok {
			break
		}
		e.Stats.CreditWaits++
		if err := e.wait(&start); err != nil {
			return err
		}
	}
	for i, p := range s.dests {
		s.slot[i] = p.sendAt
		e.nextPacket(p)
		p.open = s
	}
	return nil
}

// wait runs one round of waiting for credits: extract, and if nothing came
// in, yield the CPU; after 50 us of that, sleep briefly on the doorbell
// (explicit credit returns ring it).
func (e *Endpoint) wait(start *time.Time) error {
	e.ringPending() // the receiver must see what is in its region
	seq := e.Seq()
	n, err := e.Extract()
	if err != nil || n > 0 {
		return err
	}
	now := time.Now()
	if e.live.Due() || e.Lost() {
		e.CheckPeers()
	}
	if start.IsZero() {
		*start = now
	}
	if now.Sub(*start) < 50*time.Microsecond {
		runtime.Gosched()
		return nil
	}
	e.Sleep(seq, time.Millisecond)
	return nil
}

// flush hands the current packet over to every destination.
func (e *Endpoint) flush(s *Stream) {
	fl := uint32(flagValid)
	if s.first {
		fl |= flagFirst
		s.first = false
	}
	if s.sent == s.length {
		fl |= flagLast
	}
	for i, p := range s.dests {
		h := p.out[s.slot[i]:]
		pHandler.Set(h, s.handler)
		pLen.Set(h, uint16(s.fill))
		pStream.Set(h, s.id)
		// Piggyback the credits I owe this peer for its packets.
		pCredits.Set(h, p.owed)
		p.owed = 0
		pLength.Set(h, uint64(s.length))
		order.StoreRelease32(pFlags.Ptr(h), fl) // a release: the packet is written
		p.open = nil
		if p.net {
			p.flushed++
		}
		if !p.unrung {
			p.unrung = true
			e.unrung = append(e.unrung, p)
		}
		e.Stats.PacketsSent++
	}
	s.fill = 0
}

// ringPending rings the doorbell of every peer that was handed packets
// since the last ring: once per SendPiece, or once per batch of pieces for
// the MPI device, rather than once per packet, so that a stream of packets
// does not bounce the receiver's doorbell cache line per packet.
func (e *Endpoint) ringPending() {
	for _, p := range e.unrung {
		p.unrung = false
		if p.net {
			e.sendNet(p)
			continue
		}
		ring(p.doorbell, p.sleepers)
	}
	clear(e.unrung)
	e.unrung = e.unrung[:0]
}

func ring(doorbell, sleepers *uint32) {
	atomic.AddUint32(doorbell, 1)
	if atomic.LoadUint32(sleepers) > 0 {
		_ = shm.FutexWake(doorbell, math.MaxInt32)
	}
}

// Source is the rank that sent an incoming stream.
func (s *Stream) Source() int { return s.src }

// Len is the message's length in bytes.
func (s *Stream) Len() int { return s.length }

// Avail is the number of bytes of the current packet not taken yet.
func (s *Stream) Avail() int { return len(s.pkt) - s.pos }

// Taken is the number of the message's bytes taken so far (Receive and Skip).
func (s *Stream) Taken() int { return s.taken }

// Last reports whether the current packet is the message's last one: when
// the handler returns, the stream is over.
func (s *Stream) Last() bool { return s.last }

// Receive copies the next bytes of the current packet into buf, as many as
// fit and the packet still holds, and returns how many.
func (e *Endpoint) Receive(s *Stream, buf []byte) int {
	n := copy(buf, s.pkt[s.pos:])
	s.pos += n
	s.taken += n
	return n
}

// Skip drops the next n bytes of the current packet (at most what it holds).
func (e *Endpoint) Skip(s *Stream, n int) {
	n = min(n, s.Avail())
	s.pos += n
	s.taken += n
}

// Extract handles every packet that has arrived: it runs each packet's
// handler, returns the packet's slot to its sender (credits go back
// piggybacked on the next packet to that sender, or explicitly once half a
// region is owed), and reports how many packets it handled. Handlers of
// different incoming streams run interleaved, in packet arrival order per
// sender. Called from a handler, it skips the sender whose packet that
// handler is working on.
func (e *Endpoint) Extract() (int, error) {
	n := 0
	if err := e.pollNet(); err != nil {
		return 0, err
	}
	e.pass++
	for _, p := range e.peers {
		if p.busy {
			continue
		}
		if p.owed > 0 && p.owedPass != e.pass-1 {
			// Owed since before the previous pass and no packet to p
			// carried them: return them explicitly.
			e.returnCredits(p)
		}
		// At most one region's worth per sender per call, so that a sender
		// refilled by the credits returned here cannot starve the others.
		for k := 0; k < e.slots; k++ {
			h := p.in[p.headAt:][:e.packet]
			fl := pFlags.Load(h)
			if fl == 0 {
				break
			}
			hid := pHandler.Get(h)
			plen := int(pLen.Get(h))
			id := pStream.Get(h)
			if c := pCredits.Get(h); c > 0 {
				p.returned += uint64(c)
				e.Stats.Piggybacked += int64(c)
			}
			if plen > e.payload {
				return n, fmt.Errorf("fm: packet from rank %d claims %d payload bytes (max %d)", p.rank, plen, e.payload)
			}
			if fl == flagValid|flagFirst|flagLast && hid == hMPI && e.mpi != nil {
				// A whole MPI message in one packet, every small
				// message's: handed straight to the device.
				p.busy = true
				ok, last := e.mpi.eagerIn(p.rank, h[HeaderSize:HeaderSize+plen])
				p.busy = false
				if ok {
					e.consumed(p, h)
					n++
					if last {
						// What else arrived, from p or the others,
						// waits for the next Extract (Device.eagerIn).
						return n, nil
					}
					continue
				}
			}
			var s *Stream
			if fl&flagFirst != 0 {
				if k := len(e.freeRecv); k > 0 {
					s = e.freeRecv[k-1]
					e.freeRecv = e.freeRecv[:k-1]
					*s = Stream{}
				} else {
					s = new(Stream)
				}
				s.e, s.id, s.handler, s.src = e, id, hid, p.rank
				s.length = int(pLength.Get(h))
				if fl&flagLast == 0 {
					p.streams[id] = s
				}
			} else if s = p.streams[id]; s == nil {
				return n, fmt.Errorf("fm: packet from rank %d for unknown stream %d", p.rank, id)
			}
			if int(hid) >= len(e.handlers) || e.handlers[hid] == nil {
				return n, fmt.Errorf("fm: packet from rank %d for unregistered handler %d", p.rank, hid)
			}
			s.pkt, s.pos = h[HeaderSize:HeaderSize+plen], 0
			s.arrived += plen
			s.last = fl&flagLast != 0
			p.busy = true
			e.handlers[hid](e, s)
			p.busy = false
			s.pkt = nil
			if s.last {
				if fl&flagFirst == 0 {
					delete(p.streams, id)
				}
				s.Ctx = nil
				e.freeRecv = append(e.freeRecv, s)
			}
			e.consumed(p, h)
			n++
		}
	}
	return n, nil
}

// consumed frees the slot of p's packet h, just handled, and owes p its
// credit (returned explicitly once retAt are owed).
func (e *Endpoint) consumed(p *peer, h []byte) {
	// A plain store frees the slot: its sender reuses it only after the
	// credit for it comes back, by a later atomic operation (or a packet
	// flagged by one), which orders it.
	pFlags.Set(h, 0)
	p.head++
	if p.headAt += e.packet; p.headAt == len(p.in) {
		p.headAt = 0
	}
	if p.owed == 0 {
		p.owedPass = e.pass
	}
	p.owed++
	p.received++
	e.Stats.PacketsReceived++
	if p.owed >= e.retAt {
		e.returnCredits(p)
	}
}

// returnCredits gives p the credits owed to it explicitly (no packet to
// p is going to carry them soon).
func (e *Endpoint) returnCredits(p *peer) {
	e.Stats.ExplicitReturns++
	if p.net {
		e.returnNet(p, p.owed)
		p.owed = 0
		return
	}
	atomic.AddUint64(p.report, uint64(p.owed))
	p.owed = 0
	ring(p.doorbell, p.sleepers)
}

// Incoming calls fn for every incoming stream from src that has started and
// not ended (for failing them when src dies).
func (e *Endpoint) Incoming(src int, fn func(s *Stream)) {
	for _, s := range e.peers[src].streams {
		fn(s)
	}
}

// Alive reports whether rank's process was alive at the last CheckPeers
// and, for a peer on another host, whether its connection holds.
func (e *Endpoint) Alive(rank int) bool { return e.live.Alive(rank) && e.peers[rank].lost == nil }

// gone is the error of an operation towards p once it is not Alive.
func (e *Endpoint) gone(p *peer) error {
	if p.lost != nil {
		return e.unreachable(p)
	}
	return fmt.Errorf("fm: rank %d (pid %d) has exited", p.rank, p.pid)
}

// Gone says why rank is not Alive: its process exited, or (on another
// host) its connection broke; the text names the rank and its pid or host.
func (e *Endpoint) Gone(rank int) error { return e.gone(e.peers[rank]) }

// Pid is rank's process id.
func (e *Endpoint) Pid(rank int) int { return e.peers[rank].pid }

// CheckPeers looks for processes that have exited, and peers on other
// hosts whose connection broke, since the last check and returns their
// ranks.
func (e *Endpoint) CheckPeers() []int {
	gone := e.live.Scan()
	if len(e.lostNew) > 0 {
		gone = append(gone, e.lostNew...)
		e.lostNew = nil
	}
	return gone
}

// Lost reports whether a peer on another host was lost since the last
// CheckPeers (which then reports it).
func (e *Endpoint) Lost() bool { return len(e.lostNew) > 0 }

// Seq is this process's doorbell: every sender bumps it when it hands over
// a packet or returns credits.
func (e *Endpoint) Seq() uint32 { return atomic.LoadUint32(e.seg.Uint32(offDoorbell)) }

// Sleep waits on the doorbell futex until it moves from seq or d passes.
func (e *Endpoint) Sleep(seq uint32, d time.Duration) {
	if e.direct != nil {
		e.direct.Sleep(seq, d) // frames wake it; the doorbell too
		return
	}
	sl := e.seg.Uint32(offSleepers)
	atomic.AddUint32(sl, 1)
	if e.sleeper != nil {
		e.sleeper.Arm() // a frame rings the doorbell too
	}
	_ = shm.FutexWait(e.seg.Uint32(offDoorbell), seq, d)
	atomic.AddUint32(sl, ^uint32(0))
}

// Wake rings this process's own doorbell.
func (e *Endpoint) Wake() { ring(e.seg.Uint32(offDoorbell), e.seg.Uint32(offSleepers)) }

// Poll extracts until cond holds, spinning briefly and then sleeping on the
// doorbell; it fails when a process in watch (if any) has exited.
func (e *Endpoint) Poll(cond func() bool, watch ...int) error {
	start := time.Now()
	for i := 0; ; i++ {
		seq := e.Seq()
		if _, err := e.Extract(); err != nil {
			return err
		}
		if cond() {
			return nil
		}
		if i%64 != 63 {
			continue
		}
		if e.live.Due() || e.Lost() {
			e.CheckPeers()
			for _, r := range watch {
				if !e.Alive(r) {
					return e.gone(e.peers[r])
				}
			}
		}
		if time.Since(start) > 50*time.Microsecond {
			e.Sleep(seq, 10*time.Millisecond)
		} else {
			runtime.Gosched()
		}
	}
}
