// netvm's half of the C fast path (fastpath.c): an eager message of at
// most ADIMPI_FAST_INLINE bytes goes into or out of the peer's
// shared-memory control ring, on the very cursors netvm's Go side moves
// (devices/netvm/fastpath.go).

#include "fastpath_dev.h"

#define R adimpi_fast.netvm

// Slot fields, at ring.go's offsets.
typedef struct {
	uint32_t typ; // type | (lap+1) << 8, stored last
	uint32_t ctx;
	int32_t tag;
	uint32_t id; // eager: the sender's type signature
	uint64_t addr; // inline payload, little-endian
	uint64_t n;
} slot;

_Static_assert(sizeof(slot) == ADIMPI_FAST_SLOT_SIZE, "slot layout");

// lap_word is ring.go's slotWord.
static inline uint32_t lap_word(uint32_t typ, uint64_t pos) {
	return typ | (uint32_t)(pos / ADIMPI_FAST_SLOTS + 1) << 8;
}

// adimpi_netvm_send is shmRing.putSmall: 1 if the message is in the ring.
int adimpi_netvm_send(const void *buf, int count, int datatype, int dest, int tag) {
	uint32_t sig;
	int64_t n = adimpi_bytes_of(count, datatype, &sig);
	if (n < 0 || n > ADIMPI_FAST_INLINE || (n > 0 && buf == NULL))
		return 0;
	adimpi_fast_ring *r = &R.rings[dest];
	if (r->out == NULL)
		return 0;
	uint64_t tail = *r->out_tail;
	if (tail - __atomic_load_n(r->out_head, __ATOMIC_ACQUIRE) >= ADIMPI_FAST_SLOTS)
		return 0; // full: the Go side waits for room
	uint64_t w = 0;
	memcpy(&w, buf, (size_t)n);
	slot *s = (slot *)(r->out + (tail % ADIMPI_FAST_SLOTS) * ADIMPI_FAST_SLOT_SIZE);
	s->ctx = adimpi_fast.ctx;
	s->tag = tag;
	s->id = sig;
	s->addr = w;
	s->n = (uint64_t)n;
	__atomic_store_n(&s->typ, lap_word(R.eager_type, tail), __ATOMIC_SEQ_CST);
	*r->out_tail = tail + 1;
	adimpi_ring_bell(r->doorbell, r->sleepers);
	adimpi_fast.sent++;
	return 1;
}

// adimpi_netvm_recv is shmRing.next and eagerIn for the one case they
// share with a blocking receive that nothing else can match first: 1 if
// it took the message at source's head, which arrived within
// adimpi_fast.spin polls, is eager and inline, and matches the receive
// whole.
int adimpi_netvm_recv(void *buf, int count, int datatype, int source, int tag, int *status) {
	uint32_t sig;
	int64_t cap = adimpi_bytes_of(count, datatype, &sig);
	if (cap < 0)
		return 0;
	adimpi_fast_ring *r = &R.rings[source];
	if (r->out == NULL)
		return 0;
	uint64_t head = *r->in_head;
	slot *s = (slot *)(r->in + (head % ADIMPI_FAST_SLOTS) * ADIMPI_FAST_SLOT_SIZE);
	uint32_t want = lap_word(0, head) >> 8, w;
	for (int i = 0;; i++) {
		w = __atomic_load_n(&s->typ, __ATOMIC_ACQUIRE);
		if (w >> 8 == want)
			break;
		if (i >= adimpi_fast.spin)
			return 0; // not here yet: the Go side waits (and sleeps)
		__builtin_ia32_pause();
	}
	uint64_t n = s->n;
	int32_t t = s->tag;
	if ((w & 0xff) != R.eager_type || s->ctx != adimpi_fast.ctx || !adimpi_tag_ok(tag, t) || s->id != sig ||
	    n > ADIMPI_FAST_INLINE || n > (uint64_t)cap || (n > 0 && buf == NULL))
		return 0; // anything else is the Go side's, from this very slot
	uint64_t a = s->addr;
	memcpy(buf, &a, (size_t)n);
	head++;
	*r->in_head = head;
	if (head - *r->in_reported >= ADIMPI_FAST_SLOTS / 2) {
		*r->in_reported = head;
		__atomic_store_n(r->report, head, __ATOMIC_SEQ_CST);
		adimpi_ring_bell(r->doorbell, r->sleepers);
	}
	adimpi_fill_status(status, n, source, t);
	adimpi_fast.received++;
	return 1;
}
