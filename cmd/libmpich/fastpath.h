// The C fast path of MPI_Send and MPI_Recv (fastpath.c and one
// fastpath_DEVICE.c per device): what it reads, filled in and kept
// current by the Go side (fastpath.go and fastpath_DEVICE.go).

#include <stdint.h>

#define ADIMPI_FAST_INLINE 8     // the largest message the fast path moves
#define ADIMPI_FAST_TYPES 0x50   // builtin datatype indices (handle & 0xff)

// netvm (fastpath_netvm.c): the control ring's encoding, as netvm's
// ring.go has it; fastpath_netvm.go checks these against the device's
// exported constants before it turns the fast path on.
#define ADIMPI_FAST_SLOTS 128
#define ADIMPI_FAST_SLOT_SIZE 32

// adimpi_fast_ring is netvm.FastRing: one peer's link. out is NULL for a
// peer the fast path does not reach.
typedef struct {
	uint8_t *out;
	uint64_t *out_tail, *out_head;
	uint32_t *doorbell, *sleepers;
	uint8_t *in;
	uint64_t *in_head, *in_reported, *report;
} adimpi_fast_ring;

typedef struct {
	adimpi_fast_ring *rings; // one per rank
	uint32_t eager_type;     // the slot type of an eager message
} adimpi_netvm_state;

// bip (fastpath_bip.c): adimpi_bip_cursors is bip's cursors
// (devices/bip/fastpath.go): one peer's queue positions and MPI-BIP
// credits, shared with the Go side; fastpath_bip.go checks the layout
// against bip.FastCursorLayout.
typedef struct {
	uint64_t tail;     // short messages written to the peer
	int64_t tail_at;   // offset in out of the slot of message tail+1 (0: not yet set)
	uint64_t seen_head; // the peer's head word when last read
	uint64_t head;     // its short messages consumed
	int64_t head_at;   // offset in in of the slot of message head+1 (0: not yet set)
	uint32_t used, granted, consumed, reported; // MPI-BIP credits
	uint64_t pad;
} adimpi_bip_cursors;

// adimpi_bip_queue is bip.FastQueue: one peer's link. out is NULL for a
// peer the fast path does not reach.
typedef struct {
	uint8_t *out; // my block in the peer's segment
	uint8_t *in;  // its block in mine
	uint32_t *doorbell, *sleepers;
	adimpi_bip_cursors *cur;
} adimpi_bip_queue;

// adimpi_bip_state is bip's queues, bip.FastShape and the encoding's
// constants (bip.Fast*).
typedef struct {
	adimpi_bip_queue *queues; // one per rank
	int64_t off_queue, slot_bytes, queue;
	uint32_t credit, eager_type, credit_type;
	int32_t block_head, block_wait, slot_header, header;
} adimpi_bip_state;

// fm (fastpath_fm.c): adimpi_fm_cursors is fm's cursors
// (devices/fm/fastpath.go): one peer's region positions and FM credits,
// shared with the Go side (in its peer struct, pinned); fastpath_fm.go
// checks the layout against fm.FastCursorLayout.
typedef struct {
	uint64_t sent;      // packets written into its region
	uint64_t returned;  // credits it piggybacked on its packets
	int64_t send_at;    // offset in out of packet number sent
	uint64_t head;      // its packets consumed
	int64_t head_at;    // offset in in of packet number head
	uint64_t owed_pass; // the Extract pass in which owed became non-zero
	uint32_t owed;      // packets consumed whose credit is not returned yet
} adimpi_fm_cursors;

// adimpi_fm_peer is fm.FastPeer: one peer's link. out is NULL for a peer
// the fast path does not reach.
typedef struct {
	uint8_t *out; // my packet region in its segment
	uint8_t *in;  // its region in mine
	uint32_t *doorbell, *sleepers;
	uint64_t *mailbox; // in my segment: credits it returned explicitly
	uint64_t *report;  // in its segment: credits I return explicitly
	adimpi_fm_cursors *cur;
} adimpi_fm_peer;

// adimpi_fm_state is fm's links and fm.FastShape.
typedef struct {
	adimpi_fm_peer *peers; // one per rank
	uint64_t *pass;        // Extract's pass counter (in Go's heap, pinned)
	int64_t packet, region; // packet bytes; a region's bytes
	uint64_t slots;         // packets per region: a sender's credits
	uint32_t ret_at;        // owed credits returned explicitly from this many on
	int32_t eager;          // the largest message of one eager packet, at most ADIMPI_FAST_INLINE
} adimpi_fm_state;

// via (fastpath_via.c): adimpi_via_link is via.FastLink: one peer's
// VI pair. The first group lies in the NICs' shared segments; the
// pointers below it are into the Go side's VI and peer (pinned).
// peer_rq is NULL for a peer the fast path does not reach.
typedef struct {
	uint8_t *peer_rq;   // the peer VI's receive-queue header (its segment, mapped here)
	uint8_t *peer_host; // the peer's host memory, mapped here
	uint64_t peer_host_va, peer_host_len; // where that starts in the peer's process; its bytes
	uint32_t *peer_app; // the peer's application doorbell (futex)
	uint32_t *peer_nic; // the peer NIC's doorbell (futex); its sleep word follows
	uint8_t *rq;        // my VI's receive-queue header (my segment)
	uint32_t peer_rq_len, rq_len; // slots of each queue
	uint64_t *rq_head, *rq_tail, *rq_app; // the VI's head and tail of the peer's queue; RecvDone's count
	int64_t *ring_len, *ring_head, *ring_n; // the posted receive descriptors' ring
	int64_t *credits, *owed; // the device's MPI credits for the peer, and those owed to it
} adimpi_via_link;

// adimpi_via_state is via's links and the device's shape.
typedef struct {
	adimpi_via_link *links; // one per rank
	uint32_t app_sleep;     // via.FastAppSleep
	int32_t eager;          // the largest message sent eagerly, at most ADIMPI_FAST_INLINE
	int64_t credits;        // per peer
} adimpi_via_state;

// The devices the fast path knows (adimpi_fast_state.kind), the index of
// their pair of functions in fastpath.c's table.
enum { ADIMPI_FAST_NETVM, ADIMPI_FAST_BIP, ADIMPI_FAST_FM, ADIMPI_FAST_VIA, ADIMPI_FAST_DEVICES };

typedef struct {
	// open: the Go side found nothing that a fast message could overtake
	// or race with, at the end of the last call into it (fastGate).
	volatile int32_t open;
	int32_t rank, size;
	uint32_t ctx;        // MPI_COMM_WORLD's point-to-point context id
	int32_t spin;        // polls of a ring before MPI_Recv calls into Go
	int32_t kind;        // ADIMPI_FAST_NETVM, _BIP, _FM or _VIA: whose state below is live
	uint64_t sent, received; // messages the fast path moved (for tests and docs/c-abi.md)
	uint32_t sig[ADIMPI_FAST_TYPES];  // a builtin datatype's signature code
	uint32_t tsize[ADIMPI_FAST_TYPES]; // its size in bytes, 0: not on the fast path

	// The devices' own state, each filled in by its fastpath_DEVICE.go.
	adimpi_netvm_state netvm;
	adimpi_bip_state bip;
	adimpi_fm_state fm;
	adimpi_via_state via;
} adimpi_fast_state;

extern adimpi_fast_state adimpi_fast;
