package wire

import (
	"crypto/hmac"
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// connState is where a connection is in its life.
type connState int

const (
	dialing        connState = iota // dialer: connect(2) in progress, hello queued
	awaitChallenge                  // dialer: hello sent
	awaitHello                      // acceptor: nothing read yet
	awaitProof                      // acceptor: challenge sent
	open                            // authenticated: frames flow
	closed
)

// inCap is the size of a connection's input buffer; a frame that does not
// fit is read into a buffer of its own.
const inCap = 256 << 10

// readBudget bounds the bytes read from one connection per Poll, so that
// one busy peer cannot starve the others.
const readBudget = 4 << 20

// conn is one TCP connection to a peer.
type conn struct {
	fd     int
	peer   int // -1 until the acceptor has read the hello
	state  connState
	dialer bool
	hello  hello
	nonce  [nonceLen]byte // the acceptor's nonce
	bye    bool           // the peer announced its close
	wantW  bool           // EPOLLOUT is armed

	in      []byte // input: in[inOff:inLen] read, not yet consumed
	inOff   int
	inLen   int
	big     []byte // a frame larger than in, being filled: big[:bigN]
	bigN    int
	bigH    header
	dst     []byte // a placed body being filled (Placer): dst[:dstN]
	dstN    int
	dstHead []byte // the placed frame's head

	hs  []byte     // handshake bytes still to write, before any frame
	out []outFrame // frames still to write, in order
}

// outFrame is a frame, or what is left of it, waiting for the socket.
type outFrame struct {
	hdr  []byte // frame header and head (a copy)
	body []byte // the caller's body, referenced until written
	off  int    // bytes of hdr+body already written
	tok  any    // handed to Handler.Sent once written; nil for none
}

func newConn(fd int, dialer bool) *conn {
	return &conn{fd: fd, peer: -1, dialer: dialer, in: make([]byte, inCap)}
}

// errBye is the end of a connection whose peer closed it on purpose.
var errBye = errors.New("peer closed the connection")

// writeHandshake writes what is pending of the handshake.
func (c *conn) writeHandshake() error {
	for len(c.hs) > 0 {
		n, err := unix.Write(c.fd, c.hs)
		if err != nil {
			if err == unix.EAGAIN || err == unix.EINTR {
				return nil
			}
			return err
		}
		c.hs = c.hs[n:]
	}
	return nil
}

// writeFrames writes queued frames until the socket is full; sent receives
// the token of every frame written whole.
func (c *conn) writeFrames(sent func(any)) error {
	for len(c.out) > 0 {
		f := &c.out[0]
		n, err := writeParts(c.fd, f.hdr, f.body, f.off)
		if err != nil {
			if err == unix.EAGAIN || err == unix.EINTR {
				return nil
			}
			return err
		}
		f.off += n
		if f.off < len(f.hdr)+len(f.body) {
			return nil // the socket is full
		}
		tok := f.tok
		c.out[0] = outFrame{}
		c.out = c.out[1:]
		if tok != nil {
			sent(tok)
		}
	}
	return nil
}

// writeParts writes a and b from byte off of their concatenation with one
// writev.
func writeParts(fd int, a, b []byte, off int) (int, error) {
	var iov [2][]byte
	k := 0
	if off < len(a) {
		iov[k] = a[off:]
		k++
		off = 0
	} else {
		off -= len(a)
	}
	if off < len(b) {
		iov[k] = b[off:]
		k++
	}
	if k == 1 {
		return writeFD(fd, iov[0])
	}
	return writevFD(fd, iov[0], iov[1])
}

// fill reads from the socket into the input buffer (or the big frame being
// filled). It reports the bytes read, whether the socket may hold more
// (the read filled all the room it had), and io.EOF-like errors as errBye
// or a connection error.
func (c *conn) fill() (int, bool, error) {
	var dst []byte
	if c.dst != nil {
		dst = c.dst[c.dstN:]
	} else if c.big != nil {
		dst = c.big[c.bigN:]
	} else {
		if c.inOff > 0 && len(c.in)-c.inLen < len(c.in)/4 {
			c.inLen = copy(c.in, c.in[c.inOff:c.inLen])
			c.inOff = 0
		}
		dst = c.in[c.inLen:]
	}
	if len(dst) == 0 {
		return 0, true, nil
	}
	n, e := readFD(c.fd, dst)
	if e != 0 {
		if e == unix.EAGAIN || e == unix.EINTR {
			return 0, false, nil
		}
		return 0, false, e
	}
	if n == 0 {
		if c.bye {
			return 0, false, errBye
		}
		return 0, false, fmt.Errorf("connection closed by the peer")
	}
	if c.dst != nil {
		c.dstN += n
	} else if c.big != nil {
		c.bigN += n
	} else {
		c.inLen += n
	}
	return n, n == len(dst), nil
}

// avail is the input read and not yet consumed.
func (c *conn) avail() []byte { return c.in[c.inOff:c.inLen] }

// consume drops the first n bytes of the input.
func (c *conn) consume(n int) {
	c.inOff += n
	if c.inOff == c.inLen {
		c.inOff, c.inLen = 0, 0
	}
}

// checkChallenge verifies the acceptor's challenge (dialer side) and
// queues the proof.
func (c *conn) checkChallenge(secret []byte) error {
	b := c.avail()[:challLen]
	want := mac(secret, "acceptor", &c.hello, b[:nonceLen])
	if !hmac.Equal(want, b[nonceLen:]) {
		return fmt.Errorf("rank %d failed authentication (it does not hold this job's secret)", c.peer)
	}
	c.hs = append(c.hs, mac(secret, "dialer", &c.hello, b[:nonceLen])...)
	c.consume(challLen)
	c.state = open
	return nil
}

// checkProof verifies the dialer's proof (acceptor side).
func (c *conn) checkProof(secret []byte) error {
	want := mac(secret, "dialer", &c.hello, c.nonce[:])
	if !hmac.Equal(want, c.avail()[:proofLen]) {
		return fmt.Errorf("a connection claiming to be rank %d failed authentication", c.hello.from)
	}
	c.consume(proofLen)
	c.state = open
	return nil
}
