// fm's half of the C fast path (fastpath.c): an eager message of at most
// ADIMPI_FAST_INLINE bytes goes into or out of the peer's packet region
// as a one-packet stream, with FM's credit accounting, on the very
// counters fm's Go side moves (devices/fm/fastpath.go). Credits are FM's:
// a packet written spends one (sent - returned - mailbox < slots); a
// packet consumed is owed to its sender and goes back piggybacked on the
// next packet to it (written by either side), explicitly from ret_at owed
// on (either side), or explicitly by Extract's rule of the next pass but
// one — which counts from the pass number the C side records when owed
// becomes non-zero, so a credit owed by C is returned by Go's Extract
// exactly as one owed by Go.

#include "fastpath_dev.h"

#define F adimpi_fast.fm

// The packet and MPI header encoding, fm.Fast* (fastpath_fm.go checks
// them).
#define FM_PACKET_HEADER 24
#define FM_SHORT_FLAGS 7 // valid | first | last: a one-packet stream
#define FM_HANDLER 1
#define FM_MPI_HEADER 32
#define FM_EAGER_KIND 1

// Packet header fields at fm.go's offsets.
typedef struct {
	uint32_t flags;   // stored last; cleared by the receiver
	uint16_t handler;
	uint16_t len;     // payload bytes
	uint32_t stream;  // not looked at in a one-packet stream
	uint32_t credits; // piggybacked: the receiver's packets this sender consumed
	uint64_t length;  // the message's length
} fm_packet;

// The MPI header at the front of the payload (device.go's putHeader).
typedef struct {
	uint8_t kind, pad[3];
	uint32_t ctx;
	int32_t tag;
	uint32_t sig;
	uint64_t size;
	uint32_t sid, rid;
} fm_mpi;

_Static_assert(sizeof(fm_packet) == FM_PACKET_HEADER, "packet header layout");
_Static_assert(sizeof(fm_mpi) == FM_MPI_HEADER, "MPI header layout");

// adimpi_fm_send is fm's Device.SendShort and Endpoint.SendShort: 1 if the
// eager message is in the peer's region, within FM's credits (the fast
// path's gate keeps every queue empty and no stream open), with the
// credits owed to the peer piggybacked.
int adimpi_fm_send(const void *buf, int count, int datatype, int dest, int tag) {
	uint32_t sig;
	int64_t n = adimpi_bytes_of(count, datatype, &sig);
	if (n < 0 || n > F.eager || (n > 0 && buf == NULL))
		return 0;
	adimpi_fm_peer *p = &F.peers[dest];
	if (p->out == NULL)
		return 0;
	adimpi_fm_cursors *c = p->cur;
	if (c->sent - c->returned - __atomic_load_n(p->mailbox, __ATOMIC_ACQUIRE) >= F.slots)
		return 0; // no credit: the Go side queues the message
	uint8_t *s = p->out + c->send_at;
	fm_packet *h = (fm_packet *)s;
	fm_mpi *m = (fm_mpi *)(s + FM_PACKET_HEADER);
	m->kind = FM_EAGER_KIND;
	m->pad[0] = m->pad[1] = m->pad[2] = 0;
	m->ctx = adimpi_fast.ctx;
	m->tag = tag;
	m->sig = sig;
	m->size = (uint64_t)n;
	m->sid = m->rid = 0;
	if (n > 0)
		memcpy(s + FM_PACKET_HEADER + FM_MPI_HEADER, buf, (size_t)n);
	h->handler = FM_HANDLER;
	h->len = (uint16_t)(FM_MPI_HEADER + n);
	h->stream = 0;
	h->credits = c->owed;
	c->owed = 0;
	h->length = (uint64_t)(FM_MPI_HEADER + n);
	__atomic_store_n(&h->flags, FM_SHORT_FLAGS, __ATOMIC_RELEASE);
	c->sent++;
	c->send_at += F.packet;
	if (c->send_at == F.region)
		c->send_at = 0;
	__builtin_prefetch(p->out + c->send_at, 1);
	adimpi_ring_bell(p->doorbell, p->sleepers);
	adimpi_fast.sent++;
	return 1;
}

// adimpi_fm_recv is Extract and the MPI handler's eagerPacket for the one
// case they share with a blocking receive that nothing else can match
// first: 1 if it took the packet at source's head, which arrived within
// adimpi_fast.spin polls, is a one-packet eager message and matches the
// receive whole. The packet's piggybacked credits are taken, its slot
// freed and its credit owed, as Extract does.
int adimpi_fm_recv(void *buf, int count, int datatype, int source, int tag, int *status) {
	uint32_t sig;
	int64_t cap = adimpi_bytes_of(count, datatype, &sig);
	if (cap < 0)
		return 0;
	adimpi_fm_peer *p = &F.peers[source];
	if (p->out == NULL)
		return 0;
	adimpi_fm_cursors *c = p->cur;
	uint8_t *s = p->in + c->head_at;
	fm_packet *h = (fm_packet *)s;
	uint32_t fl;
	for (int i = 0; (fl = __atomic_load_n(&h->flags, __ATOMIC_ACQUIRE)) == 0; i++) {
		if (i >= adimpi_fast.spin)
			return 0; // not here yet: the Go side waits (and sleeps)
		__builtin_ia32_pause();
	}
	fm_mpi *m = (fm_mpi *)(s + FM_PACKET_HEADER);
	uint64_t n = m->size;
	int32_t t = m->tag;
	if (fl != FM_SHORT_FLAGS || h->handler != FM_HANDLER || h->len < FM_MPI_HEADER || m->kind != FM_EAGER_KIND ||
	    n != (uint64_t)h->len - FM_MPI_HEADER || m->ctx != adimpi_fast.ctx || !adimpi_tag_ok(tag, t) ||
	    m->sig != sig || n > ADIMPI_FAST_INLINE || n > (uint64_t)cap || (n > 0 && buf == NULL))
		return 0; // anything else is the Go side's, from this very packet
	c->returned += h->credits;
	if (n > 0)
		memcpy(buf, s + FM_PACKET_HEADER + FM_MPI_HEADER, (size_t)n);
	// A plain store frees the slot, as in Extract: the sender reuses it
	// only after the credit for it comes back by a later atomic operation
	// (or a packet flagged by one).
	__atomic_store_n(&h->flags, 0, __ATOMIC_RELAXED);
	c->head++;
	c->head_at += F.packet;
	if (c->head_at == F.region)
		c->head_at = 0;
	if (c->owed == 0)
		c->owed_pass = *F.pass;
	if (++c->owed >= F.ret_at) {
		__atomic_fetch_add(p->report, (uint64_t)c->owed, __ATOMIC_SEQ_CST);
		c->owed = 0;
		adimpi_ring_bell(p->doorbell, p->sleepers);
	}
	adimpi_fill_status(status, n, source, t);
	adimpi_fast.received++;
	return 1;
}
