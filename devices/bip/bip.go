package bip

import (
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/adimpi/adimpi/adi"
	"github.com/adimpi/adimpi/adi/devkit/liveness"
	"github.com/adimpi/adimpi/adi/devkit/options"
	"github.com/adimpi/adimpi/adi/devkit/wire"
	"github.com/adimpi/adimpi/internal/hostid"
	"github.com/adimpi/adimpi/internal/order"
	"github.com/adimpi/adimpi/internal/pmi"
	"github.com/adimpi/adimpi/internal/shm"
	"golang.org/x/sys/unix"
)

// ErrBusy is returned by PostLong and StartLong when the peer already has
// MaxLong long operations outstanding in that direction (BIP's bound).
var ErrBusy = errors.New("bip: too many outstanding long operations with this peer")

// AnySource in NextShort and RecvShort takes a message from any sender.
const AnySource = adi.AnySource

// ErrTooLong is returned when a short message exceeds Options.Short.
var ErrTooLong = errors.New("bip: short message longer than the short-message size")

// Options are BIP's tunables (mpirun -device-opt key=value for the device).
type Options struct {
	Short   int  // short=N: largest short message, bytes (default 4096)
	Queue   int  // queue=N: slots in each receiver's circular queue per sender (default 32)
	MaxLong int  // maxlong=N: outstanding long sends (and long receives) per peer (default 1, as in BIP)
	Chunk   int  // chunk=N: bytes per shared-memory chunk of a long message without remote write (default 32768)
	CMA     bool // cma=auto|off: stream long messages with process_vm_writev when allowed
}

// DefaultOptions are the options Open and New use for keys not given.
var DefaultOptions = Options{Short: 4096, Queue: 32, MaxLong: 1, Chunk: 32 << 10, CMA: true}

// OptionTable is BIP's -device-opt table; ParseOptions reads it.
var OptionTable = options.Table{Device: "bip", Options: []options.Option{
	{Key: "short", Default: strconv.Itoa(DefaultOptions.Short), Min: 64, Max: 1 << 20, Unit: "bytes", Help: "largest short message (rounded up to 64); the MPI eager limit is short less the 40-byte header"},
	{Key: "queue", Default: strconv.Itoa(DefaultOptions.Queue), Min: 4, Max: 1 << 16, Unit: "slots", Help: "short-message queue slots per sender: 32 for the BIP API; the MPI device takes 66 unless given (a window of 64 eager messages within its credits)"},
	{Key: "maxlong", Default: strconv.Itoa(DefaultOptions.MaxLong), Min: 1, Max: 64, Help: "outstanding long sends (and long receives) per peer: 1 as in BIP for the BIP API; the MPI device takes 4 unless given (pipelined rendezvous)"},
	{Key: "chunk", Default: strconv.Itoa(DefaultOptions.Chunk), Min: 512, Max: 4 << 20, Unit: "bytes", Help: "staging chunk of a long message without remote write (rounded up to 64)"},
	{Key: "cma", Default: "auto", Choices: []string{"auto", "off"}, Help: "copy long messages straight into the posted buffer with process_vm_writev (and, from 64 KiB between contiguous buffers, the receiver helping with process_vm_readv) when allowed, or always through chunks"},
}}

// ParseOptions reads key=value options (OptionTable) over DefaultOptions.
func ParseOptions(opts map[string]string) (Options, error) {
	v, err := OptionTable.Parse(opts)
	if err != nil {
		return Options{}, err
	}
	o := Options{Short: v.Int("short"), Queue: v.Int("queue"), MaxLong: v.Int("maxlong"), Chunk: v.Int("chunk"), CMA: v.String("cma") == "auto"}
	o.Short = (o.Short + 63) &^ 63
	o.Chunk = (o.Chunk + 63) &^ 63
	return o, nil
}

// Segment layout. Every process exports one segment holding, for each
// sender w (itself included), a block that only w writes into (apart from
// the words marked "reader"):
//
//	+0    head      u64  reader: short messages consumed so far
//	+8    waitSpace u32  writer sets it when it found the queue full; reader clears it and rings
//	+64   MaxLong long-receive slots of 128 bytes (descriptor: see slot*)
//	...   MaxLong × 2 staging chunks (long data without remote write)
//	...   Queue short-message slots of 16+Short bytes: seq u64, len u32, tag u32, payload
const (
	offDoorbell = shm.HeaderSize      // u32: bumped by every writer, futex word
	offSleepers = shm.HeaderSize + 4  // u32: goroutines sleeping on the doorbell
	offProbe    = shm.HeaderSize + 8  // u64: peers test remote-write permission on it
	offPeers    = shm.HeaderSize + 64 // per-writer blocks

	blkHead      wire.U64 = 0
	blkWaitSpace wire.U32 = 8
	blkSlots              = 64
	slotDesc              = 128

	// long slot descriptor fields
	slState   wire.U32 = 0   // slotFree, slotPosted (reader), slotClaimed, slotDone (writer)
	slTag     wire.U32 = 4   // the BIP tag of the long receive
	slSeq     wire.U64 = 8   // posting order
	slAddr    wire.U64 = 16  // receive buffer address (contiguous buffers), else 0
	slCap     wire.U64 = 24  // bytes the receive accepts
	slWritten wire.U64 = 32  // bytes the sender delivered (valid at slotDone)
	slSize    wire.U64 = 40  // the sender's full message size (valid at slotDone)
	slFill    wire.U64 = 48  // 2 × u64: bytes in staging chunk 0/1 (0 = empty)
	slMode    wire.U32 = 64  // modeChunks when the data comes through staging (valid at slotDone)
	slIov     wire.U64 = 72  // address of the receive's gather list ((address, length) u64 pairs), or 0
	slIovN    wire.U64 = 80  // pairs in the gather list
	slSrc     wire.U64 = 88  // the send buffer's address when the receiver may help copy (shared copy), else 0
	slNext    wire.U64 = 96  // shared copy: the next offset either side may claim (atomic add of slPiece)
	slCopied  wire.U64 = 104 // shared copy: bytes copied into place by either side
	slRedo    wire.U64 = 112 // shared copy: offset+1 of a piece the receiver claimed but could not read, for the sender to write
	slPiece   wire.U64 = 120 // shared copy: bytes per piece (sharePiece of the message's size)

	qHdr          = 16 // short slot header: qSeq, qLen, qTag
	qSeq wire.U64 = 0  // the message's number, plus one (stored last)
	qLen wire.U32 = 8  // payload bytes
	qTag wire.U32 = 12 // BIP tag

	idlePolls = 1024 // idle polls of Progress between two looks at the peers' processes
)

const (
	slotFree uint32 = iota
	slotPosted
	slotClaimed
	slotDone
)

const (
	modeDirect uint32 = iota // written into place (remote write, or a copy to self)
	modeChunks               // through the staging chunks
)

type peer struct {
	rank, pid int
	seg       *shm.Segment
	gone      error // why it is not alive
	failed    int   // long operations its death failed
	remoteOK  bool  // process_vm_writev into it is allowed
	self      bool
	net       *netPeer // a peer on another host, reached over the network (net.go); nil on this host

	// queue positions both ways (tail, tailAt, seenHead, head, headAt), and
	// the Device's credits, outside Go's heap (fastpath.go)
	*cursors

	// outbound: my block in its segment
	out                []byte
	doorbell, sleepers *uint32
	nlongOut           int    // long sends to it not complete
	claimed            []bool // its slots (for me) that one of my sends took

	// inbound: its block in my segment
	in        []byte
	recvSlots []*LongRecv // long receives from it, by slot
	postSeq   uint64
}

// Endpoint is one process's BIP interface. It is not safe for concurrent
// use, except Seq, Sleep and Wake: callers serialise the other methods (the
// MPI core does, under its lock).
type Endpoint struct {
	rank, size int
	opt        Options
	seg        *shm.Segment
	peers      []*peer
	cur        []cursors // the peers' (fastpath.go)
	curMem     []byte    // their mapping
	blockSize  int
	offStage   int
	offQueue   int
	queueEnd   int // offQueue + Queue slots: where a queue's slots end in a block
	slotBytes  int

	sends  []*LongSend // started, not complete
	recvs  []*LongRecv // posted, not complete
	done   []func()    // completion callbacks to run at the end of Progress
	client *pmi.Client // set by Open: Close finalizes it

	// OnPeerGone, if set, is called (from Progress) when a peer's process
	// is found dead, after the long operations with it have failed.
	OnPeerGone func(rank int, err error)

	// takeNet, if set, is offered a short message from a peer on another
	// host as it arrives, when no earlier one waits in the peer's queue
	// (placeShort); a message it takes (true) is consumed without being
	// written into the queue and read back. The MPI device takes its
	// eager messages, as its drain would.
	takeNet func(src int, tag uint32, msg []byte) bool

	rr   int // where NextShort from AnySource starts looking
	live *liveness.Peers
	net  *netSide // the network, when some peer runs on another host (net.go)

	Stats Stats
}

// Stats counts an endpoint's traffic.
type Stats struct {
	ShortSent, ShortRecv, QueueFull int64
	LongSent, LongRecv              int64
	RemoteWrites, Chunks            int64 // to a peer on another host: data frames referencing the buffer, staging chunks
	SharedWrites, SharedReads       int64 // pieces of shared copies written by this sender, read by this receiver
	BytesSent                       int64
}

// LongSend is a long message being sent.
type LongSend struct {
	peer   *peer
	tag    uint32
	buf    adi.Buffer
	slot   int      // -1 until matched with a posted receive
	n      int      // bytes to deliver: min(size, the receive's capacity)
	off    int      // bytes delivered so far
	half   int      // next staging chunk (0 or 1)
	net    *netSend // to a peer on another host
	shared bool     // shared copy: the receiver may claim pieces and read them from buf
	done   bool
	err    error
	onDone func(n int, err error)
}

// Done reports whether the send has completed (its buffer may be reused).
func (s *LongSend) Done() bool { return s.done }

// Err is the send's error, once done.
func (s *LongSend) Err() error { return s.err }

// Bytes is the number of bytes delivered (less than the buffer's size when
// the receive was shorter).
func (s *LongSend) Bytes() int { return s.n }

// LongRecv is a posted long receive.
type LongRecv struct {
	peer   *peer
	tag    uint32
	buf    adi.Buffer
	slot   int
	cap    int
	iov    []uint64 // gather list of a non-contiguous buffer of large blocks
	direct bool     // the data was written into place, not through staging
	got    int      // bytes arrived through staging chunks
	noHelp bool     // reading from the sender failed: leave shared copies to it
	half   int
	n      int // bytes delivered
	size   int // the sender's message size
	done   bool
	err    error
	onDone func(n, size int, err error)
}

// Done reports whether the receive has completed.
func (r *LongRecv) Done() bool { return r.done }

// Err is the receive's error, once done.
func (r *LongRecv) Err() error { return r.err }

// Bytes is the number of bytes received; Size the sender's message size
// (larger than Bytes when the message was truncated).
func (r *LongRecv) Bytes() int { return r.n }

// Direct reports whether the data was written straight into place (remote
// write into a contiguous buffer or through its gather list, or a copy to
// self) rather than through the staging chunks.
func (r *LongRecv) Direct() bool { return r.direct }

// Size is the size of the message that the sender sent.
func (r *LongRecv) Size() int { return r.size }

// Open starts a standalone BIP endpoint for a process started by a PMI
// launcher (mpirun, Hydra's mpiexec, Slurm): it connects to PMI, wires up
// with every process of the job through the key-value space, and returns.
// Without a launcher the process is rank 0 of 1. opts are key=value options
// (nil: ADIMPI_DEVICE_OPT's, else the defaults). Close ends the job's PMI
// session too.
func Open(opts map[string]string) (*Endpoint, error) {
	if opts == nil {
		opts = map[string]string{}
		for kv := range strings.SplitSeq(os.Getenv("ADIMPI_DEVICE_OPT"), ",") {
			if k, v, ok := strings.Cut(strings.TrimSpace(kv), "="); ok {
				opts[k] = v
			}
		}
	}
	o, err := ParseOptions(opts)
	if err != nil {
		return nil, err
	}
	c, err := pmi.Connect()
	if err != nil {
		return nil, err
	}
	e, err := New(c.Rank(), c.Size(), c, o)
	if err != nil {
		_ = c.Abort(1, err.Error())
		return nil, err
	}
	e.client = c
	return e, nil
}

// New wires up an endpoint for process rank of size through kvs (collective
// over the job: every process calls it). Peers on this process's host
// (same kernel, PID and mount namespaces) are reached through shared
// memory, the others over the network (net.go).
func New(rank, size int, kvs adi.KVS, o Options) (*Endpoint, error) {
	return newEndpoint(rank, size, kvs, o, nil)
}

// record is what a rank publishes for its peers.
type record struct {
	pid, fd                      int
	key                          uint64
	probe                        uintptr
	short, queue, maxlong, chunk int
	host                         string // its host's name, for errors
}

// newEndpoint is New for a job whose ranks' host numbers are known
// (hosts[r], as the MPI core gives them), or, with hosts nil, learnt from
// the ranks' host identities in their records.
func newEndpoint(rank, size int, kvs adi.KVS, o Options, hosts []int) (*Endpoint, error) {
	if hosts != nil && len(hosts) != size {
		return nil, fmt.Errorf("bip: the hosts of %d ranks for a job of %d", len(hosts), size)
	}
	if o.Short == 0 {
		o = DefaultOptions
	}
	e := &Endpoint{rank: rank, size: size, opt: o, live: liveness.New(rank, size, idlePolls)}
	// Slots start on cache lines: a small message (slot header, MPI-BIP
	// header and up to 8 bytes of data) is then one line to move.
	e.slotBytes = (qHdr + o.Short + 63) &^ 63
	e.offStage = blkSlots + o.MaxLong*slotDesc
	e.offQueue = e.offStage + o.MaxLong*2*o.Chunk
	e.queueEnd = e.offQueue + o.Queue*e.slotBytes
	e.blockSize = (e.offQueue + o.Queue*e.slotBytes + 63) &^ 63
	var err error
	e.seg, err = shm.Export(fmt.Sprintf("adimpi-bip-%d", rank), offPeers+size*e.blockSize)
	if err != nil {
		return nil, err
	}
	if err := e.wireUp(kvs, hosts); err != nil {
		e.Close()
		return nil, err
	}
	e.startNet()
	return e, nil
}

// wireUp publishes this endpoint's record, reads its peers' and maps the
// segments of those on this host; the network comes up first when the
// hosts are known (its address must be published before the barrier), or
// behind one more barrier once the records have told them.
func (e *Endpoint) wireUp(kvs adi.KVS, hosts []int) error {
	o := e.opt
	if hosts != nil {
		if err := e.openNet(kvs, hosts); err != nil {
			return err
		}
	}
	id, err := hostid.Self()
	if err != nil {
		return err
	}
	probe := uintptr(unsafe.Pointer(&e.seg.Mem[offProbe]))
	me := fmt.Sprintf("%d:%d:%x:%x:%d:%d:%d:%d|%s|%s", os.Getpid(), e.seg.FD, e.seg.Key, probe, o.Short, o.Queue, o.MaxLong, o.Chunk, hostid.Name(), id)
	if err := kvs.Put(fmt.Sprintf("bip-%d", e.rank), me); err != nil {
		return err
	}
	if err := kvs.Barrier(); err != nil {
		return err
	}
	recs := make([]record, e.size)
	ids := make([]hostid.ID, e.size)
	for r := range recs {
		v, err := kvs.Get(fmt.Sprintf("bip-%d", r))
		if err != nil {
			return err
		}
		c := &recs[r]
		f := strings.Split(v, "|")
		if len(f) != 3 {
			return fmt.Errorf("bip: rank %d published %q: want segment|host|host id", r, v)
		}
		if _, err := fmt.Sscanf(f[0], "%d:%d:%x:%x:%d:%d:%d:%d", &c.pid, &c.fd, &c.key, &c.probe, &c.short, &c.queue, &c.maxlong, &c.chunk); err != nil {
			return fmt.Errorf("bip: rank %d published %q: %v", r, v, err)
		}
		c.host, ids[r] = f[1], hostid.ID(f[2])
		if c.short != o.Short || c.queue != o.Queue || c.maxlong != o.MaxLong || c.chunk != o.Chunk {
			return fmt.Errorf("bip: rank %d uses short=%d queue=%d maxlong=%d chunk=%d, this rank %d/%d/%d/%d; options must agree",
				r, c.short, c.queue, c.maxlong, c.chunk, o.Short, o.Queue, o.MaxLong, o.Chunk)
		}
	}
	if hosts == nil {
		hosts = hostid.Map(ids)
		if err := e.openNetLate(kvs, hosts); err != nil {
			return err
		}
	}
	if e.cur, e.curMem, err = newCursors(e.size); err != nil {
		return err
	}
	e.peers = make([]*peer, e.size)
	for r, c := range recs {
		p := &peer{rank: r, pid: os.Getpid(), seg: e.seg, self: r == e.rank, cursors: &e.cur[r]}
		e.peers[r] = p
		p.in = e.seg.Mem[offPeers+r*e.blockSize:][:e.blockSize]
		p.recvSlots = make([]*LongRecv, o.MaxLong)
		p.claimed = make([]bool, o.MaxLong)
		if hosts[r] != hosts[e.rank] {
			// The liveness scan cannot see a process of another host: it
			// watches this one instead, and the wire reports the peer lost.
			p.seg = nil
			p.net = &netPeer{host: c.host, slots: make([]netSlot, o.MaxLong), sending: make([]*LongSend, o.MaxLong)}
			e.live.SetPid(r, p.pid)
			continue
		}
		if r != e.rank {
			p.pid = c.pid
			if p.seg, err = shm.Import(p.pid, c.fd, c.key); err != nil {
				return fmt.Errorf("bip: rank %d: %w", r, err)
			}
			p.remoteOK = o.CMA && shm.CanRemoteWrite(p.pid, c.probe)
		}
		p.out = p.seg.Mem[offPeers+e.rank*e.blockSize:][:e.blockSize]
		p.doorbell, p.sleepers = p.seg.Uint32(offDoorbell), p.seg.Uint32(offSleepers)
		e.live.SetPid(r, p.pid)
	}
	return nil
}

// Rank is this process's rank in the job.
func (e *Endpoint) Rank() int { return e.rank }

// Size is the number of processes in the job.
func (e *Endpoint) Size() int { return e.size }

// Options are the options the endpoint runs with.
func (e *Endpoint) Options() Options { return e.opt }

// Close releases the endpoint's segments. An endpoint from Open first
// waits at a PMI barrier for every process (so that no peer still writes
// into this one) and finalizes PMI.
func (e *Endpoint) Close() error {
	var err error
	if e.client != nil {
		err = e.client.Barrier()
	}
	if cerr := e.closeNet(); err == nil {
		err = cerr
	}
	if e.client != nil {
		if ferr := e.client.Finalize(); err == nil {
			err = ferr
		}
		e.client = nil
	}
	for _, p := range e.peers {
		if p != nil && p.seg != nil && p.seg != e.seg {
			if cerr := p.seg.Close(); err == nil {
				err = cerr
			}
		}
	}
	if cerr := e.seg.Close(); err == nil {
		err = cerr
	}
	if e.curMem != nil {
		if cerr := unix.Munmap(e.curMem); err == nil {
			err = cerr
		}
		e.cur, e.curMem = nil, nil
	}
	return err
}

func ring(doorbell, sleepers *uint32) {
	atomic.AddUint32(doorbell, 1)
	if atomic.LoadUint32(sleepers) > 0 {
		_ = shm.FutexWake(doorbell, math.MaxInt32)
	}
}

func (e *Endpoint) peerErr(p *peer, op string) error {
	if p.gone != nil {
		return p.gone
	}
	return e.exited(op, p.rank)
}

func (e *Endpoint) checkRank(r int, op string) (*peer, error) {
	if r < 0 || r >= e.size {
		return nil, adi.Errorf(adi.ErrRank, op, "rank %d out of range [0,%d)", r, e.size)
	}
	p := e.peers[r]
	if !e.Alive(r) {
		return nil, e.peerErr(p, op)
	}
	return p, nil
}

// ShortMax is the largest short message.
func (e *Endpoint) ShortMax() int { return e.opt.Short }

// QueueSlots is the number of short messages a sender can have waiting in
// one receiver's queue.
func (e *Endpoint) QueueSlots() int { return e.opt.Queue }

// TrySend writes a short message of n bytes into dest's circular queue,
// filling it with fill (which gets exactly n bytes to write), and reports
// false when the queue is full. It never waits: the message is in the
// receiver's memory when it returns true, whether or not anything is
// posted there.
func (e *Endpoint) TrySend(dest int, tag uint32, n int, fill func(p []byte)) (bool, error) {
	p, err := e.checkRank(dest, "bip send")
	if err != nil {
		return false, err
	}
	if n > e.opt.Short || n < 0 {
		return false, ErrTooLong
	}
	if p.net != nil {
		return e.trySendNet(p, tag, n, fill)
	}
	s := e.reserveShort(p)
	if s == nil {
		return false, nil
	}
	if n > 0 && fill != nil {
		fill(s[qHdr : qHdr+n])
	}
	e.publishShort(p, s, tag, n)
	return true, nil
}

// reserveShort returns the slot of the next short message to p, a peer on
// this host, for the caller to fill from qHdr on and hand to
// publishShort, or nil when p's queue is full. The reader's head word is
// read only when the queue looks full by the value last read; if it is
// full, the reader is asked to ring when it consumes (waitSpace), and the
// head is read once more, since it may have consumed in between.
func (e *Endpoint) reserveShort(p *peer) []byte {
	q := uint64(e.opt.Queue)
	if p.tail-p.seenHead >= q {
		headp := blkHead.Ptr(p.out)
		p.seenHead = atomic.LoadUint64(headp)
		if p.tail-p.seenHead >= q {
			blkWaitSpace.Store(p.out, 1)
			p.seenHead = atomic.LoadUint64(headp)
			if p.tail-p.seenHead >= q {
				e.Stats.QueueFull++
				return nil
			}
		}
	}
	if p.tailAt == 0 {
		p.tailAt = e.offQueue
	}
	return p.out[p.tailAt:][:e.slotBytes]
}

// prefetchAhead is how many slots ahead of the one it writes a sender
// fetches the slot's first line for writing: the time a cross-core fetch
// takes, at the pace a window of small sends fills slots.
const prefetchAhead = 4

// publishShort hands slot s, which reserveShort returned and the caller
// filled with n payload bytes, to the reader as a short message with tag,
// and rings p's doorbell. The slot's sequence word is stored last with a
// release store: a sequentially consistent one (an XCHG) would wait for
// the slot's line to come back from the reader, who read it a lap ago.
// That wait happens instead, off the sender's path, for the line
// prefetchAhead slots on, fetched for writing before the doorbell's atomic
// add (which does wait for this slot's stores).
func (e *Endpoint) publishShort(p *peer, s []byte, tag uint32, n int) {
	qLen.Set(s, uint32(n))
	qTag.Set(s, tag)
	p.tail++
	if p.tailAt += e.slotBytes; p.tailAt == e.queueEnd {
		p.tailAt = e.offQueue
	}
	order.StoreRelease64(qSeq.Ptr(s), p.tail)
	e.Stats.ShortSent++
	e.Stats.BytesSent += int64(n)
	ahead := p.tailAt + (prefetchAhead-1)*e.slotBytes
	if ahead >= e.queueEnd {
		ahead -= e.queueEnd - e.offQueue
	}
	order.PrefetchW(unsafe.Pointer(&p.out[ahead]))
	ring(p.doorbell, p.sleepers)
}

// SendShort sends a short message, blocking while dest's queue is full:
// it makes progress, spins briefly, then sleeps on its doorbell until the
// receiver consumes. To a peer on another host it returns once the frame
// is with the kernel.
func (e *Endpoint) SendShort(dest int, tag uint32, msg []byte) error {
	err := e.wait(func() (bool, error) {
		return e.TrySend(dest, tag, len(msg), func(p []byte) { copy(p, msg) })
	})
	if err == nil && e.Remote(dest) {
		// To another host: return once the kernel has the frame, which
		// then reaches the receiver whether or not this process goes on
		// calling BIP.
		p := e.peers[dest]
		err = e.wait(func() (bool, error) {
			if p.net.lost != nil {
				return false, adi.Errorf(adi.ErrOther, "bip send", "rank %d on host %s is unreachable: %v", dest, p.net.host, p.net.lost)
			}
			return p.net.pending == 0, nil
		})
	}
	return err
}

// NextShort consumes the oldest short message from src (AnySource: from
// the first source, in rank order from a rotating start, that has one)
// and calls fn with it; msg is valid only during fn. It reports whether
// there was one.
func (e *Endpoint) NextShort(src int, fn func(src int, tag uint32, msg []byte)) bool {
	if src >= 0 {
		if src >= e.size {
			return false
		}
		return e.next(e.peers[src], fn)
	}
	for k := range e.size {
		p := e.peers[(e.rr+k)%e.size]
		if e.next(p, fn) {
			e.rr = (p.rank + 1) % e.size
			return true
		}
	}
	return false
}

func (e *Endpoint) next(p *peer, fn func(src int, tag uint32, msg []byte)) bool {
	s := e.peekShort(p)
	if s == nil {
		return false
	}
	n := int(qLen.Get(s))
	tag := qTag.Get(s)
	fn(p.rank, tag, s[qHdr:qHdr+n])
	e.consumeShort(p, true)
	return true
}

// peekShort returns the slot of p's next short message, or nil when it has
// not arrived.
func (e *Endpoint) peekShort(p *peer) []byte {
	if p.headAt == 0 {
		p.headAt = e.offQueue
	}
	s := p.in[p.headAt:][:e.slotBytes]
	if qSeq.Load(s) != p.head+1 {
		return nil
	}
	return s
}

// consumeShort frees the slot of p's message that peekShort returned:
// takeShort, then publishHead.
func (e *Endpoint) consumeShort(p *peer, strict bool) {
	e.takeShort(p)
	e.publishHead(p, strict)
}

// takeShort moves p's head past the message that peekShort returned,
// without telling the sender yet (publishHead): a receiver draining several
// messages tells it once.
func (e *Endpoint) takeShort(p *peer) {
	p.head++
	if p.headAt += e.slotBytes; p.headAt == e.queueEnd {
		p.headAt = e.offQueue
	}
	e.Stats.ShortRecv++
}

// publishHead tells p how far this process has consumed its messages (the
// head word, or credits over the network) and rings p if it waits for
// space. A strict head store is sequentially consistent, as the sender's
// waitSpace flag needs (Dekker's pattern: the head's store and the flag's
// load must not be reordered, or a sender blocked on a full queue may
// sleep through its last wake-up). The MPI device, whose senders never
// find a queue full within MPI-BIP's credits, publishes the head with a
// release store instead, which does not wait for the stores before it
// (the receive's data and status) to reach the cache.
func (e *Endpoint) publishHead(p *peer, strict bool) {
	if p.net != nil {
		e.consumedNet(p)
		return
	}
	if strict {
		blkHead.Store(p.in, p.head)
	} else {
		order.StoreRelease64(blkHead.Ptr(p.in), p.head)
	}
	if blkWaitSpace.Load(p.in) != 0 {
		blkWaitSpace.Store(p.in, 0)
		ring(p.doorbell, p.sleepers)
	}
}

// RecvShort blocks until a short message from src (or AnySource = -2)
// arrives and copies it into buf, returning its source, tag and length
// (the message is cut to len(buf)).
func (e *Endpoint) RecvShort(src int, buf []byte) (from int, tag uint32, n int, err error) {
	err = e.wait(func() (bool, error) {
		got := e.NextShort(src, func(s int, t uint32, msg []byte) {
			from, tag, n = s, t, copy(buf, msg)
		})
		if !got && src >= 0 && src < e.size && !e.Alive(src) {
			return false, e.peerErr(e.peers[src], "bip receive")
		}
		return got, nil
	})
	return
}

// PostLong posts a long receive from src with tag into buf; the matching
// long send streams its data straight into buf. At most MaxLong long
// receives per source may be outstanding (ErrBusy). done, if not nil, is
// called from Progress when the receive completes.
func (e *Endpoint) PostLong(src int, tag uint32, buf adi.Buffer, done func(n, size int, err error)) (*LongRecv, error) {
	return e.PostLongN(src, tag, buf, buf.Size(), done)
}

// PostLongN is PostLong accepting at most n bytes (n ≤ buf.Size()).
func (e *Endpoint) PostLongN(src int, tag uint32, buf adi.Buffer, n int, done func(n, size int, err error)) (*LongRecv, error) {
	p, err := e.checkRank(src, "bip long receive")
	if err != nil {
		return nil, err
	}
	n = min(n, buf.Size())
	slot := -1
	for i, r := range p.recvSlots {
		if r == nil {
			slot = i
			break
		}
	}
	if slot < 0 {
		return nil, ErrBusy
	}
	r := &LongRecv{peer: p, tag: tag, buf: buf, slot: slot, cap: n, onDone: done}
	if p.net != nil {
		if err := e.postLongNet(r); err != nil {
			return nil, err
		}
		p.recvSlots[slot] = r
		e.recvs = append(e.recvs, r)
		return r, nil
	}
	p.recvSlots[slot] = r
	d := p.in[blkSlots+slot*slotDesc:][:slotDesc]
	addr := uint64(0)
	iov, niov := uint64(0), 0
	r.iov = nil
	switch {
	case n > 0 && buf.Contiguous() && !p.self:
		addr = uint64(uintptr(unsafe.Pointer(&buf.Mem[0])))
	case n > 0 && !p.self && e.opt.CMA:
		if r.iov = gatherList(buf, n); r.iov != nil {
			iov, niov = uint64(uintptr(unsafe.Pointer(&r.iov[0]))), len(r.iov)/2
		}
	}
	p.postSeq++
	slTag.Set(d, tag)
	slSeq.Set(d, p.postSeq)
	slAddr.Set(d, addr)
	slCap.Set(d, uint64(n))
	slIov.Set(d, iov)
	slIovN.Set(d, uint64(niov))
	slWritten.Set(d, 0)
	slSize.Set(d, 0)
	slFill.Store(d, 0)
	(slFill + 8).Store(d, 0)
	slState.Store(d, slotPosted)
	e.recvs = append(e.recvs, r)
	ring(p.doorbell, p.sleepers)
	return r, nil
}

// StartLong starts a long send of buf to dest with tag. The data moves
// once dest has posted a long receive with that tag (rendezvous): straight
// into the receive buffer with process_vm_writev when allowed, else through
// shared-memory chunks. At most MaxLong long sends per destination may be
// outstanding (ErrBusy). done, if not nil, is called from Progress when the
// send completes.
func (e *Endpoint) StartLong(dest int, tag uint32, buf adi.Buffer, done func(n int, err error)) (*LongSend, error) {
	p, err := e.checkRank(dest, "bip long send")
	if err != nil {
		return nil, err
	}
	if p.nlongOut >= e.opt.MaxLong {
		return nil, ErrBusy
	}
	p.nlongOut++
	s := &LongSend{peer: p, tag: tag, buf: buf, slot: -1, onDone: done}
	if p.net != nil {
		s.net = &netSend{chunks: !e.opt.CMA}
	}
	e.sends = append(e.sends, s)
	e.advanceSend(s)
	return s, nil
}

// SendLong is StartLong and waiting for the send.
func (e *Endpoint) SendLong(dest int, tag uint32, data []byte) error {
	s, err := e.StartLong(dest, tag, adi.Bytes(data), nil)
	if err != nil {
		return err
	}
	return e.Wait(s.Done, s.Err)
}

// RecvLong is PostLong and waiting for the receive; it returns the bytes
// received.
func (e *Endpoint) RecvLong(src int, tag uint32, buf []byte) (int, error) {
	r, err := e.PostLong(src, tag, adi.Bytes(buf), nil)
	if err != nil {
		return 0, err
	}
	err = e.Wait(r.Done, r.Err)
	return r.n, err
}

// Wait makes progress until done() holds, then returns errf().
func (e *Endpoint) Wait(done func() bool, errf func() error) error {
	if err := e.wait(func() (bool, error) { return done(), nil }); err != nil {
		return err
	}
	return errf()
}

// wait runs try until it reports true or an error, making progress in
// between: spinning briefly, then sleeping on the doorbell.
func (e *Endpoint) wait(try func() (bool, error)) error {
	for spins := 0; ; spins++ {
		seq := e.Seq()
		ok, err := try()
		if ok || err != nil {
			e.runDone()
			return err
		}
		if e.Progress() {
			spins = 0
			continue
		}
		if spins > 64 {
			e.Sleep(seq, 50*time.Millisecond)
		}
	}
}

func (e *Endpoint) finishSend(s *LongSend, err error) {
	s.done, s.err = true, err
	s.peer.nlongOut--
	if s.onDone != nil {
		e.done = append(e.done, func() { s.onDone(s.n, err) })
	}
}

func (e *Endpoint) finishRecv(r *LongRecv, err error) {
	r.done, r.err = true, err
	p := r.peer
	p.recvSlots[r.slot] = nil
	if r.onDone != nil {
		e.done = append(e.done, func() { r.onDone(r.n, r.size, err) })
	}
}

// advanceSend moves a long send forward: match a posted receive, then
// deliver data. It reports whether anything happened.
func (e *Endpoint) advanceSend(s *LongSend) bool {
	p := s.peer
	if s.done {
		return false
	}
	if p.net != nil {
		return e.advanceNet(s)
	}
	did := false
	if s.slot < 0 {
		best, bestSeq := -1, uint64(0)
		for i := 0; i < e.opt.MaxLong; i++ {
			if p.claimed[i] {
				continue
			}
			d := p.out[blkSlots+i*slotDesc:][:slotDesc]
			if slState.Load(d) != slotPosted || slTag.Get(d) != s.tag {
				continue
			}
			if seq := slSeq.Get(d); best < 0 || seq < bestSeq {
				best, bestSeq = i, seq
			}
		}
		if best < 0 {
			return false
		}
		s.slot = best
		p.claimed[best] = true
		d := p.out[blkSlots+best*slotDesc:][:slotDesc]
		s.n = min(s.buf.Size(), int(slCap.Get(d)))
		src := uint64(0)
		if s.shared = s.n >= shareMin && slAddr.Get(d) != 0 && p.remoteOK && s.buf.Contiguous(); s.shared {
			src = uint64(uintptr(unsafe.Pointer(&s.buf.Mem[0])))
			slNext.Store(d, 0)
			slCopied.Store(d, 0)
			slRedo.Store(d, 0)
			slPiece.Set(d, sharePiece(s.n))
			slWritten.Set(d, uint64(s.n))
		}
		slSrc.Store(d, src)
		slState.Store(d, slotClaimed)
		if s.shared {
			ring(p.doorbell, p.sleepers) // the receiver may start helping
		}
		did = true
	}
	d := p.out[blkSlots+s.slot*slotDesc:][:slotDesc]
	addr := slAddr.Get(d)
	mode := modeDirect
	switch {
	case s.n == 0:
	case p.self:
		r := p.recvSlots[s.slot]
		off := 0
		_ = s.buf.Pieces(0, s.n, func(b []byte) error {
			r.buf.CopyIn(off, b)
			off += len(b)
			return nil
		})
		s.off = s.n
	case s.shared:
		moved, done, err := e.shareSend(s, d, addr)
		if err != nil {
			return e.remoteFailed(s, err)
		}
		if !done {
			return did || moved
		}
		e.Stats.RemoteWrites++
	case addr != 0 && p.remoteOK:
		const window = 1 << 20
		for s.off < s.n {
			k := min(window, s.n-s.off)
			var pieces [][]byte
			_ = s.buf.Pieces(s.off, k, func(b []byte) error { pieces = append(pieces, b); return nil })
			if err := shm.RemoteWrite(p.pid, uintptr(addr)+uintptr(s.off), pieces); err != nil {
				return e.remoteFailed(s, err)
			}
			s.off += k
		}
		e.Stats.RemoteWrites++
	case slIovN.Get(d) > 0 && p.remoteOK:
		if err := e.scatter(s, slIov.Get(d), int(slIovN.Get(d))); err != nil {
			return e.remoteFailed(s, err)
		}
	default:
		mode = modeChunks
		for s.off < s.n {
			fp := (slFill + wire.U64(8*s.half)).Ptr(d)
			if atomic.LoadUint64(fp) != 0 {
				return did // the receiver has not emptied this chunk yet
			}
			k := min(e.opt.Chunk, s.n-s.off)
			st := e.offStage + (s.slot*2+s.half)*e.opt.Chunk
			s.buf.CopyOut(s.off, p.out[st:st+k])
			atomic.StoreUint64(fp, uint64(k))
			ring(p.doorbell, p.sleepers)
			s.off += k
			s.half ^= 1
			e.Stats.Chunks++
			did = true
		}
	}
	slMode.Set(d, mode)
	slWritten.Set(d, uint64(s.n))
	slSize.Set(d, uint64(s.buf.Size()))
	slState.Store(d, slotDone)
	p.claimed[s.slot] = false
	ring(p.doorbell, p.sleepers)
	e.Stats.LongSent++
	e.Stats.BytesSent += int64(s.n)
	e.finishSend(s, nil)
	return true
}

// remoteFailed handles a failed remote write of send s: if the peer still
// lives (the kernel's policy changed, say), the send starts over through
// the staging chunks and remote write to that peer stays off; else the
// send fails.
func (e *Endpoint) remoteFailed(s *LongSend, err error) bool {
	p := s.peer
	if shm.Alive(p.pid) && p.remoteOK {
		p.remoteOK = false
		s.off = 0
		if s.shared {
			// No more claims: the rest goes through the staging chunks,
			// which rewrite the whole message in order.
			d := p.out[blkSlots+s.slot*slotDesc:][:slotDesc]
			atomic.StoreUint64(slNext.Ptr(d), math.MaxUint64/2)
			s.shared = false
		}
		e.advanceSend(s)
		return true
	}
	e.finishSend(s, adi.Errorf(adi.ErrOther, "bip long send", "remote write to rank %d: %v", p.rank, err))
	p.claimed[s.slot] = false
	return true
}

// advanceRecv takes chunks of a long receive out of staging and completes
// it when the sender is done.
func (e *Endpoint) advanceRecv(r *LongRecv) bool {
	p := r.peer
	if p.net != nil {
		return false // completed by its frames (net.go)
	}
	d := p.in[blkSlots+r.slot*slotDesc:][:slotDesc]
	st := slState.Load(d)
	did := false
	if st == slotClaimed && !r.noHelp && p.remoteOK {
		if src := slSrc.Load(d); src != 0 && e.shareRecv(r, d, src) {
			did = true
		}
	}
	for {
		fp := (slFill + wire.U64(8*r.half)).Ptr(d)
		k := int(atomic.LoadUint64(fp))
		if k == 0 {
			break
		}
		k = min(k, r.cap-r.got)
		at := e.offStage + (r.slot*2+r.half)*e.opt.Chunk
		r.buf.CopyIn(r.got, p.in[at:at+k])
		r.got += k
		atomic.StoreUint64(fp, 0)
		ring(p.doorbell, p.sleepers)
		r.half ^= 1
		did = true
	}
	if st != slotDone {
		return did
	}
	w := int(slWritten.Get(d))
	if slMode.Get(d) == modeChunks && r.got < w {
		return did // chunks still to come
	}
	r.n, r.size = w, int(slSize.Get(d))
	r.direct = slMode.Get(d) == modeDirect
	slState.Store(d, slotFree)
	e.Stats.LongRecv++
	e.finishRecv(r, nil)
	return true
}

// Progress advances every long operation and checks, now and then, that
// peers are alive. It reports whether anything happened. Completion
// callbacks run before it returns.
func (e *Endpoint) Progress() bool {
	did := false
	if e.net != nil && e.pollNet() {
		did = true
	}
	if len(e.sends) > 0 {
		keep := e.sends[:0]
		for _, s := range e.sends {
			if e.advanceSend(s) {
				did = true
			}
			if !s.done {
				keep = append(keep, s)
			}
		}
		clear(e.sends[len(keep):])
		e.sends = keep
	}
	if len(e.recvs) > 0 {
		keep := e.recvs[:0]
		for _, r := range e.recvs {
			if !r.done && e.advanceRecv(r) {
				did = true
			}
			if !r.done {
				keep = append(keep, r)
			}
		}
		clear(e.recvs[len(keep):])
		e.recvs = keep
	}
	if did {
		e.live.Busy()
	} else if e.live.Idle() {
		did = e.checkPeers() // requests failed: waiters must look
	}
	e.runDone()
	return did
}

func (e *Endpoint) runDone() {
	for len(e.done) > 0 {
		f := e.done[0]
		e.done = e.done[1:]
		f()
	}
	e.done = e.done[:0]
}

// checkPeers fails the long operations with a peer whose process is gone
// and reports the death through OnPeerGone; it tells whether one was.
func (e *Endpoint) checkPeers() bool {
	gone := e.live.Scan()
	for _, r := range gone {
		e.peerDied(e.peers[r], e.live.Lost(r))
	}
	return len(gone) > 0
}

// peerDied fails the long operations with p, which is gone (err says how),
// and reports it through OnPeerGone.
func (e *Endpoint) peerDied(p *peer, err error) {
	p.gone = err
	for _, s := range e.sends {
		if s.peer == p && !s.done {
			e.finishSend(s, p.gone)
			p.failed++
		}
	}
	for _, r := range e.recvs {
		if r.peer == p && !r.done {
			e.finishRecv(r, p.gone)
			p.failed++
		}
	}
	if e.OnPeerGone != nil {
		e.OnPeerGone(p.rank, p.gone)
	}
}

// Alive reports whether rank's process was alive at the last check (and,
// on another host, its connection unbroken).
func (e *Endpoint) Alive(rank int) bool { return e.live.Alive(rank) && e.peers[rank].gone == nil }

// Seq is the doorbell word every writer bumps.
func (e *Endpoint) Seq() uint32 { return atomic.LoadUint32(e.seg.Uint32(offDoorbell)) }

// Sleep waits on the doorbell until it moves from seq or d passes. It may
// be called concurrently with the other methods.
func (e *Endpoint) Sleep(seq uint32, d time.Duration) {
	if e.net != nil && e.net.direct != nil {
		e.net.direct.Sleep(seq, d) // frames wake it; the doorbell too
		e.live.Slept()
		return
	}
	sl := e.seg.Uint32(offSleepers)
	atomic.AddUint32(sl, 1)
	if e.net != nil && e.net.sleeper != nil {
		e.net.sleeper.Arm() // a frame rings the doorbell too
	}
	_ = shm.FutexWait(e.seg.Uint32(offDoorbell), seq, d)
	e.live.Slept()
	atomic.AddUint32(sl, ^uint32(0))
}

// Wake rings this process's own doorbell, so that every Sleep returns.
func (e *Endpoint) Wake() { ring(e.seg.Uint32(offDoorbell), e.seg.Uint32(offSleepers)) }

// scatterMin is the smallest average block of a non-contiguous receive
// buffer worth a gather list: for smaller blocks the kernel's per-piece
// cost in process_vm_writev exceeds a second copy through staging.
const scatterMin = 8 << 10

// gatherList describes the first n packed bytes of buf as (address,
// length) pairs — BIP's gather list, which the sender reads with
// process_vm_readv and writes through with one scatter remote write per
// batch — or returns nil when buf's blocks are too small for it.
func gatherList(buf adi.Buffer, n int) []uint64 {
	limit := n/scatterMin + 1
	var iov []uint64
	err := buf.Pieces(0, n, func(p []byte) error {
		if len(iov)/2 >= limit {
			return errSmallBlocks
		}
		iov = append(iov, uint64(uintptr(unsafe.Pointer(&p[0]))), uint64(len(p)))
		return nil
	})
	if err != nil {
		return nil
	}
	return iov
}

var errSmallBlocks = errors.New("blocks too small for a gather list")

// scatter writes send s straight into the pieces of the receiver's gather
// list (niov pairs at address list in the receiver's memory), reading the
// list in batches.
func (e *Endpoint) scatter(s *LongSend, list uint64, niov int) error {
	const batch = 512
	p := s.peer
	raw := make([]byte, 16*batch)
	remote := make([]shm.RemoteSeg, 0, batch)
	var local [][]byte
	for i := 0; i < niov && s.off < s.n; i += batch {
		k := min(batch, niov-i)
		if err := shm.RemoteRead(p.pid, uintptr(list)+uintptr(16*i), [][]byte{raw[:16*k]}); err != nil {
			return err
		}
		remote, covered := remote[:0], 0
		for j := 0; j < k && s.off+covered < s.n; j++ {
			seg := shm.RemoteSeg{Addr: wire.U64(16 * j).Get(raw), Len: wire.U64(16*j + 8).Get(raw)}
			seg.Len = min(seg.Len, uint64(s.n-s.off-covered))
			remote = append(remote, seg)
			covered += int(seg.Len)
		}
		local = local[:0]
		_ = s.buf.Pieces(s.off, covered, func(b []byte) error { local = append(local, b); return nil })
		if err := shm.RemoteScatter(p.pid, local, remote); err != nil {
			return err
		}
		s.off += covered
		e.Stats.RemoteWrites++
	}
	return nil
}

// Shared copy. A long message into a contiguous receive buffer from a
// contiguous send buffer, both processes allowed to copy between the two
// (process_vm_readv / process_vm_writev), still moves in one copy, straight
// from the send buffer into the receive buffer, but both processes make it:
// the sender writes pieces (sharePiece) into place and the receiver,
// which waits for the message in Progress anyway, reads pieces straight out
// of the send buffer, each side claiming the next piece with an atomic add
// on the slot descriptor's slNext. On two cores the copy and the kernel's
// pinning of the remote pages run on both, where a remote write alone
// leaves the receiver's core spinning; a receiver that is busy elsewhere
// claims nothing, and the sender copies the whole message as before. The
// send completes once slCopied reaches its size, since until then the
// receiver may still be reading its buffer.
const (
	shareMin      = 64 << 10  // smaller messages are one remote write
	sharePieceMin = 32 << 10  // a piece's copy outweighs its system call and claim
	sharePieceMax = 512 << 10 // bounds the wait for the last piece
)

// sharePiece is the piece size of a shared copy of n bytes: an eighth of
// the message in multiples of 16 KiB within [sharePieceMin,
// sharePieceMax], so that a message is at least two pieces and the side
// that copies the last piece keeps the other waiting at most about an
// eighth of the copy.
func sharePiece(n int) uint64 {
	const unit = 16 << 10
	p := (uint64(n)/8 + unit - 1) &^ (unit - 1)
	return min(max(p, sharePieceMin), sharePieceMax)
}

// shareSend is the sender's part of a shared copy of s into the receive
// buffer at addr: it copies the next piece it can claim, or else a piece
// the receiver gave back, and reports whether it copied anything and
// whether the whole message is in place. One piece per call keeps a long
// message from holding up the caller's progress (its short messages, its
// other peers) for the whole copy.
func (e *Endpoint) shareSend(s *LongSend, d []byte, addr uint64) (moved, done bool, err error) {
	n, piece := uint64(s.n), slPiece.Get(d)
	if off := atomic.AddUint64(slNext.Ptr(d), piece) - piece; off < n {
		if err := e.shareWrite(s, addr, off); err != nil {
			return false, false, err
		}
		e.Stats.SharedWrites++
		moved = true
	} else if redo := atomic.LoadUint64(slRedo.Ptr(d)); redo != 0 {
		if err := e.shareWrite(s, addr, redo-1); err != nil {
			return false, false, err
		}
		atomic.StoreUint64(slRedo.Ptr(d), 0)
		moved = true
	}
	if atomic.LoadUint64(slCopied.Ptr(d)) < n {
		return moved, false, nil // pieces still to copy, or the receiver still reads its own
	}
	s.off = s.n
	return moved, true, nil
}

// shareWrite writes the piece of s at off into the receive buffer at addr.
func (e *Endpoint) shareWrite(s *LongSend, addr, off uint64) error {
	p := s.peer
	d := p.out[blkSlots+s.slot*slotDesc:][:slotDesc]
	k := min(slPiece.Get(d), uint64(s.n)-off)
	if err := shm.RemoteWrite(p.pid, uintptr(addr+off), [][]byte{s.buf.Mem[off : off+k]}); err != nil {
		return err
	}
	atomic.AddUint64(slCopied.Ptr(d), k)
	return nil
}

// shareRecv is the receiver's part of a shared copy into r: it reads the
// next piece it can claim straight from the send buffer at src and rings
// the sender (whose send completes once every piece is in place). A read
// that fails gives its piece back to the sender (slRedo) and ends the
// receiver's help for this message. It reports whether it claimed a piece.
func (e *Endpoint) shareRecv(r *LongRecv, d []byte, src uint64) bool {
	p := r.peer
	n, piece := slWritten.Get(d), slPiece.Get(d) // set before the claim
	off := atomic.AddUint64(slNext.Ptr(d), piece) - piece
	if off >= n {
		return false
	}
	k := min(piece, n-off)
	if err := shm.RemoteRead(p.pid, uintptr(src+off), [][]byte{r.buf.Mem[off : off+k]}); err != nil {
		r.noHelp = true
		atomic.StoreUint64(slRedo.Ptr(d), off+1)
	} else {
		atomic.AddUint64(slCopied.Ptr(d), k)
		e.Stats.SharedReads++
	}
	ring(p.doorbell, p.sleepers)
	return true
}
