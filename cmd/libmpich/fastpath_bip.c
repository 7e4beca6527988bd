// bip's half of the C fast path (fastpath.c): an eager message of at most
// ADIMPI_FAST_INLINE bytes goes into or out of the peer's short-message
// queue, with MPI-BIP's credit accounting, on the very counters bip's Go
// side moves (devices/bip/fastpath.go).

#include "fastpath_dev.h"

#define B adimpi_fast.bip

// bip_put is bip's TrySend of one MPI-BIP message of type typ (eager or
// credit) carrying n bytes of data, with Device.put's credit piggyback: 1
// if it is in the peer's queue, 0 if the queue is full (the waitSpace
// flag then asks the peer to ring when it consumes, as TrySend does).
static int bip_put(adimpi_bip_queue *q, uint32_t typ, int32_t tag, uint32_t sig, const void *data, uint64_t n) {
	adimpi_bip_cursors *c = q->cur;
	uint64_t slots = (uint64_t)B.queue;
	if (c->tail - c->seen_head >= slots) {
		uint64_t *headp = (uint64_t *)(q->out + B.block_head);
		c->seen_head = __atomic_load_n(headp, __ATOMIC_SEQ_CST);
		if (c->tail - c->seen_head >= slots) {
			__atomic_store_n((uint32_t *)(q->out + B.block_wait), 1, __ATOMIC_SEQ_CST);
			c->seen_head = __atomic_load_n(headp, __ATOMIC_SEQ_CST);
			if (c->tail - c->seen_head >= slots)
				return 0;
		}
	}
	if (c->tail_at == 0)
		c->tail_at = B.off_queue;
	uint8_t *s = q->out + c->tail_at;
	uint32_t credits = c->consumed;
	uint32_t len = (uint32_t)(B.header + n);
	memcpy(s + 8, &len, 4);
	memcpy(s + 12, &typ, 4);
	uint8_t *h = s + B.slot_header; // putHdr
	uint32_t zero = 0, ctx = typ == B.eager_type ? adimpi_fast.ctx : 0;
	memcpy(h + 0, &ctx, 4);
	memcpy(h + 4, &tag, 4);
	memcpy(h + 8, &sig, 4);
	memcpy(h + 12, &zero, 4);
	memcpy(h + 16, &n, 8);
	memcpy(h + 24, &credits, 4);
	memcpy(h + 28, &zero, 4);
	memcpy(h + 32, &zero, 4);
	if (n > 0)
		memcpy(h + B.header, data, (size_t)n);
	c->tail++;
	c->tail_at += B.slot_bytes;
	if (c->tail_at == B.off_queue + B.queue * B.slot_bytes)
		c->tail_at = B.off_queue;
	__atomic_store_n((uint64_t *)s, c->tail, __ATOMIC_SEQ_CST);
	__builtin_prefetch(q->out + c->tail_at, 1);
	adimpi_ring_bell(q->doorbell, q->sleepers);
	c->reported = credits;
	return 1;
}

// adimpi_bip_send is bip's Device.SendShort: 1 if the eager message is in
// the peer's queue, within MPI-BIP's credits (the fast path's gate keeps
// every backlog empty).
int adimpi_bip_send(const void *buf, int count, int datatype, int dest, int tag) {
	uint32_t sig;
	int64_t n = adimpi_bytes_of(count, datatype, &sig);
	if (n < 0 || n > ADIMPI_FAST_INLINE || (n > 0 && buf == NULL))
		return 0;
	adimpi_bip_queue *q = &B.queues[dest];
	if (q->out == NULL || q->cur->used - q->cur->granted >= B.credit)
		return 0; // no credit: the Go side backlogs the message
	if (!bip_put(q, B.eager_type, tag, sig, buf, (uint64_t)n))
		return 0;
	q->cur->used++;
	adimpi_fast.sent++;
	return 1;
}

// adimpi_bip_recv is bip's next and Device.handle for the one case they
// share with a blocking receive that nothing else can match first,
// followed by Progress's credit return: 1 if it took the eager message at
// source's head, which arrived within adimpi_fast.spin polls, is inline
// and matches the receive whole. Explicit credit messages before it are
// consumed on the way, as handle does.
int adimpi_bip_recv(void *buf, int count, int datatype, int source, int tag, int *status) {
	uint32_t sig;
	int64_t cap = adimpi_bytes_of(count, datatype, &sig);
	if (cap < 0)
		return 0;
	adimpi_bip_queue *q = &B.queues[source];
	if (q->out == NULL)
		return 0;
	adimpi_bip_cursors *c = q->cur;
	if (c->head_at == 0)
		c->head_at = B.off_queue;
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
		uint8_t *h = s + B.slot_header;
		memcpy(&ctx, h + 0, 4);
		memcpy(&t, h + 4, 4);
		memcpy(&sg, h + 8, 4);
		memcpy(&n, h + 16, 8);
		memcpy(&credits, h + 24, 4);
		int credit = typ == B.credit_type;
		if (len < (uint32_t)B.header)
			return 0; // the Go side reports the broken message
		if (!credit && (typ != B.eager_type || ctx != adimpi_fast.ctx || !adimpi_tag_ok(tag, t) || sg != sig ||
		                n > ADIMPI_FAST_INLINE || n > (uint64_t)cap || len != B.header + n || (n > 0 && buf == NULL)))
			return 0; // anything else is the Go side's, from this very slot
		if (credits - c->granted < 1u << 31)
			c->granted = credits;
		if (!credit) {
			c->consumed++;
			if (n > 0)
				memcpy(buf, h + B.header, (size_t)n);
		}
		c->head++;
		c->head_at += B.slot_bytes;
		if (c->head_at == B.off_queue + B.queue * B.slot_bytes)
			c->head_at = B.off_queue;
		__atomic_store_n((uint64_t *)(q->in + B.block_head), c->head, __ATOMIC_SEQ_CST);
		uint32_t *wait = (uint32_t *)(q->in + B.block_wait);
		if (__atomic_load_n(wait, __ATOMIC_SEQ_CST) != 0) {
			__atomic_store_n(wait, 0, __ATOMIC_SEQ_CST);
			adimpi_ring_bell(q->doorbell, q->sleepers);
		}
		if (credit)
			continue;
		if (c->consumed - c->reported >= B.credit / 2)
			bip_put(q, B.credit_type, 0, 0, NULL, 0); // if the queue is full, the Go side's Progress retries
		adimpi_fill_status(status, n, source, t);
		adimpi_fast.received++;
		return 1;
	}
}
