// The C fast path of MPI_Send and MPI_Recv (fastpath.c): what it reads,
// filled in and kept current by the Go side (fastpath.go).

#include <stdint.h>

// The control ring's encoding, as netvm's ring.go has it; fastpath.go
// checks these against the device's exported constants before it turns
// the fast path on.
#define ADIMPI_FAST_SLOTS 128
#define ADIMPI_FAST_SLOT_SIZE 32
#define ADIMPI_FAST_INLINE 8
#define ADIMPI_FAST_TYPES 0x50 // builtin datatype indices (handle & 0xff)

// adimpi_fast_ring is netvm.FastRing: one peer's link. out is NULL for a
// peer the fast path does not reach.
typedef struct {
	uint8_t *out;
	uint64_t *out_tail, *out_head;
	uint32_t *doorbell, *sleepers;
	uint8_t *in;
	uint64_t *in_head, *in_reported, *report;
} adimpi_fast_ring;

// adimpi_bip_cursors is bip's cursors (devices/bip/fastpath.go): one
// peer's queue positions and MPI-BIP credits, shared with the Go side;
// fastpath.go checks the layout against bip.FastCursorLayout.
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

// The devices the fast path knows (adimpi_fast_state.kind).
enum { ADIMPI_FAST_NETVM, ADIMPI_FAST_BIP };

typedef struct {
	// open: the Go side found nothing that a fast message could overtake
	// or race with, at the end of the last call into it (fastGate).
	volatile int32_t open;
	int32_t rank, size;
	uint32_t ctx;        // MPI_COMM_WORLD's point-to-point context id
	uint32_t eager_type; // the slot type of an eager message
	int32_t spin;        // polls of a ring before MPI_Recv calls into Go
	adimpi_fast_ring *rings;
	uint64_t sent, received; // messages the fast path moved (for tests and docs/c-abi.md)
	uint32_t sig[ADIMPI_FAST_TYPES];  // a builtin datatype's signature code
	uint32_t tsize[ADIMPI_FAST_TYPES]; // its size in bytes, 0: not on the fast path

	int32_t kind; // ADIMPI_FAST_NETVM (rings) or ADIMPI_FAST_BIP (bip, below)
	// bip: the peers' queues, and bip.FastShape and the encoding's
	// constants (bip.Fast*).
	adimpi_bip_queue *bip;
	int64_t bip_off_queue, bip_slot_bytes, bip_queue;
	uint32_t bip_credit, bip_eager_type, bip_credit_type;
	int32_t bip_block_head, bip_block_wait, bip_slot_header, bip_header;
} adimpi_fast_state;

extern adimpi_fast_state adimpi_fast;
