// Package match is MPI's matching engine, written once for every device that
// matches at the receiver: a queue of posted receives and a queue of
// unexpected messages, both in order. Its rules are the standard's: a message
// goes to the earliest posted receive that matches it, a receive takes the
// earliest arrived message that matches it, wildcards match any source or tag
// within the receive's context, and messages from one source in one context
// never overtake each other (the caller must hand messages from one source to
// Arrive in the order they were sent).
//
// The engine does no locking; the core serialises device calls.
package match

import "github.com/adimpi/adimpi/adi"

// Message is an arrived message that no posted receive has taken yet.
type Message struct {
	Env    adi.Envelope
	Size   int    // packed bytes in the whole message
	Data   []byte // payload copied on arrival (eager protocols), else nil
	Handle any    // the device's state for fetching the data (rendezvous)
	Sig    uint32 // the sender's type signature code (datatype.Type.Signature), 0 if unknown
	seq    uint64 // arrival order across all sources
}

// Engine holds the posted-receive and unexpected-message queues. Both are
// binned by source rank (a slice indexed by rank: no hashing on the
// per-message path), so a receive from one source and a message from one
// source look only at that source's entries (plus, for arrivals, the
// wildcard receives); global sequence numbers keep the earliest-first rule
// across bins.
type Engine struct {
	posted     []*queue[*adi.Request] // by source rank
	anySource  queue[*adi.Request]    // receives from AnySource
	unexpected []*queue[*Message]     // by source rank
	nposted    int
	nunexp     int
	seq        uint64
}

func (e *Engine) next() uint64 {
	e.seq++
	return e.seq
}

// bin returns bins[src], growing bins to hold it when create is set (else
// nil if src has no bin). Sources are world ranks, never negative.
func bin[T comparable](bins *[]*queue[T], src int, create bool) *queue[T] {
	if uint(src) < uint(len(*bins)) {
		if q := (*bins)[src]; q != nil || !create {
			return q
		}
	} else if !create || src < 0 {
		return nil
	} else {
		*bins = append(*bins, make([]*queue[T], src+1-len(*bins))...)
	}
	q := &queue[T]{}
	(*bins)[src] = q
	return q
}

// Post matches a new receive against the unexpected messages. If one matches,
// it is removed from the queue and returned, and the receive is not queued.
// Otherwise the receive joins the posted queue and Post returns nil.
func (e *Engine) Post(r *adi.Request) *Message {
	if e.nunexp > 0 {
		if q, i := e.findUnexpected(r); q != nil {
			e.nunexp--
			return q.remove(i)
		}
	}
	r.MatchSeq = e.next()
	if r.Peer == adi.AnySource {
		e.anySource.push(r)
	} else {
		bin(&e.posted, r.Peer, true).push(r)
	}
	e.nposted++
	return nil
}

// firstMessage is the index of the earliest message in q that r matches, or -1.
func firstMessage(q *queue[*Message], r *adi.Request) int {
	for i := q.head; i < len(q.items); i++ {
		if m := q.items[i]; m != nil && r.Matches(m.Env) {
			return i
		}
	}
	return -1
}

// firstReceive is the index of the earliest receive in q that env matches, or -1.
func firstReceive(q *queue[*adi.Request], env adi.Envelope) int {
	for i := q.head; i < len(q.items); i++ {
		if p := q.items[i]; p != nil && p.Matches(env) {
			return i
		}
	}
	return -1
}

// findUnexpected locates the earliest arrived message r would match.
func (e *Engine) findUnexpected(r *adi.Request) (*queue[*Message], int) {
	if r.Peer != adi.AnySource {
		if q := bin(&e.unexpected, r.Peer, false); q != nil {
			if i := firstMessage(q, r); i >= 0 {
				return q, i
			}
		}
		return nil, -1
	}
	var best *queue[*Message]
	bi := -1
	for _, q := range e.unexpected {
		if q == nil || q.n == 0 {
			continue
		}
		if i := firstMessage(q, r); i >= 0 && (best == nil || q.at(i).seq < best.at(bi).seq) {
			best, bi = q, i
		}
	}
	return best, bi
}

// Arrive matches a message's envelope against the posted receives and removes
// and returns the earliest that matches, or nil (the caller then keeps the
// message with AddUnexpected).
func (e *Engine) Arrive(env adi.Envelope) *adi.Request {
	if e.nposted == 0 {
		return nil
	}
	sq := bin(&e.posted, env.Source, false)
	if e.anySource.n == 0 && sq != nil && sq.n > 0 {
		// No wildcard receive competes: the earliest receive of the
		// source's bin that matches wins, most often its first.
		if p := sq.items[sq.head]; p != nil && p.Matches(env) {
			e.nposted--
			sq.popHead()
			return p
		}
	}
	var q *queue[*adi.Request]
	i := -1
	if sq != nil && sq.n > 0 {
		if i = firstReceive(sq, env); i >= 0 {
			q = sq
		}
	}
	if e.anySource.n > 0 {
		if j := firstReceive(&e.anySource, env); j >= 0 && (q == nil || e.anySource.at(j).MatchSeq < q.at(i).MatchSeq) {
			q, i = &e.anySource, j
		}
	}
	if q == nil {
		return nil
	}
	e.nposted--
	return q.remove(i)
}

// AddUnexpected queues a message that matched no posted receive.
func (e *Engine) AddUnexpected(m *Message) {
	m.seq = e.next()
	bin(&e.unexpected, m.Env.Source, true).push(m)
	e.nunexp++
}

// Probe returns, without removing it, the earliest unexpected message a
// receive with (ctx, src, tag) would match, or nil.
func (e *Engine) Probe(ctx uint32, src, tag int) *Message {
	if q, i := e.findUnexpected(&adi.Request{Context: ctx, Peer: src, Tag: tag}); q != nil {
		return q.at(i)
	}
	return nil
}

// Cancel removes a posted receive that has not matched; it reports whether
// the receive was still posted.
func (e *Engine) Cancel(r *adi.Request) bool {
	q := &e.anySource
	if r.Peer != adi.AnySource {
		if q = bin(&e.posted, r.Peer, false); q == nil {
			return false
		}
	}
	if i := q.find(func(p *adi.Request) bool { return p == r }); i >= 0 {
		q.remove(i)
		e.nposted--
		return true
	}
	return false
}

// ProbeStatus is a device's Iprobe over the engine: the status of the
// earliest unexpected message a receive with (ctx, src, tag) would match.
func (e *Engine) ProbeStatus(ctx uint32, src, tag int) (adi.Status, bool) {
	if m := e.Probe(ctx, src, tag); m != nil {
		return adi.Status{Source: m.Env.Source, Tag: m.Env.Tag, Bytes: m.Size}, true
	}
	return adi.Status{}, false
}

// Withdraw is a device's CancelRecv over the engine: a receive still posted
// is removed and completes as cancelled.
func (e *Engine) Withdraw(r *adi.Request) bool {
	if !e.Cancel(r) {
		return false
	}
	r.Complete(adi.Status{Cancelled: true, Source: r.Peer, Tag: r.Tag})
	return true
}

// Posted is the number of receives waiting for a message.
func (e *Engine) Posted() int { return e.nposted }

// Unexpected is the number of messages waiting for a receive.
func (e *Engine) Unexpected() int { return e.nunexp }

// CancelFrom removes and returns every posted receive that names source src
// explicitly (used when src's process has died; wildcard receives stay).
func (e *Engine) CancelFrom(src int) []*adi.Request {
	q := bin(&e.posted, src, false)
	if q == nil {
		return nil
	}
	var out []*adi.Request
	for q.n > 0 {
		out = append(out, q.remove(q.find(func(*adi.Request) bool { return true })))
		e.nposted--
	}
	return out
}

// queue is an ordered list with cheap removal anywhere: removed slots become
// holes that searches skip, and the slice is compacted when holes dominate.
type queue[T comparable] struct {
	items []T
	head  int // items before head are all holes
	n     int // live items
}

func (q *queue[T]) push(v T) {
	q.items = append(q.items, v)
	q.n++
}

// find is the index of the first live item that pred accepts, or -1 (the
// per-message searches use firstReceive and firstMessage instead).
func (q *queue[T]) find(pred func(T) bool) int {
	var zero T
	for i := q.head; i < len(q.items); i++ {
		if v := q.items[i]; v != zero && pred(v) {
			return i
		}
	}
	return -1
}

func (q *queue[T]) at(i int) T { return q.items[i] }

// popHead removes the live item at head: remove(head) for the common case
// of receives matched in the order they were posted, where no holes lie
// behind head to skip and compaction is only needed once head has moved
// past most of the slice.
func (q *queue[T]) popHead() {
	var zero T
	q.items[q.head] = zero
	if q.n--; q.n == 0 {
		q.items, q.head = q.items[:0], 0
		return
	}
	q.head++
	if q.items[q.head] == zero || q.head > 32 && q.head > q.n {
		q.skipHoles() // holes after the old head, or a long dead prefix
	}
}

// skipHoles moves head past holes and compacts the slice when holes
// dominate (remove's second half).
func (q *queue[T]) skipHoles() {
	var zero T
	for q.head < len(q.items) && q.items[q.head] == zero {
		q.head++
	}
	if holes := len(q.items) - q.n; holes > 32 && holes > q.n {
		live := q.items[:0]
		for _, it := range q.items[q.head:] {
			if it != zero {
				live = append(live, it)
			}
		}
		clear(q.items[len(live):])
		q.items, q.head = live, 0
	}
}

func (q *queue[T]) remove(i int) T {
	var zero T
	v := q.items[i]
	q.items[i] = zero
	if q.n--; q.n == 0 {
		q.items, q.head = q.items[:0], 0
		return v
	}
	q.skipHoles()
	return v
}
