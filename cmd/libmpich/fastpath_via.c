// via's half of the C fast path (fastpath.c): an eager message of at most
// ADIMPI_FAST_INLINE bytes goes into the peer's oldest posted receive
// descriptor as via's inline doorbell puts it there, and comes out of
// this process's oldest one as RecvDone and the device's arrive take it,
// with the device's MPI credits, on the very counters via's Go side moves
// (devices/via/fastpath.go). A send is the NIC's work on a send
// descriptor done by the caller: it takes the receive descriptor at the
// head this VI keeps of the peer's queue, writes the MPI header and the
// data into the buffer the descriptor's cached segment names, and then
// the descriptor's completion into its slot, the status last. A receive
// takes the completed descriptor at the head of its own queue and posts
// it again at once: with every buffer posted (the gate's and this file's
// condition) that is the slot it came from, so the descriptor, its slot
// and the ring of posted descriptors keep their contents and only the
// positions move.
//
// Both halves are arranged around the cache lines a message moves
// between the two processes' cores (docs/c-abi.md, "Session 10: via's C
// path"): the send asks for the peer's slot and, after the message, for
// the next one for writing ahead of its stores, and writes the header in
// registers, so that its stores wait for nothing but those lines; the
// receive reads its buffer's first line while it polls the completion,
// so that the two lines come over together and not one after the other.

#include "fastpath_dev.h"

#define V adimpi_fast.via

// via.FastEncoding (fastpath_via.go checks it).
#define VIA_VI_HDR 128   // a VI's receive-queue header: rqTail u64 at 8, stalled u32 at 16
#define VIA_SLOT 128     // a slot: desc u64, nseg u32 at 8, cached u32 at 12, completion, segments
#define VIA_COMP 16      // the completion: length u32, imm u32, status u32
#define VIA_SEG0 32      // the first cached segment: addr u64, len u32, handle u32
#define VIA_HDR 48       // the MPI header (device.go's hdr.put)
#define VIA_EAGER 1      // mEager
#define VIA_DONE 1       // StatusDone

// The MPI header at the front of a receive buffer.
typedef struct {
	uint32_t typ, ctx;
	int32_t tag;
	uint32_t sig, credits, handle;
	uint64_t size;
	uint32_t sid, rid;
	uint64_t addr;
} via_hdr;

_Static_assert(sizeof(via_hdr) == VIA_HDR, "MPI header layout");

#define U32(p, off) ((uint32_t *)((p) + (off)))
#define U64(p, off) ((uint64_t *)((p) + (off)))

// via_put_hdr writes an eager message's MPI header (via_hdr) at b, a
// word at a time: typ and ctx, tag and sig, credits and handle 0, size,
// sid and rid 0, addr 0.
static inline void via_put_hdr(uint8_t *b, uint32_t tag, uint32_t sig, uint32_t credits, uint64_t n) {
	__atomic_store_n(U64(b, 0), VIA_EAGER | (uint64_t)adimpi_fast.ctx << 32, __ATOMIC_RELAXED);
	__atomic_store_n(U64(b, 8), tag | (uint64_t)sig << 32, __ATOMIC_RELAXED);
	__atomic_store_n(U64(b, 16), credits, __ATOMIC_RELAXED);
	__atomic_store_n(U64(b, 24), n, __ATOMIC_RELAXED);
	__atomic_store_n(U64(b, 32), 0, __ATOMIC_RELAXED);
	__atomic_store_n(U64(b, 40), 0, __ATOMIC_RELAXED);
}

_Static_assert(offsetof(via_hdr, typ) == 0 && offsetof(via_hdr, ctx) == 4 && offsetof(via_hdr, tag) == 8 &&
		   offsetof(via_hdr, sig) == 12 && offsetof(via_hdr, credits) == 16 && offsetof(via_hdr, handle) == 20 &&
		   offsetof(via_hdr, size) == 24 && offsetof(via_hdr, sid) == 32 && offsetof(via_hdr, rid) == 36 &&
		   offsetof(via_hdr, addr) == 40,
	       "via_put_hdr's words");

// adimpi_via_send is the device's put of an eager message and the inline
// doorbell's execute of its send descriptor: 1 if the message is in the
// peer's oldest posted receive buffer and the descriptor completed, within
// the device's credits (it keeps the last one for returning credits, as
// put does), with the credits owed to the peer piggybacked.
int adimpi_via_send(const void *buf, int count, int datatype, int dest, int tag) {
	uint32_t sig;
	int64_t n = adimpi_bytes_of(count, datatype, &sig);
	if (n < 0 || n > V.eager || (n > 0 && buf == NULL))
		return 0;
	adimpi_via_link *l = &V.links[dest];
	if (l->peer_rq == NULL || *l->credits < 2)
		return 0;
	uint64_t head = *l->rq_head;
	if (head == *l->rq_tail) {
		*l->rq_tail = __atomic_load_n(U64(l->peer_rq, 8), __ATOMIC_ACQUIRE);
		if (head == *l->rq_tail)
			return 0; // no receive descriptor: the Go side's NIC waits for one
	}
	uint8_t *s = l->peer_rq + VIA_VI_HDR + (head % l->peer_rq_len) * VIA_SLOT;
	// The completion is written into this line: ask for it for writing
	// at once rather than read it and then wait again for ownership.
	__builtin_prefetch(s, 1, 3);
	uint64_t total = VIA_HDR + (uint64_t)n;
	uint64_t addr = *U64(s, VIA_SEG0);
	uint32_t seglen = *U32(s, VIA_SEG0 + 8);
	if (*U32(s, 12) == 0 || *U32(s, 8) == 0 || seglen < total || addr < l->peer_host_va ||
	    addr - l->peer_host_va > l->peer_host_len || l->peer_host_len - (addr - l->peer_host_va) < total)
		return 0; // not a cached segment in the peer's host memory that takes it whole
	uint8_t *b = l->peer_host + (addr - l->peer_host_va);
	// The data is read before anything is stored into the peer's memory,
	// and the header goes out from registers, word by word: a header
	// built on the stack and copied is read back from the stack behind
	// the first store into the buffer, and so waits for that line.
	uint64_t data = 0;
	if (n == 8)
		__builtin_memcpy(&data, buf, 8);
	else if (n > 0)
		memcpy(&data, buf, (size_t)n);
	via_put_hdr(b, (uint32_t)tag, sig, (uint32_t)*l->owed, (uint64_t)n);
	if (seglen >= VIA_HDR + 8)
		__atomic_store_n(U64(b, VIA_HDR), data, __ATOMIC_RELAXED); // the word whole: the segment takes it
	else if (n > 0)
		memcpy(b + VIA_HDR, &data, (size_t)n);
	*l->owed = 0;
	--*l->credits;
	// The receive descriptor's completion, as recvComplete writes it: the
	// status last. Its store is sequentially consistent, as Go's atomics
	// are, for the sleepers' check below: a waiter announces its sleep and
	// then looks at its completions again.
	uint32_t *c = U32(s, VIA_COMP);
	__atomic_store_n(&c[0], (uint32_t)total, __ATOMIC_RELAXED);
	__atomic_store_n(&c[1], 0, __ATOMIC_RELAXED);
	__atomic_store_n(&c[2], VIA_DONE, __ATOMIC_SEQ_CST);
	++*l->rq_head;
	// The next message's slot, still the peer's last write (its repost),
	// comes over while this process waits for a reply, not when it sends.
	if (head + 1 != *l->rq_tail)
		__builtin_prefetch(l->peer_rq + VIA_VI_HDR + ((head + 1) % l->peer_rq_len) * VIA_SLOT, 1, 3);
	// ringApp on the peer's view: only a sleeping application is woken.
	uint32_t *sleepers = (uint32_t *)((uint8_t *)l->peer_app + V.app_sleep);
	if (__atomic_load_n(sleepers, __ATOMIC_SEQ_CST) != 0)
		adimpi_ring_bell(l->peer_app, sleepers);
	adimpi_fast.sent++;
	return 1;
}

// adimpi_via_recv is RecvDone, the device's arrive for an eager message
// that a blocking receive nothing else can match first takes, and the
// repost of its buffer: 1 if the oldest posted receive descriptor
// completed within adimpi_fast.spin polls with such a message that fits.
// The message's piggybacked credits are taken and the buffer, posted
// again, is owed to the sender; a receive after which half the credits
// would be owed (the point at which the Go side sends a credit message)
// is left to the Go side.
int adimpi_via_recv(void *buf, int count, int datatype, int source, int tag, int *status) {
	uint32_t sig;
	int64_t cap = adimpi_bytes_of(count, datatype, &sig);
	if (cap < 0)
		return 0;
	adimpi_via_link *l = &V.links[source];
	if (l->peer_rq == NULL || *l->owed + 1 >= V.credits / 2)
		return 0;
	int64_t rl = *l->ring_len;
	if (*l->ring_n != rl || rl != (int64_t)l->rq_len)
		return 0; // not every buffer posted: a repost would not land in its own slot
	uint64_t h = __atomic_load_n(l->rq_app, __ATOMIC_RELAXED);
	uint8_t *s = l->rq + VIA_VI_HDR + (h % l->rq_len) * VIA_SLOT;
	uint32_t *c = U32(s, VIA_COMP);
	if (*U32(s, 12) == 0 || *U32(s, 8) == 0)
		return 0; // a descriptor the Go side reads
	// The descriptor is this process's own, posted: its buffer's first
	// line (the header and the data) is read on every poll, so that the
	// load that finds it written goes out beside the one that finds the
	// completion.
	const via_hdr *m = (const via_hdr *)(uintptr_t)*U64(s, VIA_SEG0);
	const volatile uint32_t *first = &m->typ;
	uint32_t st;
	for (int i = 0; (st = __atomic_load_n(&c[2], __ATOMIC_ACQUIRE)), (void)*first, st == 0; i++) {
		if (i >= adimpi_fast.spin)
			return 0; // not here yet: the Go side waits (and sleeps)
		__builtin_ia32_pause();
	}
	if (st != VIA_DONE)
		return 0; // an error: the Go side's
	uint32_t length = __atomic_load_n(&c[0], __ATOMIC_RELAXED);
	uint64_t n = m->size;
	if (length < VIA_HDR || m->typ != VIA_EAGER || n != (uint64_t)length - VIA_HDR || m->ctx != adimpi_fast.ctx ||
	    !adimpi_tag_ok(tag, m->tag) || m->sig != sig || n > ADIMPI_FAST_INLINE || n > (uint64_t)cap ||
	    (n > 0 && buf == NULL))
		return 0; // anything else is the Go side's, from this very descriptor
	// RecvDone takes the descriptor, PostRecv posts it again: its slot's
	// completion cleared, then the tail moved (the peer's NIC reads the
	// tail, then the slot). The clear goes first, for the line to be
	// this process's again while the rest is done. The tail's store is
	// sequentially consistent for the stalled check below: a NIC that
	// found no descriptor sets the flag and then reads the tail again.
	__atomic_store_n(&c[2], 0, __ATOMIC_RELEASE);
	int32_t t = m->tag;
	*l->credits += m->credits;
	if (n == 8)
		__builtin_memcpy(buf, (const uint8_t *)m + VIA_HDR, 8);
	else if (n > 0)
		memcpy(buf, (const uint8_t *)m + VIA_HDR, (size_t)n);
	__atomic_store_n(l->rq_app, h + 1, __ATOMIC_RELEASE);
	int64_t rh = *l->ring_head + 1;
	*l->ring_head = rh == rl ? 0 : rh;
	uint64_t tail = __atomic_load_n(U64(l->rq, 8), __ATOMIC_RELAXED);
	__atomic_store_n(U64(l->rq, 8), tail + 1, __ATOMIC_SEQ_CST);
	++*l->owed;
	// A peer NIC that found no receive descriptor waits for this one.
	uint32_t *stalled = U32(l->rq, 16);
	if (__atomic_load_n(stalled, __ATOMIC_SEQ_CST) != 0 && __atomic_exchange_n(stalled, 0, __ATOMIC_SEQ_CST) != 0) {
		__atomic_fetch_add(l->peer_nic, 1, __ATOMIC_SEQ_CST);
		if (__atomic_load_n(l->peer_nic + 1, __ATOMIC_SEQ_CST) != 0)
			syscall(SYS_futex, l->peer_nic, FUTEX_WAKE, 1, NULL, NULL, 0);
	}
	adimpi_fill_status(status, n, source, t);
	adimpi_fast.received++;
	return 1;
}
