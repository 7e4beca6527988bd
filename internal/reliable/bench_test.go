package reliable

import (
	"fmt"
	"net"
	"testing"
	"time"
)

// nopH is a Handler that counts the messages delivered.
type nopH struct{ n int }

func (h *nopH) Frame(peer int, head, body []byte) { h.n++ }
func (h *nopH) Sent(tok any)                      {}
func (h *nopH) Lost(peer int, err error)          {}

// benchPair makes two transports joined by a lossless in-memory link that
// allocates nothing per frame, so that a benchmark times the transport.
func benchPair(b *testing.B, mtu int) (*Transport, *Transport, *nopH, *nopH) {
	ab := &pipe{}
	ba := &pipe{}
	ha, hb := &nopH{}, &nopH{}
	mk := func(rank int, h Handler, l Link) *Transport {
		tr, err := New(Config{Rank: rank, Size: 2, Job: 42, Secret: testSecret, MAC: mac(rank), MTU: mtu,
			Resolve: func(p int) (net.HardwareAddr, error) { return mac(p), nil },
			Handler: h, Link: l, MinRTO: time.Millisecond, DeadAfter: 15 * time.Second})
		if err != nil {
			b.Fatal(err)
		}
		return tr
	}
	return mk(0, ha, &fastEnd{in: ba, out: ab}), mk(1, hb, &fastEnd{in: ab, out: ba}), ha, hb
}

// fastEnd is one side of benchPair's link.
type fastEnd struct {
	in, out *pipe
	bufs    [][]byte
	i       int
	one     [1][]byte // the pieces handed to Receive's callback
}

func (e *fastEnd) Send(f []byte) bool {
	if e.bufs == nil {
		for range 64 {
			e.bufs = append(e.bufs, make([]byte, 70000))
		}
	}
	b := e.bufs[e.i%64][:len(f)]
	e.i++
	copy(b, f)
	e.out.q = append(e.out.q, b)
	return true
}
func (e *fastEnd) Flush() error { return nil }
func (e *fastEnd) Receive(budget int, got func([][]byte)) int {
	n := 0
	for _, f := range e.in.q {
		e.one[0] = f
		got(e.one[:])
		n++
	}
	e.in.q = e.in.q[:0] // only the peer appends, and it is not running
	return n
}

// BenchmarkPingPong8 times a round trip of an 8-byte message between two
// transports: what the transport adds to the XDP wire's latency, twice.
func BenchmarkPingPong8(b *testing.B) {
	for _, mtu := range []int{9014, 65014} {
		b.Run(fmt.Sprintf("mtu=%d", mtu), func(b *testing.B) {
			a, c, _, hc := benchPair(b, mtu)
			head := make([]byte, 32)
			body := make([]byte, 8)
			b.ResetTimer()
			for range b.N {
				a.Send(1, head, body, nil)
				for hc.n == 0 {
					c.Poll()
				}
				hc.n = 0
				c.Send(0, head, body, nil)
				a.Poll()
			}
		})
	}
}

// BenchmarkIdlePoll times a Poll that finds nothing: a waiting rank's turn.
func BenchmarkIdlePoll(b *testing.B) {
	a, c, _, hc := benchPair(b, 9014)
	a.Send(1, make([]byte, 32), make([]byte, 8), nil)
	for hc.n == 0 {
		c.Poll()
	}
	b.ResetTimer()
	for range b.N {
		c.Poll()
	}
}
