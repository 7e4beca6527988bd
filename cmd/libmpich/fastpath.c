// MPI_Send and MPI_Recv with a fast path that stays in C: a small message
// between two processes on one host goes into or out of netvm's
// shared-memory control ring, or bip's short-message queue (with MPI-BIP's
// credits), directly, without the C→Go crossing that every other call
// pays (docs/c-abi.md, "The C fast path"). Whatever the
// fast path does not handle — another communicator, a datatype that is not
// builtin, a message over the slot's inline payload, a wildcard source, a
// slot that is not the expected message, a receive that would truncate, or
// anything pending in the Go side (adimpi_fast.open clear) — goes to the Go
// side as before, which then finds the ring (or queue and credits)
// exactly as the C side left it.

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "fastpath.h"

adimpi_fast_state adimpi_fast;

extern int adimpi_slow_Send(void *, int, int, int, int, int);
extern int adimpi_slow_Recv(void *, int, int, int, int, int, uintptr_t);

#define COMM_WORLD 0x44000000
#define ANY_TAG (-1)
#define STATUS_IGNORE 1
#define BUILTIN_DATATYPE 0x4c000000u

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

// bytes_of is the size of count elements of the builtin datatype dt, or -1
// when the fast path does not take the datatype or the size is not inline.
static inline int64_t bytes_of(int count, int dt, uint32_t *sig) {
	uint32_t u = (uint32_t)dt;
	if ((u & ~0xffffu) != BUILTIN_DATATYPE || count < 0)
		return -1;
	uint32_t i = u & 0xff;
	if (i >= ADIMPI_FAST_TYPES || adimpi_fast.tsize[i] == 0)
		return -1;
	*sig = adimpi_fast.sig[i];
	return (int64_t)count * adimpi_fast.tsize[i];
}

// ring_bell is ring.go's ring: bump the doorbell, wake its sleepers.
static inline void ring_bell(uint32_t *doorbell, uint32_t *sleepers) {
	__atomic_fetch_add(doorbell, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(sleepers, __ATOMIC_SEQ_CST) > 0)
		syscall(SYS_futex, doorbell, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

// fast_send is shmRing.putSmall: 1 if the message is in the ring.
static int fast_send(const void *buf, int count, int datatype, int dest, int tag) {
	uint32_t sig;
	int64_t n = bytes_of(count, datatype, &sig);
	if (n < 0 || n > ADIMPI_FAST_INLINE || (n > 0 && buf == NULL))
		return 0;
	adimpi_fast_ring *r = &adimpi_fast.rings[dest];
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
	__atomic_store_n(&s->typ, lap_word(adimpi_fast.eager_type, tail), __ATOMIC_SEQ_CST);
	*r->out_tail = tail + 1;
	ring_bell(r->doorbell, r->sleepers);
	adimpi_fast.sent++;
	return 1;
}

// bip_put is bip's TrySend of one MPI-BIP message of type typ (eager or
// credit) carrying n bytes of data, with Device.put's credit piggyback: 1
// if it is in the peer's queue, 0 if the queue is full (the waitSpace
// flag then asks the peer to ring when it consumes, as TrySend does).
static int bip_put(adimpi_bip_queue *q, uint32_t typ, int32_t tag, uint32_t sig, const void *data, uint64_t n) {
	adimpi_bip_cursors *c = q->cur;
	uint64_t slots = (uint64_t)adimpi_fast.bip_queue;
	if (c->tail - c->seen_head >= slots) {
		uint64_t *headp = (uint64_t *)(q->out + adimpi_fast.bip_block_head);
		c->seen_head = __atomic_load_n(headp, __ATOMIC_SEQ_CST);
		if (c->tail - c->seen_head >= slots) {
			__atomic_store_n((uint32_t *)(q->out + adimpi_fast.bip_block_wait), 1, __ATOMIC_SEQ_CST);
			c->seen_head = __atomic_load_n(headp, __ATOMIC_SEQ_CST);
			if (c->tail - c->seen_head >= slots)
				return 0;
		}
	}
	if (c->tail_at == 0)
		c->tail_at = adimpi_fast.bip_off_queue;
	uint8_t *s = q->out + c->tail_at;
	uint32_t credits = c->consumed;
	uint32_t len = (uint32_t)(adimpi_fast.bip_header + n);
	memcpy(s + 8, &len, 4);
	memcpy(s + 12, &typ, 4);
	uint8_t *h = s + adimpi_fast.bip_slot_header; // putHdr
	uint32_t zero = 0, ctx = typ == adimpi_fast.bip_eager_type ? adimpi_fast.ctx : 0;
	memcpy(h + 0, &ctx, 4);
	memcpy(h + 4, &tag, 4);
	memcpy(h + 8, &sig, 4);
	memcpy(h + 12, &zero, 4);
	memcpy(h + 16, &n, 8);
	memcpy(h + 24, &credits, 4);
	memcpy(h + 28, &zero, 4);
	memcpy(h + 32, &zero, 4);
	if (n > 0)
		memcpy(h + adimpi_fast.bip_header, data, (size_t)n);
	c->tail++;
	c->tail_at += adimpi_fast.bip_slot_bytes;
	if (c->tail_at == adimpi_fast.bip_off_queue + adimpi_fast.bip_queue * adimpi_fast.bip_slot_bytes)
		c->tail_at = adimpi_fast.bip_off_queue;
	__atomic_store_n((uint64_t *)s, c->tail, __ATOMIC_SEQ_CST);
	__builtin_prefetch(q->out + c->tail_at, 1);
	ring_bell(q->doorbell, q->sleepers);
	c->reported = credits;
	return 1;
}

// bip_send is bip's Device.SendShort: 1 if the eager message is in the
// peer's queue, within MPI-BIP's credits (the fast path's gate keeps
// every backlog empty).
static int bip_send(const void *buf, int count, int datatype, int dest, int tag) {
	uint32_t sig;
	int64_t n = bytes_of(count, datatype, &sig);
	if (n < 0 || n > ADIMPI_FAST_INLINE || (n > 0 && buf == NULL))
		return 0;
	adimpi_bip_queue *q = &adimpi_fast.bip[dest];
	if (q->out == NULL || q->cur->used - q->cur->granted >= adimpi_fast.bip_credit)
		return 0; // no credit: the Go side backlogs the message
	if (!bip_put(q, adimpi_fast.bip_eager_type, tag, sig, buf, (uint64_t)n))
		return 0;
	q->cur->used++;
	adimpi_fast.sent++;
	return 1;
}

int MPI_Send(const void *buf, int count, int datatype, int dest, int tag, int comm) {
	if (adimpi_fast.open && comm == COMM_WORLD && (unsigned)dest < (unsigned)adimpi_fast.size && tag >= 0 &&
	    (adimpi_fast.kind == ADIMPI_FAST_BIP ? bip_send(buf, count, datatype, dest, tag)
	                                         : fast_send(buf, count, datatype, dest, tag)))
		return 0;
	return adimpi_slow_Send((void *)buf, count, datatype, dest, tag, comm);
}
int PMPI_Send(const void *, int, int, int, int, int) __attribute__((alias("MPI_Send")));

// fast_recv is shmRing.next and eagerIn for the one case they share with
// a blocking receive that nothing else can match first: 1 if it took the
// message at source's head, which arrived within adimpi_fast.spin polls,
// is eager and inline, and matches the receive whole.
static int fast_recv(void *buf, int count, int datatype, int source, int tag, int *status) {
	uint32_t sig;
	int64_t cap = bytes_of(count, datatype, &sig);
	if (cap < 0)
		return 0;
	adimpi_fast_ring *r = &adimpi_fast.rings[source];
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
	if ((w & 0xff) != adimpi_fast.eager_type || s->ctx != adimpi_fast.ctx ||
	    (tag == ANY_TAG ? t < 0 : t != tag) || s->id != sig ||
	    n > ADIMPI_FAST_INLINE || n > (uint64_t)cap || (n > 0 && buf == NULL))
		return 0; // anything else is the Go side's, from this very slot
	uint64_t a = s->addr;
	memcpy(buf, &a, (size_t)n);
	head++;
	*r->in_head = head;
	if (head - *r->in_reported >= ADIMPI_FAST_SLOTS / 2) {
		*r->in_reported = head;
		__atomic_store_n(r->report, head, __ATOMIC_SEQ_CST);
		ring_bell(r->doorbell, r->sleepers);
	}
	if ((uintptr_t)status > STATUS_IGNORE) {
		status[0] = (int)(uint32_t)n; // count_lo
		status[1] = 0;                // count_hi_and_cancelled
		status[2] = source;
		status[3] = t;
	}
	adimpi_fast.received++;
	return 1;
}

// bip_recv is bip's next and Device.handle for the one case they share
// with a blocking receive that nothing else can match first, followed by
// Progress's credit return: 1 if it took the eager message at source's
// head, which arrived within adimpi_fast.spin polls, is inline and
// matches the receive whole. Explicit credit messages before it are
// consumed on the way, as handle does.
static int bip_recv(void *buf, int count, int datatype, int source, int tag, int *status) {
	uint32_t sig;
	int64_t cap = bytes_of(count, datatype, &sig);
	if (cap < 0)
		return 0;
	adimpi_bip_queue *q = &adimpi_fast.bip[source];
	if (q->out == NULL)
		return 0;
	adimpi_bip_cursors *c = q->cur;
	if (c->head_at == 0)
		c->head_at = adimpi_fast.bip_off_queue;
	for (;;) {
		uint8_t *s = q->in + c->head_at;
		for (int i = 0; __atomic_load_n((uint64_t *)s, __ATOMIC_ACQUIRE) != c->head + 1; i++) {
			if (i >= adimpi_fast.spin)
				return 0; // not here yet: the Go side waits (and sleeps)
			__builtin_ia32_pause();
		}
		uint32_t len, typ, ctx, sg, credits;
		int32_t t;
		uint64_t n;
		memcpy(&len, s + 8, 4);
		memcpy(&typ, s + 12, 4);
		uint8_t *h = s + adimpi_fast.bip_slot_header;
		memcpy(&ctx, h + 0, 4);
		memcpy(&t, h + 4, 4);
		memcpy(&sg, h + 8, 4);
		memcpy(&n, h + 16, 8);
		memcpy(&credits, h + 24, 4);
		int credit = typ == adimpi_fast.bip_credit_type;
		if (len < (uint32_t)adimpi_fast.bip_header)
			return 0; // the Go side reports the broken message
		if (!credit && (typ != adimpi_fast.bip_eager_type || ctx != adimpi_fast.ctx ||
		                (tag == ANY_TAG ? t < 0 : t != tag) || sg != sig || n > ADIMPI_FAST_INLINE ||
		                n > (uint64_t)cap || len != adimpi_fast.bip_header + n || (n > 0 && buf == NULL)))
			return 0; // anything else is the Go side's, from this very slot
		if (credits - c->granted < 1u << 31)
			c->granted = credits;
		if (!credit) {
			c->consumed++;
			if (n > 0)
				memcpy(buf, h + adimpi_fast.bip_header, (size_t)n);
		}
		c->head++;
		c->head_at += adimpi_fast.bip_slot_bytes;
		if (c->head_at == adimpi_fast.bip_off_queue + adimpi_fast.bip_queue * adimpi_fast.bip_slot_bytes)
			c->head_at = adimpi_fast.bip_off_queue;
		__atomic_store_n((uint64_t *)(q->in + adimpi_fast.bip_block_head), c->head, __ATOMIC_SEQ_CST);
		uint32_t *wait = (uint32_t *)(q->in + adimpi_fast.bip_block_wait);
		if (__atomic_load_n(wait, __ATOMIC_SEQ_CST) != 0) {
			__atomic_store_n(wait, 0, __ATOMIC_SEQ_CST);
			ring_bell(q->doorbell, q->sleepers);
		}
		if (credit)
			continue;
		if (c->consumed - c->reported >= adimpi_fast.bip_credit / 2)
			bip_put(q, adimpi_fast.bip_credit_type, 0, 0, NULL, 0); // if the queue is full, the Go side's Progress retries
		if ((uintptr_t)status > STATUS_IGNORE) {
			status[0] = (int)(uint32_t)n; // count_lo
			status[1] = 0;                // count_hi_and_cancelled
			status[2] = source;
			status[3] = t;
		}
		adimpi_fast.received++;
		return 1;
	}
}

int MPI_Recv(void *buf, int count, int datatype, int source, int tag, int comm, int *status) {
	if (adimpi_fast.open && comm == COMM_WORLD && (unsigned)source < (unsigned)adimpi_fast.size && tag >= ANY_TAG &&
	    (adimpi_fast.kind == ADIMPI_FAST_BIP ? bip_recv(buf, count, datatype, source, tag, status)
	                                         : fast_recv(buf, count, datatype, source, tag, status)))
		return 0;
	return adimpi_slow_Recv(buf, count, datatype, source, tag, comm, (uintptr_t)status);
}
int PMPI_Recv(void *, int, int, int, int, int, int *) __attribute__((alias("MPI_Recv")));
