package match

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/adimpi/adimpi/adi"
)

func recv(src, tag int) *adi.Request {
	return &adi.Request{Op: adi.OpRecv, Context: 1, Peer: src, Tag: tag}
}

func msg(src, tag int, id byte) *Message {
	return &Message{Env: adi.Envelope{Context: 1, Source: src, Tag: tag}, Data: []byte{id}}
}

func TestEarliestPostedReceiveWins(t *testing.T) {
	var e Engine
	a, b, c := recv(adi.AnySource, 5), recv(2, adi.AnyTag), recv(2, 5)
	for _, r := range []*adi.Request{a, b, c} {
		if m := e.Post(r); m != nil {
			t.Fatalf("empty engine matched %v", m)
		}
	}
	env := adi.Envelope{Context: 1, Source: 2, Tag: 5}
	for i, want := range []*adi.Request{a, b, c} {
		if got := e.Arrive(env); got != want {
			t.Fatalf("arrival %d matched %p, want %p", i, got, want)
		}
	}
	if e.Arrive(env) != nil || e.Posted() != 0 {
		t.Fatal("posted queue not empty")
	}
}

func TestUnexpectedInArrivalOrderAndContextsSeparate(t *testing.T) {
	var e Engine
	other := &Message{Env: adi.Envelope{Context: 2, Source: 1, Tag: 5}}
	e.AddUnexpected(other)
	for i := 0; i < 100; i++ {
		e.AddUnexpected(msg(1+i%3, 5+i%2, byte(i)))
	}
	// AnyTag from source 2: messages i with 1+i%3 == 2, i.e. i = 1, 4, 7, ...
	for want := 1; want < 100; want += 3 {
		m := e.Post(recv(2, adi.AnyTag))
		if m == nil || m.Data[0] != byte(want) {
			t.Fatalf("want message %d, got %+v", want, m)
		}
	}
	if p := e.Probe(1, adi.AnySource, 6); p == nil || p.Env.Tag != 6 || p.Data[0] != 3 {
		t.Fatalf("probe got %+v", p)
	}
	if m := e.Post(&adi.Request{Context: 2, Peer: adi.AnySource, Tag: adi.AnyTag}); m != other {
		t.Fatal("context 2 receive did not get the context 2 message")
	}
	if got, want := e.Unexpected(), 100-33; got != want {
		t.Fatalf("unexpected queue holds %d, want %d", got, want)
	}
}

func TestCancel(t *testing.T) {
	var e Engine
	r1, r2 := recv(0, 1), recv(0, 1)
	e.Post(r1)
	e.Post(r2)
	if !e.Cancel(r1) || e.Cancel(r1) {
		t.Fatal("cancel must succeed once")
	}
	if got := e.Arrive(adi.Envelope{Context: 1, Source: 0, Tag: 1}); got != r2 {
		t.Fatal("cancelled receive matched")
	}
}

func TestManyIdenticalKeepsOrder(t *testing.T) {
	var e Engine
	var rs []*adi.Request
	for i := 0; i < 1000; i++ {
		r := recv(3, 9)
		rs = append(rs, r)
		e.Post(r)
	}
	for i := 0; i < 1000; i++ {
		if e.Arrive(adi.Envelope{Context: 1, Source: 3, Tag: 9}) != rs[i] {
			t.Fatalf("arrival %d out of order", i)
		}
	}
}

// naive is the matching rules written the obvious way: one list of posted
// receives and one of unexpected messages, each in order, searched from the
// front. The engine must agree with it on every step.
type naive struct {
	posted []*adi.Request
	unexp  []*Message
}

func (n *naive) post(r *adi.Request) *Message {
	for i, m := range n.unexp {
		if r.Matches(m.Env) {
			n.unexp = append(n.unexp[:i], n.unexp[i+1:]...)
			return m
		}
	}
	n.posted = append(n.posted, r)
	return nil
}

func (n *naive) arrive(env adi.Envelope) *adi.Request {
	for i, r := range n.posted {
		if r.Matches(env) {
			n.posted = append(n.posted[:i], n.posted[i+1:]...)
			return r
		}
	}
	return nil
}

// TestAgreesWithNaiveMatching drives the engine and the naive rules with
// the same random sequence of receives (specific and wildcard sources and
// tags, two contexts), arrivals, cancellations and probes.
func TestAgreesWithNaiveMatching(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for round := 0; round < 200; round++ {
		var e Engine
		var n naive
		for step := 0; step < 300; step++ {
			src, tag, ctx := rng.IntN(5), rng.IntN(3), uint32(1+rng.IntN(2))
			switch k := rng.IntN(10); {
			case k < 4:
				r := &adi.Request{Op: adi.OpRecv, Context: ctx, Peer: src, Tag: tag}
				if rng.IntN(4) == 0 {
					r.Peer = adi.AnySource
				}
				if rng.IntN(4) == 0 {
					r.Tag = adi.AnyTag
				}
				got, want := e.Post(r), n.post(r)
				if got != want {
					t.Fatalf("round %d step %d: Post(%d,%d,%d) took %v, naive %v", round, step, r.Context, r.Peer, r.Tag, got, want)
				}
			case k < 8:
				env := adi.Envelope{Context: ctx, Source: src, Tag: tag}
				got, want := e.Arrive(env), n.arrive(env)
				if got != want {
					t.Fatalf("round %d step %d: Arrive(%v) matched %p, naive %p", round, step, env, got, want)
				}
				if got == nil {
					m := &Message{Env: env}
					e.AddUnexpected(m)
					n.unexp = append(n.unexp, m)
				}
			case k == 8 && len(n.posted) > 0:
				r := n.posted[rng.IntN(len(n.posted))]
				if !e.Cancel(r) {
					t.Fatalf("round %d step %d: a posted receive could not be cancelled", round, step)
				}
				i := slices.Index(n.posted, r)
				n.posted = append(n.posted[:i], n.posted[i+1:]...)
			default:
				var want *Message
				for _, m := range n.unexp {
					if (&adi.Request{Context: ctx, Peer: adi.AnySource, Tag: tag}).Matches(m.Env) {
						want = m
						break
					}
				}
				if got := e.Probe(ctx, adi.AnySource, tag); got != want {
					t.Fatalf("round %d step %d: Probe found %v, naive %v", round, step, got, want)
				}
			}
			if e.Posted() != len(n.posted) || e.Unexpected() != len(n.unexp) {
				t.Fatalf("round %d step %d: engine holds %d posted and %d unexpected, naive %d and %d", round, step, e.Posted(), e.Unexpected(), len(n.posted), len(n.unexp))
			}
		}
	}
}
