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
} adimpi_fast_state;

extern adimpi_fast_state adimpi_fast;
