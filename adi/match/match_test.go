package match

import (
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
