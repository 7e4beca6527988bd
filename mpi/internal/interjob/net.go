package interjob

import (
	"bufio"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/adimpi/adimpi/adi"
	"github.com/adimpi/adimpi/adi/devkit/recv"
	"github.com/adimpi/adimpi/adi/match"
)

// Identity names a process: its job and its world rank there.
type Identity struct {
	Job  string // unique per job (no spaces)
	Rank int
}

func (id Identity) String() string { return id.Job + "#" + strconv.Itoa(id.Rank) }

// Peer is how to reach a process.
type Peer struct {
	ID    Identity
	Addr  string // ip:port of its listener
	Token string // what its listener wants in a greeting
}

// Encode is the peer as one line of text without spaces' ambiguity:
// "job rank addr token".
func (p Peer) Encode() string {
	return fmt.Sprintf("%s %d %s %s", p.ID.Job, p.ID.Rank, p.Addr, p.Token)
}

// ParsePeer reads what Encode wrote.
func ParsePeer(s string) (Peer, error) {
	f := strings.Fields(s)
	if len(f) != 4 {
		return Peer{}, fmt.Errorf("interjob: bad peer %q", s)
	}
	rank, err := strconv.Atoi(f[1])
	if err != nil || rank < 0 {
		return Peer{}, fmt.Errorf("interjob: bad rank in peer %q", s)
	}
	return Peer{ID: Identity{Job: f[0], Rank: rank}, Addr: f[2], Token: f[3]}, nil
}

// Frame kinds.
const (
	kindMsg  = 1 // a message: header, then its data
	kindAck  = 2 // a synchronous send's message has matched (id)
	kindBye  = 3 // the sender finalizes: nothing more comes from it
	kindLost = 4 // (local only) the connection broke
)

// The frame header, little-endian: kind u8, mode u8, pad u16, context
// u32, tag i32, signature u32, data length u64, send id u64.
const hdrLen = 32

// maxData bounds one message's data, so that a corrupt header cannot make
// a reader allocate without limit.
const maxData = 1 << 34

const greeting = "ADIMPI-INTERJOB"

type frame struct {
	from string // sender's identity
	kind uint8
	mode adi.Mode
	ctx  uint32
	tag  int
	sig  uint32
	id   uint64
	data []byte
	err  error // kindLost
}

// peer is a process the Net knows.
type peer struct {
	Peer
	idx  int
	out  net.Conn // the connection this process sends on (dialled lazily)
	lost error    // set once nothing more can come from or go to it
}

// fin is a request to complete in the next Progress.
type fin struct {
	r  *adi.Request
	st adi.Status
}

// Net is one process's end of the inter-job channel.
type Net struct {
	self Peer
	size int // this job's world size
	wake func()
	ln   net.Listener

	// Under the core's lock.
	engine match.Engine
	peers  map[int]*peer
	byID   map[string]int
	nextX  int // next number for a process of another job
	syncs  map[uint64]*syncSend
	nextID uint64
	fins   []fin
	cnt    struct{ msgsOut, msgsIn, bytesOut, bytesIn, dials, refused int64 }

	// Shared with the reader goroutines.
	inMu    sync.Mutex
	inbox   []frame
	spare   []frame
	conns   map[net.Conn]bool // accepted connections, to close at Close
	pending atomic.Bool
	closed  atomic.Bool
	readers sync.WaitGroup
}

type syncSend struct {
	r    *adi.Request
	peer int
}

// Open starts this process's Net, listening on addr's IP (any port); self
// is its identity, size the world size of its job, and wake rings the
// device's doorbell (it may be called from any goroutine).
func Open(self Identity, size int, ip netip.Addr, wake func()) (*Net, error) {
	ln, err := net.Listen("tcp4", netip.AddrPortFrom(ip, 0).String())
	if err != nil {
		return nil, fmt.Errorf("interjob: listen: %v", err)
	}
	tok := make([]byte, 16)
	if _, err := rand.Read(tok); err != nil {
		ln.Close()
		return nil, fmt.Errorf("interjob: token: %v", err)
	}
	n := &Net{
		self:  Peer{ID: self, Addr: ln.Addr().String(), Token: hex.EncodeToString(tok)},
		size:  size,
		wake:  wake,
		ln:    ln,
		peers: map[int]*peer{},
		byID:  map[string]int{},
		nextX: size,
		syncs: map[uint64]*syncSend{},
		conns: map[net.Conn]bool{},
	}
	n.readers.Add(1)
	go n.accept()
	return n, nil
}

// Self is how other processes reach this one.
func (n *Net) Self() Peer { return n.self }

// index returns the number of the process id, giving a process of another
// job the next free number the first time.
func (n *Net) index(id Identity) int {
	if id.Job == n.self.ID.Job {
		if n.peers[id.Rank] == nil {
			n.peers[id.Rank] = &peer{Peer: Peer{ID: id}, idx: id.Rank}
		}
		return id.Rank
	}
	key := id.String()
	if i, ok := n.byID[key]; ok {
		return i
	}
	i := n.nextX
	n.nextX++
	n.byID[key] = i
	n.peers[i] = &peer{Peer: Peer{ID: id}, idx: i}
	return i
}

// Learn records how to reach p and returns its number.
func (n *Net) Learn(p Peer) int {
	i := n.index(p.ID)
	q := n.peers[i]
	if q.Addr == "" || q.Addr != p.Addr {
		q.Addr, q.Token = p.Addr, p.Token
	}
	return i
}

// Identity returns the identity of process number i.
func (n *Net) Identity(i int) (Identity, bool) {
	if q := n.peers[i]; q != nil {
		return q.ID, true
	}
	return Identity{}, false
}

// accept takes incoming connections until Close.
func (n *Net) accept() {
	defer n.readers.Done()
	for {
		c, err := n.ln.Accept()
		if err != nil {
			return
		}
		n.inMu.Lock()
		if n.closed.Load() {
			n.inMu.Unlock()
			c.Close()
			return
		}
		n.conns[c] = true
		n.inMu.Unlock()
		n.readers.Add(1)
		go n.read(c)
	}
}

// read checks a connection's greeting and hands its frames to the Net.
func (n *Net) read(c net.Conn) {
	defer n.readers.Done()
	defer func() {
		n.inMu.Lock()
		delete(n.conns, c)
		n.inMu.Unlock()
		c.Close()
	}()
	br := bufio.NewReaderSize(c, 64<<10)
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, err := br.ReadString('\n')
	f := strings.Fields(line)
	if err != nil || len(f) != 4 || f[0] != greeting || f[1] != n.self.Token {
		return // not ours, or not believed: never trusted
	}
	rank, err := strconv.Atoi(f[3])
	if err != nil {
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	from := Identity{Job: f[2], Rank: rank}.String()
	var h [hdrLen]byte
	for {
		if _, err := io.ReadFull(br, h[:]); err != nil {
			n.push(frame{from: from, kind: kindLost, err: err})
			return
		}
		fr := frame{
			from: from,
			kind: h[0],
			mode: adi.Mode(h[1]),
			ctx:  binary.LittleEndian.Uint32(h[4:]),
			tag:  int(int32(binary.LittleEndian.Uint32(h[8:]))),
			sig:  binary.LittleEndian.Uint32(h[12:]),
			id:   binary.LittleEndian.Uint64(h[24:]),
		}
		size := binary.LittleEndian.Uint64(h[16:])
		if size > maxData {
			n.push(frame{from: from, kind: kindLost, err: fmt.Errorf("frame of %d bytes", size)})
			return
		}
		if fr.kind == kindMsg {
			fr.data = make([]byte, size)
			if _, err := io.ReadFull(br, fr.data); err != nil {
				n.push(frame{from: from, kind: kindLost, err: err})
				return
			}
		}
		n.push(fr)
		if fr.kind == kindBye {
			return
		}
	}
}

// push queues a frame for Progress and rings the doorbell when the queue
// was empty (a waiter that saw it empty may be asleep).
func (n *Net) push(f frame) {
	if n.closed.Load() {
		return
	}
	n.inMu.Lock()
	n.inbox = append(n.inbox, f)
	n.inMu.Unlock()
	if n.pending.CompareAndSwap(false, true) {
		n.wake()
	}
}

// dial opens the connection this process sends to q on.
func (n *Net) dial(q *peer) (net.Conn, error) {
	if q.out != nil {
		return q.out, nil
	}
	if q.Addr == "" {
		return nil, fmt.Errorf("no address known for process %s", q.ID)
	}
	c, err := net.DialTimeout("tcp4", q.Addr, 10*time.Second)
	if err != nil {
		return nil, err
	}
	n.cnt.dials++
	if _, err := fmt.Fprintf(c, "%s %s %s %d\n", greeting, q.Token, n.self.ID.Job, n.self.ID.Rank); err != nil {
		c.Close()
		return nil, err
	}
	q.out = c
	return c, nil
}

// write sends one frame to q.
func (n *Net) write(q *peer, kind uint8, mode adi.Mode, ctx uint32, tag int, sig uint32, id uint64, data []byte) error {
	c, err := n.dial(q)
	if err != nil {
		return err
	}
	var h [hdrLen]byte
	h[0], h[1] = kind, byte(mode)
	binary.LittleEndian.PutUint32(h[4:], ctx)
	binary.LittleEndian.PutUint32(h[8:], uint32(int32(tag)))
	binary.LittleEndian.PutUint32(h[12:], sig)
	binary.LittleEndian.PutUint64(h[16:], uint64(len(data)))
	binary.LittleEndian.PutUint64(h[24:], id)
	bufs := net.Buffers{h[:]}
	if len(data) > 0 {
		bufs = append(bufs, data)
	}
	if _, err := bufs.WriteTo(c); err != nil {
		return err
	}
	return nil
}

// peerOf returns process number i, or an error naming it.
func (n *Net) peerOf(op string, i int) (*peer, error) {
	q := n.peers[i]
	if q == nil {
		return nil, adi.Errorf(adi.ErrRank, op, "no process %d is known to the inter-job channel", i)
	}
	return q, nil
}

// gone is the error of an operation with a peer that is lost.
func gone(op string, q *peer) error {
	return adi.Errorf(adi.ErrOther, op, "process %s (of another job, or reached through the inter-job channel) is gone: %v", q.ID, q.lost)
}

// Isend starts a send: the message goes to the kernel now; a standard
// send completes at the next Progress, a synchronous one once the
// receiver has matched it.
func (n *Net) Isend(r *adi.Request) error {
	q, err := n.peerOf("send", r.Peer)
	if err != nil {
		return err
	}
	if q.lost != nil {
		n.fins = append(n.fins, fin{r, adi.Status{Err: gone("send", q)}})
		return nil
	}
	size := r.Buf.Size()
	var data []byte
	if size > 0 {
		if r.Buf.Contiguous() {
			data = r.Buf.Mem[:size]
		} else {
			data = make([]byte, size)
			r.Buf.CopyOut(0, data)
		}
	}
	var sig uint32
	if r.Buf.Type != nil {
		sig = r.Buf.Type.Signature()
	}
	var id uint64
	if r.Mode == adi.ModeSync {
		n.nextID++
		id = n.nextID
		n.syncs[id] = &syncSend{r: r, peer: r.Peer}
	}
	if err := n.write(q, kindMsg, r.Mode, r.Context, r.Tag, sig, id, data); err != nil {
		delete(n.syncs, id)
		n.lose(q, err)
		n.fins = append(n.fins, fin{r, adi.Status{Err: gone("send", q)}})
		return nil
	}
	n.cnt.msgsOut++
	n.cnt.bytesOut += int64(size)
	if r.Mode != adi.ModeSync {
		n.fins = append(n.fins, fin{r, adi.Status{Bytes: size}})
	}
	return nil
}

// unexpected is what the Net keeps of a message no receive has taken yet.
type unexpected struct {
	sync uint64 // the synchronous send's id to acknowledge, or 0
}

// Irecv posts a receive.
func (n *Net) Irecv(r *adi.Request) error {
	n.drain()
	if m := n.engine.Post(r); m != nil {
		u, _ := m.Handle.(unexpected)
		n.deliver(r, m.Env, m.Sig, m.Data, u.sync)
		return nil
	}
	if r.Peer >= 0 {
		if q := n.peers[r.Peer]; q != nil && q.lost != nil && n.engine.Cancel(r) {
			n.fins = append(n.fins, fin{r, adi.Status{Source: r.Peer, Tag: r.Tag, Err: gone("receive", q)}})
		}
	}
	return nil
}

// deliver completes receive r with a message (at the next Progress) and
// acknowledges a synchronous send.
func (n *Net) deliver(r *adi.Request, env adi.Envelope, sig uint32, data []byte, syncID uint64) {
	var st adi.Status
	if bad, ok := recv.Mismatch(r, env, len(data), sig); ok {
		st = bad
	} else {
		k := min(len(data), r.Buf.Size())
		if k > 0 {
			r.Buf.CopyIn(0, data[:k])
		}
		st = recv.Status(r, env.Source, env.Tag, len(data), k)
	}
	n.fins = append(n.fins, fin{r, st})
	if syncID != 0 {
		if q := n.peers[env.Source]; q != nil && q.lost == nil {
			if err := n.write(q, kindAck, 0, 0, 0, 0, syncID, nil); err != nil {
				n.lose(q, err)
			}
		}
	}
}

// Iprobe reports the first message a receive (ctx, src, tag) would match.
func (n *Net) Iprobe(ctx uint32, src, tag int) (adi.Status, bool, error) {
	n.drain()
	st, ok := n.engine.ProbeStatus(ctx, src, tag)
	return st, ok, nil
}

// CancelRecv withdraws a receive that has not matched.
func (n *Net) CancelRecv(r *adi.Request) bool { return n.engine.Withdraw(r) }

// Progress completes what is done and takes in what arrived.
func (n *Net) Progress() bool {
	did := n.drain()
	if len(n.fins) > 0 {
		fs := n.fins
		n.fins = nil
		for _, f := range fs {
			f.r.Complete(f.st)
		}
		did = true
	}
	return did
}

// drain handles the frames the readers queued.
func (n *Net) drain() bool {
	if !n.pending.Load() {
		return false
	}
	n.inMu.Lock()
	in := n.inbox
	n.inbox = n.spare[:0]
	n.pending.Store(false)
	n.inMu.Unlock()
	for i := range in {
		n.handle(&in[i])
		in[i] = frame{}
	}
	n.spare = in[:0]
	return len(in) > 0
}

func (n *Net) handle(f *frame) {
	id, _ := parseIdentity(f.from)
	src := n.index(id)
	q := n.peers[src]
	switch f.kind {
	case kindMsg:
		n.cnt.msgsIn++
		n.cnt.bytesIn += int64(len(f.data))
		env := adi.Envelope{Context: f.ctx, Source: src, Tag: f.tag}
		var syncID uint64
		if f.mode == adi.ModeSync {
			syncID = f.id
		}
		if r := n.engine.Arrive(env); r != nil {
			n.deliver(r, env, f.sig, f.data, syncID)
			return
		}
		n.engine.AddUnexpected(&match.Message{Env: env, Size: len(f.data), Data: f.data, Sig: f.sig, Handle: unexpected{sync: syncID}})
	case kindAck:
		if s := n.syncs[f.id]; s != nil {
			delete(n.syncs, f.id)
			n.fins = append(n.fins, fin{s.r, adi.Status{Bytes: s.r.Buf.Size()}})
		}
	case kindBye:
		n.lose(q, errors.New("it has finalized"))
	case kindLost:
		if q.lost == nil {
			n.lose(q, fmt.Errorf("its connection broke: %v", f.err))
		}
	}
}

// lose records that nothing more comes from or goes to q and fails what
// waits on it: receives naming it and synchronous sends to it.
func (n *Net) lose(q *peer, why error) {
	if q == nil || q.lost != nil {
		return
	}
	q.lost = why
	for _, r := range n.engine.CancelFrom(q.idx) {
		n.fins = append(n.fins, fin{r, adi.Status{Source: q.idx, Tag: r.Tag, Err: gone("receive", q)}})
	}
	for id, s := range n.syncs {
		if s.peer == q.idx {
			delete(n.syncs, id)
			n.fins = append(n.fins, fin{s.r, adi.Status{Err: gone("send", q)}})
		}
	}
	if q.out != nil {
		q.out.Close()
		q.out = nil
	}
}

func parseIdentity(s string) (Identity, error) {
	i := strings.LastIndexByte(s, '#')
	if i < 0 {
		return Identity{}, fmt.Errorf("interjob: bad identity %q", s)
	}
	rank, err := strconv.Atoi(s[i+1:])
	return Identity{Job: s[:i], Rank: rank}, err
}

// Counters reports the Net's totals and what it holds.
func (n *Net) Counters() map[string]int64 {
	open := int64(0)
	for _, q := range n.peers {
		if q.out != nil {
			open++
		}
	}
	n.inMu.Lock()
	in := int64(len(n.conns))
	n.inMu.Unlock()
	return map[string]int64{
		"interjob_msgs_out":   n.cnt.msgsOut,
		"interjob_msgs_in":    n.cnt.msgsIn,
		"interjob_bytes_out":  n.cnt.bytesOut,
		"interjob_bytes_in":   n.cnt.bytesIn,
		"interjob_dials":      n.cnt.dials,
		"interjob_conns_out":  open,
		"interjob_conns_in":   in,
		"interjob_peers":      int64(len(n.peers)),
		"interjob_unexpected": int64(n.engine.Unexpected()),
		"interjob_posted":     int64(n.engine.Posted()),
		"interjob_syncs":      int64(len(n.syncs)),
	}
}

// Close tells every process this one sent to that nothing more comes,
// closes every connection and stops the readers.
func (n *Net) Close() error {
	for _, q := range n.peers {
		if q.out != nil {
			_ = n.write(q, kindBye, 0, 0, 0, 0, 0, nil)
			q.out.Close()
			q.out = nil
		}
	}
	n.closed.Store(true)
	n.ln.Close()
	n.inMu.Lock()
	for c := range n.conns {
		c.Close()
	}
	n.inMu.Unlock()
	n.readers.Wait()
	return nil
}
