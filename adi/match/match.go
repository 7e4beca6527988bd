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
}

// Engine holds the posted-receive and unexpected-message queues.
type Engine struct {
	posted     queue[*adi.Request]
	unexpected queue[*Message]
}

// Post matches a new receive against the unexpected messages. If one matches,
// it is removed from the queue and returned, and the receive is not queued.
// Otherwise the receive joins the posted queue and Post returns nil.
func (e *Engine) Post(r *adi.Request) *Message {
	if i := e.unexpected.find(func(m *Message) bool { return r.Matches(m.Env) }); i >= 0 {
		return e.unexpected.remove(i)
	}
	e.posted.push(r)
	return nil
}

// Arrive matches a message's envelope against the posted receives and removes
// and returns the earliest that matches, or nil (the caller then keeps the
// message with AddUnexpected).
func (e *Engine) Arrive(env adi.Envelope) *adi.Request {
	if i := e.posted.find(func(r *adi.Request) bool { return r.Matches(env) }); i >= 0 {
		return e.posted.remove(i)
	}
	return nil
}

// AddUnexpected queues a message that matched no posted receive.
func (e *Engine) AddUnexpected(m *Message) { e.unexpected.push(m) }

// Probe returns, without removing it, the earliest unexpected message a
// receive with (ctx, src, tag) would match, or nil.
func (e *Engine) Probe(ctx uint32, src, tag int) *Message {
	probe := adi.Request{Context: ctx, Peer: src, Tag: tag}
	if i := e.unexpected.find(func(m *Message) bool { return probe.Matches(m.Env) }); i >= 0 {
		return e.unexpected.at(i)
	}
	return nil
}

// Cancel removes a posted receive that has not matched; it reports whether
// the receive was still posted.
func (e *Engine) Cancel(r *adi.Request) bool {
	if i := e.posted.find(func(q *adi.Request) bool { return q == r }); i >= 0 {
		e.posted.remove(i)
		return true
	}
	return false
}

// Posted is the number of receives waiting for a message.
func (e *Engine) Posted() int { return e.posted.n }

// Unexpected is the number of messages waiting for a receive.
func (e *Engine) Unexpected() int { return e.unexpected.n }

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

func (q *queue[T]) remove(i int) T {
	var zero T
	v := q.items[i]
	q.items[i] = zero
	q.n--
	for q.head < len(q.items) && q.items[q.head] == zero {
		q.head++
	}
	if q.n == 0 {
		q.items, q.head = q.items[:0], 0
	} else if holes := len(q.items) - q.n; holes > 32 && holes > q.n {
		live := q.items[:0]
		for _, it := range q.items[q.head:] {
			if it != zero {
				live = append(live, it)
			}
		}
		clear(q.items[len(live):])
		q.items, q.head = live, 0
	}
	return v
}

// CancelFrom removes and returns every posted receive that names source src
// explicitly (used when src's process has died; wildcard receives stay).
func (e *Engine) CancelFrom(src int) []*adi.Request {
	var out []*adi.Request
	for {
		i := e.posted.find(func(r *adi.Request) bool { return r.Peer == src })
		if i < 0 {
			return out
		}
		out = append(out, e.posted.remove(i))
	}
}
