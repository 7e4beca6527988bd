package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Handler is how an Endpoint hands what it receives to its device. Every
// method is called from inside Poll, never concurrently.
type Handler interface {
	// Frame delivers a frame from peer. head and body are valid only until
	// Frame returns.
	Frame(peer int, head, body []byte)
	// Sent reports that a frame Send had to queue has been handed to the
	// kernel whole: its body may be reused.
	Sent(tok any)
	// Lost reports, once, that the connection to peer broke: frames still
	// queued to it will never be sent, and none will arrive.
	Lost(peer int, err error)
}

// Placer is an optional Handler capability: a frame's body read straight
// into memory the device chooses (a posted receive buffer, say) instead of
// the endpoint's input buffer, saving a copy. The endpoint asks for every
// frame whose body holds at least PlaceMin bytes, once its head is in.
type Placer interface {
	// Place returns where the n bytes of the body of peer's frame with
	// this head go (len n), or nil for the endpoint's own buffer. The
	// frame is then delivered through Handler.Frame with body = that
	// memory.
	Place(peer int, head []byte, n int) []byte
}

// PlaceMin is the smallest body for which an endpoint asks its Placer.
const PlaceMin = 32 << 10

// Config is what an Endpoint needs to know.
type Config struct {
	Rank    int                            // this process's rank
	Job     uint64                         // the job's id; connections of other jobs are refused
	Secret  []byte                         // the job's secret (at least 16 bytes)
	Listen  string                         // address to listen on, ip:port (port 0: any)
	Resolve func(peer int) (string, error) // a peer's listening address, asked once per peer
	Handler Handler
	// Logf reports refused connections (default: to stderr).
	Logf func(format string, args ...any)
}

// Endpoint is one process's end of the wire.
type Endpoint struct {
	cfg     Config
	ep      int // epoll
	lfd     int // listening socket
	efd     int // eventfd: Wake
	addr    string
	conns   map[int]*conn // by fd
	ready   []*conn       // the authenticated connections, for Poll's direct reads
	polls   uint32        // Polls so far
	kick    atomic.Bool   // a Wait saw an event: the next Poll asks epoll
	peers   map[int]*conn // the connection each peer's frames are sent on
	lost    map[int]error // peers whose connection broke
	events  []unix.EpollEvent
	wevents []unix.EpollEvent // Wait's own, as Wait runs beside Poll
	scratch []byte
	placer  Placer // cfg.Handler as a Placer, if it is one
	cnt     Counters
	x       *xdpWire     // the XDP wire, if the job chose it (xdp.go)
	woken   atomic.Int64 // DirectSleeper sleeps a socket ended (sleeper.go)
	relayed atomic.Int64 // wake-ups a Sleeper or DirectSleeper goroutine passed on
}

// Counters are an Endpoint's running totals.
type Counters struct {
	FramesIn, FramesOut int64
	BytesIn, BytesOut   int64 // frame bodies
	Queued              int64 // frames that waited for the socket
	Dials, Accepts      int64
	Refused             int64 // connections that failed the handshake
	Placed              int64 // frames whose body was read into memory the Placer chose
	// Woken counts a DirectSleeper's sleeps that the wire itself ended
	// (a socket had something, or Wake); Relayed counts wake-ups that a
	// helper goroutine passed on (a Sleeper's frames to the device's
	// doorbell, a DirectSleeper's doorbell moves to the endpoint).
	Woken, Relayed int64
}

// Open starts an endpoint listening on cfg.Listen.
func Open(cfg Config) (*Endpoint, error) {
	if len(cfg.Secret) < 16 {
		return nil, fmt.Errorf("wire: a job secret of %d bytes is too short (at least 16)", len(cfg.Secret))
	}
	if cfg.Handler == nil || cfg.Resolve == nil {
		return nil, errors.New("wire: Open needs a Handler and a Resolve function")
	}
	if cfg.Logf == nil {
		cfg.Logf = func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }
	}
	ap, err := netip.ParseAddrPort(cfg.Listen)
	if err != nil || !ap.Addr().Is4() {
		return nil, fmt.Errorf("wire: listen address %q: want an IPv4 ip:port", cfg.Listen)
	}
	e := &Endpoint{cfg: cfg, ep: -1, lfd: -1, efd: -1,
		conns: map[int]*conn{}, peers: map[int]*conn{}, lost: map[int]error{},
		events: make([]unix.EpollEvent, 64), wevents: make([]unix.EpollEvent, 4),
		scratch: make([]byte, 0, headerLen+MaxHead+inlineMax)}
	e.placer, _ = cfg.Handler.(Placer)
	if err := e.open(ap); err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

func (e *Endpoint) open(ap netip.AddrPort) error {
	var err error
	if e.ep, err = unix.EpollCreate1(unix.EPOLL_CLOEXEC); err != nil {
		return fmt.Errorf("wire: epoll: %v", err)
	}
	if e.efd, err = unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC); err != nil {
		return fmt.Errorf("wire: eventfd: %v", err)
	}
	if e.lfd, err = unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0); err != nil {
		return fmt.Errorf("wire: socket: %v", err)
	}
	sa := &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()}
	if err := unix.Bind(e.lfd, sa); err != nil {
		return fmt.Errorf("wire: listen on %s: %v", ap, err)
	}
	if err := unix.Listen(e.lfd, 128); err != nil {
		return fmt.Errorf("wire: listen on %s: %v", ap, err)
	}
	got, err := unix.Getsockname(e.lfd)
	if err != nil {
		return fmt.Errorf("wire: getsockname: %v", err)
	}
	in4 := got.(*unix.SockaddrInet4)
	e.addr = netip.AddrPortFrom(netip.AddrFrom4(in4.Addr), uint16(in4.Port)).String()
	for _, fd := range []int{e.lfd, e.efd} {
		if err := unix.EpollCtl(e.ep, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}); err != nil {
			return fmt.Errorf("wire: epoll_ctl: %v", err)
		}
	}
	return nil
}

// Addr is the address the endpoint listens on, for its peers' Resolve.
func (e *Endpoint) Addr() string { return e.addr }

// Counters returns the running totals.
func (e *Endpoint) Counters() Counters {
	c := e.cnt
	c.Woken, c.Relayed = e.woken.Load(), e.relayed.Load()
	if e.x != nil {
		e.x.counters(&c)
	}
	return c
}

// SendNow sends a frame of head (at most MaxHead bytes) and body (at most
// a few hundred bytes: a frame of the XDP wire holds both) to peer, as
// Send does when it reports true, if the frame can be handed over at once
// and whole; otherwise it sends nothing and reports false. Only the XDP
// wire hands frames over this way: to a peer reached over TCP it reports
// false. Frames keep their order with Send's.
func (e *Endpoint) SendNow(peer int, head, body []byte) (bool, error) {
	if len(head) > MaxHead || len(body) > MaxBody {
		return false, fmt.Errorf("wire: frame to rank %d too large (head %d, body %d bytes)", peer, len(head), len(body))
	}
	if e.x != nil && e.x.reaches(peer) {
		return e.x.sendNow(peer, head, body)
	}
	return false, nil
}

// Send sends a frame of head (at most MaxHead bytes, copied) and body to
// peer. It reports true when the whole frame is with the kernel, so body
// may be reused at once. Otherwise the frame waits for the socket: with a
// tok, body is referenced until Handler.Sent(tok); with a nil tok, body is
// copied. Frames to one peer leave in the order of the Send calls.
func (e *Endpoint) Send(peer int, head, body []byte, tok any) (bool, error) {
	if len(head) > MaxHead || len(body) > MaxBody {
		return false, fmt.Errorf("wire: frame to rank %d too large (head %d, body %d bytes)", peer, len(head), len(body))
	}
	if e.x != nil && e.x.reaches(peer) {
		return e.x.send(peer, head, body, tok)
	}
	if err := e.lost[peer]; err != nil {
		return false, fmt.Errorf("wire: rank %d is unreachable: %w", peer, err)
	}
	c := e.peers[peer]
	if c == nil {
		var err error
		if c, err = e.dial(peer); err != nil {
			e.lost[peer] = err
			return false, err
		}
	}
	hdr := e.scratch[:headerLen+len(head)]
	putHeader(hdr, len(head), len(body))
	copy(hdr[headerLen:], head)
	n := len(body)
	if n <= inlineMax && n > 0 {
		// One contiguous write: a writev of a few bytes costs more than
		// their copy.
		hdr = append(hdr, body...)
		body = nil
	}
	off := 0
	if c.state == open && len(c.hs) == 0 && len(c.out) == 0 {
		n, err := writeParts(c.fd, hdr, body, 0)
		if err != nil && err != unix.EAGAIN && err != unix.EINTR {
			e.drop(c, err)
			return false, fmt.Errorf("wire: send to rank %d: %w", peer, err)
		}
		if n > 0 {
			off = n
		}
		if off == len(hdr)+len(body) {
			e.cnt.FramesOut++
			e.cnt.BytesOut += int64(n)
			return true, nil
		}
	}
	if tok == nil && body != nil {
		body = append([]byte(nil), body...)
	}
	c.out = append(c.out, outFrame{hdr: append([]byte(nil), hdr...), body: body, off: off, tok: tok})
	e.cnt.Queued++
	e.cnt.FramesOut++
	e.cnt.BytesOut += int64(n)
	e.armWrite(c)
	return false, nil
}

// inlineMax is the largest body that Send copies behind the head, to write
// the frame with one write instead of a writev of two pieces.
const inlineMax = 512

// dial opens the connection to peer and queues the hello.
func (e *Endpoint) dial(peer int) (*conn, error) {
	addr, err := e.cfg.Resolve(peer)
	if err != nil {
		return nil, fmt.Errorf("wire: address of rank %d: %v", peer, err)
	}
	ap, err := netip.ParseAddrPort(addr)
	if err != nil || !ap.Addr().Is4() {
		return nil, fmt.Errorf("wire: address of rank %d is %q: want an IPv4 ip:port", peer, addr)
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("wire: socket: %v", err)
	}
	tune(fd)
	err = unix.Connect(fd, &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()})
	if err != nil && err != unix.EINPROGRESS {
		unix.Close(fd)
		return nil, fmt.Errorf("wire: connect to rank %d at %s: %v", peer, addr, err)
	}
	c := newConn(fd, true)
	c.peer = peer
	c.state = dialing
	c.hello = hello{job: e.cfg.Job, from: e.cfg.Rank, to: peer, nonce: newNonce()}
	c.hs = make([]byte, helloLen)
	c.hello.encode(c.hs)
	if err := unix.EpollCtl(e.ep, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLOUT, Fd: int32(fd)}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("wire: epoll_ctl: %v", err)
	}
	c.wantW = true
	e.conns[fd] = c
	e.peers[peer] = c
	e.cnt.Dials++
	return c, nil
}

// Liveness of a connection whose peer's host vanished or whose link was cut
// (no reset ever arrives): the kernel probes an idle connection after
// keepIdle and drops it after keepCount unanswered probes keepIntvl apart,
// and drops a connection whose sent data stay unacknowledged for
// userTimeout; either way Poll reports the peer lost within seconds.
const (
	keepIdle    = 1 // seconds
	keepIntvl   = 1 // seconds
	keepCount   = 3
	userTimeout = 5000 // milliseconds
)

// tune sets a connection's socket options: no Nagle delay, and the
// liveness probes above.
func tune(fd int) {
	_ = unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_KEEPALIVE, 1)
	_ = unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_KEEPIDLE, keepIdle)
	_ = unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_KEEPINTVL, keepIntvl)
	_ = unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_KEEPCNT, keepCount)
	_ = unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, userTimeout)
}

// Pending is the number of frames still waiting for their sockets.
func (e *Endpoint) Pending() int {
	n := 0
	if e.x != nil {
		n = e.x.pending()
	}
	for _, c := range e.conns {
		n += len(c.out)
	}
	return n
}

// armWrite asks epoll to report when c's socket takes more bytes.
func (e *Endpoint) armWrite(c *conn) {
	if c.wantW {
		return
	}
	c.wantW = true
	_ = unix.EpollCtl(e.ep, unix.EPOLL_CTL_MOD, c.fd, &unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLOUT, Fd: int32(c.fd)})
}

// disarmWrite stops EPOLLOUT reports once nothing waits to be written.
func (e *Endpoint) disarmWrite(c *conn) {
	if !c.wantW || len(c.hs) > 0 || len(c.out) > 0 || c.state == dialing {
		return
	}
	c.wantW = false
	_ = unix.EpollCtl(e.ep, unix.EPOLL_CTL_MOD, c.fd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(c.fd)})
}

// Poll accepts connections, reads and delivers frames, and writes queued
// ones, without blocking. It reports whether anything happened.
//
// With few connections, all authenticated and none with frames waiting to
// be written, Poll reads each directly (pollDirect) instead of asking
// epoll which are ready: a message then costs its receiver one read
// instead of an epoll_wait and a read. Every epollEvery-th Poll, and the
// first after a Wait saw an event, still asks epoll, which accepts new
// connections.
func (e *Endpoint) Poll() bool {
	busy := e.x != nil && e.x.poll() // the AF_XDP socket's rings, if any
	if e.x != nil && !busy {
		e.x.watch.idle() // out of the epoll set once no waiter sleeps
	}
	e.polls++
	if len(e.ready) <= directMax && len(e.ready) == len(e.conns) && e.polls%epollEvery != 0 && !e.kick.Load() && !e.writing() {
		return e.pollDirect() || busy
	}
	e.kick.Store(false)
	n := epollNow(e.ep, e.events)
	if n <= 0 {
		return busy
	}
	for _, ev := range e.events[:n] {
		fd := int(ev.Fd)
		switch fd {
		case e.lfd:
			e.accept()
			continue
		case e.efd:
			var b [8]byte
			_, _ = unix.Read(e.efd, b[:])
			continue
		}
		c := e.conns[fd]
		if c == nil {
			continue
		}
		if ev.Events&(unix.EPOLLOUT|unix.EPOLLERR) != 0 {
			if err := e.writable(c); err != nil {
				e.drop(c, err)
				continue
			}
		}
		if ev.Events&(unix.EPOLLIN|unix.EPOLLHUP|unix.EPOLLERR) != 0 {
			if _, err := e.readable(c); err != nil {
				e.drop(c, err)
			}
		}
	}
	return true
}

// directMax is the most connections Poll reads directly (see Poll): each
// costs an idle Poll a read, where epoll answers for all of them at once.
const directMax = 4

// epollEvery is how often a Poll that could read directly asks epoll
// instead (a power of two).
const epollEvery = 64

// writing reports whether frames wait for some open connection's socket.
// Poll then asks epoll, which reports a socket writable only once it has
// room for a good part of its buffer: writing whenever a little room
// appears would cut a stream into small writes, and small segments.
func (e *Endpoint) writing() bool {
	for _, c := range e.ready {
		if len(c.out) > 0 {
			return true
		}
	}
	return false
}

// pollDirect reads what each open connection has.
func (e *Endpoint) pollDirect() bool {
	did := false
	for i := 0; i < len(e.ready); i++ {
		c := e.ready[i]
		got, err := e.readable(c)
		if err != nil {
			e.drop(c, err)
			i--
			continue
		}
		did = did || got
	}
	return did
}

// writable finishes a connect, then writes what is queued.
func (e *Endpoint) writable(c *conn) error {
	if c.state == dialing {
		soerr, err := unix.GetsockoptInt(c.fd, unix.SOL_SOCKET, unix.SO_ERROR)
		if err != nil {
			return err
		}
		if soerr != 0 {
			return fmt.Errorf("connect: %v", unix.Errno(soerr))
		}
		c.state = awaitChallenge
	}
	if err := e.flush(c); err != nil {
		return err
	}
	e.disarmWrite(c)
	return nil
}

// flush writes the handshake, then (once open) the frames.
func (e *Endpoint) flush(c *conn) error {
	if err := c.writeHandshake(); err != nil {
		return err
	}
	if len(c.hs) > 0 || c.state != open {
		return nil
	}
	return c.writeFrames(e.cfg.Handler.Sent)
}

// readable reads what the socket has, up to readBudget, and handles it. It
// reports whether it read anything. It stops at the first read that leaves
// room in its buffer (the socket had no more): looking again would cost a
// call that finds nothing, and more data make the socket ready again.
func (e *Endpoint) readable(c *conn) (bool, error) {
	got := false
	for total := 0; total < readBudget; {
		n, more, err := c.fill()
		if err != nil {
			return got, err
		}
		got = got || n > 0
		if err := e.parse(c); err != nil {
			return got, err
		}
		if n == 0 || !more {
			return got, nil
		}
		total += n
	}
	return got, nil
}

// byeMagic marks the header that announces a deliberate close.
const byeMagic = 0xad1f

// parse handles every complete handshake message and frame in c's input.
func (e *Endpoint) parse(c *conn) error {
	for {
		switch c.state {
		case awaitHello:
			if len(c.avail()) < helloLen {
				return nil
			}
			if err := e.acceptHello(c); err != nil {
				return err
			}
		case awaitChallenge:
			if len(c.avail()) < challLen {
				return nil
			}
			if err := c.checkChallenge(e.cfg.Secret); err != nil {
				return err
			}
			e.ready = append(e.ready, c)
			if err := e.flush(c); err != nil {
				return err
			}
			e.armWrite(c)
		case awaitProof:
			if len(c.avail()) < proofLen {
				return nil
			}
			if err := c.checkProof(e.cfg.Secret); err != nil {
				return err
			}
			e.ready = append(e.ready, c)
			if e.peers[c.peer] == nil {
				e.peers[c.peer] = c
			}
		case open:
			more, err := e.frame(c)
			if err != nil || !more {
				return err
			}
		default:
			return nil
		}
	}
}

// acceptHello checks a dialer's hello and queues the challenge.
func (e *Endpoint) acceptHello(c *conn) error {
	h, err := decodeHello(c.avail())
	if err != nil {
		return err
	}
	if h.job != e.cfg.Job || h.to != e.cfg.Rank || h.from < 0 {
		return fmt.Errorf("hello for job %#x rank %d from rank %d: this is job %#x rank %d", h.job, h.to, h.from, e.cfg.Job, e.cfg.Rank)
	}
	c.hello, c.peer = h, h.from
	c.nonce = newNonce()
	c.consume(helloLen)
	c.hs = append(append(c.hs, c.nonce[:]...), mac(e.cfg.Secret, "acceptor", &c.hello, c.nonce[:])...)
	c.state = awaitProof
	if err := c.writeHandshake(); err != nil {
		return err
	}
	if len(c.hs) > 0 {
		e.armWrite(c)
	}
	return nil
}

// frame delivers the next complete frame of an open connection and
// reports whether another may follow in the buffer.
func (e *Endpoint) frame(c *conn) (bool, error) {
	if c.dst != nil {
		if c.dstN < len(c.dst) {
			return false, nil
		}
		e.cnt.Placed++
		e.deliver(c, c.dstHead, c.dst)
		c.dst = nil
		return true, nil
	}
	if c.big != nil {
		if c.bigN < len(c.big) {
			return false, nil
		}
		body := c.big[c.bigH.head:]
		e.deliver(c, c.big[:c.bigH.head], body)
		c.big = nil
		return true, nil
	}
	in := c.avail()
	if len(in) < headerLen {
		return false, nil
	}
	if binary.LittleEndian.Uint16(in[6:8]) == byeMagic {
		c.bye = true
		c.consume(headerLen)
		return true, nil
	}
	h, err := parseHeader(in)
	if err != nil {
		return false, err
	}
	need := headerLen + h.head + h.body
	if h.body >= PlaceMin && e.placer != nil && len(in) >= headerLen+h.head {
		if placed, err := e.place(c, in, h); placed || err != nil {
			return placed, err
		}
	}
	if need <= inCap {
		if len(in) < need {
			return false, nil
		}
		e.deliver(c, in[headerLen:headerLen+h.head], in[headerLen+h.head:need])
		c.consume(need)
		return true, nil
	}
	// A frame larger than the input buffer gets a buffer of its own, which
	// the socket then fills directly.
	c.big = make([]byte, h.head+h.body)
	c.bigH = h
	c.bigN = copy(c.big, in[headerLen:])
	c.inOff, c.inLen = 0, 0
	return true, nil
}

// place asks the Placer where the body of c's next frame (header h, head
// in in) goes and, given memory, moves the body bytes already read there;
// the socket fills the rest (conn.fill). It reports whether it took the
// frame.
func (e *Endpoint) place(c *conn, in []byte, h header) (bool, error) {
	head := in[headerLen : headerLen+h.head]
	dst := e.placer.Place(c.peer, head, h.body)
	if dst == nil {
		return false, nil
	}
	if len(dst) != h.body {
		return false, fmt.Errorf("wire: Place gave %d bytes for a body of %d", len(dst), h.body)
	}
	c.dstHead = append(c.dstHead[:0], head...)
	k := copy(dst, in[headerLen+h.head:])
	c.consume(headerLen + h.head + k)
	c.dst, c.dstN = dst, k
	return true, nil
}

func (e *Endpoint) deliver(c *conn, head, body []byte) {
	e.cnt.FramesIn++
	e.cnt.BytesIn += int64(len(body))
	e.cfg.Handler.Frame(c.peer, head, body)
}

// accept takes every pending connection.
func (e *Endpoint) accept() {
	for {
		fd, _, err := unix.Accept4(e.lfd, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
		if err != nil {
			return
		}
		tune(fd)
		if err := unix.EpollCtl(e.ep, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}); err != nil {
			unix.Close(fd)
			continue
		}
		c := newConn(fd, false)
		c.state = awaitHello
		e.conns[fd] = c
		e.cnt.Accepts++
	}
}

// drop closes a connection that failed. A connection that never
// authenticated is logged and counted; one that carried a peer's frames
// makes that peer lost.
func (e *Endpoint) drop(c *conn, err error) {
	if c.state == closed {
		return
	}
	wasOpen := c.state == open
	c.state = closed
	if i := slices.Index(e.ready, c); i >= 0 {
		e.ready = slices.Delete(e.ready, i, i+1)
	}
	_ = unix.EpollCtl(e.ep, unix.EPOLL_CTL_DEL, c.fd, nil)
	unix.Close(c.fd)
	delete(e.conns, c.fd)
	if e.peers[c.peer] == c {
		delete(e.peers, c.peer)
	}
	switch {
	case errors.Is(err, errBye):
		e.lost[c.peer] = err
	case !wasOpen && !c.dialer:
		e.cnt.Refused++
		e.cfg.Logf("wire: rank %d: refused a connection: %v", e.cfg.Rank, err)
	default:
		if _, seen := e.lost[c.peer]; !seen {
			e.lost[c.peer] = err
			e.cfg.Handler.Lost(c.peer, err)
		}
	}
}

// Wait blocks until a socket of the endpoint has something to do, Wake is
// called, or d elapses. It may run beside Poll (the device's Sleep, without
// the core's lock); it handles nothing itself.
func (e *Endpoint) Wait(d time.Duration) { e.wait(d, e.wevents) }

// wait is Wait with its own event buffer (waiters may wait at once); it
// reports whether an event ended it.
func (e *Endpoint) wait(d time.Duration, evs []unix.EpollEvent) bool {
	if x := e.x; x != nil {
		d = x.waitFor(d)
		// The AF_XDP socket is in the epoll set only while someone sleeps
		// (xdp_watch.go); if it cannot join, the wait is a short one.
		if !x.watch.sleep() {
			d = min(d, time.Millisecond)
		}
		defer x.watch.wake()
		defer x.tr.Refresh() // the transport's last reading is the sleep's age old
	}
	ms := int((d + time.Millisecond - 1) / time.Millisecond)
	n, _ := unix.EpollWait(e.ep, evs, ms)
	if n > 0 {
		e.kick.Store(true)
	}
	for _, ev := range evs[:max(n, 0)] {
		if int(ev.Fd) == e.efd {
			var b [8]byte
			_, _ = unix.Read(e.efd, b[:])
		}
	}
	return n > 0
}

// Waiter waits on an endpoint as Wait does, with an event buffer of its
// own: for a second waiter that may sleep while another is in Wait.
type Waiter struct {
	e   *Endpoint
	evs []unix.EpollEvent
}

// NewWaiter returns a Waiter on e.
func (e *Endpoint) NewWaiter() *Waiter {
	return &Waiter{e: e, evs: make([]unix.EpollEvent, len(e.wevents))}
}

// Wait is Endpoint.Wait; it reports whether an event ended it.
func (w *Waiter) Wait(d time.Duration) bool { return w.e.wait(d, w.evs) }

// Wake makes a Wait return.
func (e *Endpoint) Wake() {
	var one [8]byte
	binary.NativeEndian.PutUint64(one[:], 1)
	_, _ = unix.Write(e.efd, one[:])
}

// Close announces the close to every connected peer, so that they do not
// take it for a failure, and releases the endpoint's sockets.
func (e *Endpoint) Close() error {
	if e.x != nil {
		e.x.close()
		e.x = nil
	}
	var bye [headerLen]byte
	binary.LittleEndian.PutUint16(bye[6:8], byeMagic)
	for fd, c := range e.conns {
		if c.state == open {
			_ = e.flush(c)
			if len(c.out) == 0 {
				_, _ = unix.Write(fd, bye[:])
			}
		}
		unix.Close(fd)
	}
	e.conns = nil
	for _, fd := range []int{e.lfd, e.efd, e.ep} {
		if fd >= 0 {
			unix.Close(fd)
		}
	}
	e.lfd, e.efd, e.ep = -1, -1, -1
	return nil
}
