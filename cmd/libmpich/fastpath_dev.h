// What the devices' halves of the C fast path (fastpath_DEVICE.c) share:
// their entry points, which fastpath.c's table names, and small helpers.

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "fastpath.h"

#define ADIMPI_ANY_TAG (-1)
#define ADIMPI_STATUS_IGNORE 1
#define ADIMPI_BUILTIN_DATATYPE 0x4c000000u

// A device's send reports 1 if it put count elements of the builtin
// datatype from buf to dest with tag on MPI_COMM_WORLD, 0 if it did
// nothing (the Go side then sends); its receive reports 1 if it took the
// next message from source matching tag into buf and filled status, 0 if
// it did nothing. Both are called only while adimpi_fast.open is set, with
// dest/source a rank of MPI_COMM_WORLD and tag valid for the call.
typedef int (*adimpi_fast_send_fn)(const void *buf, int count, int datatype, int dest, int tag);
typedef int (*adimpi_fast_recv_fn)(void *buf, int count, int datatype, int source, int tag, int *status);

// (Hidden: they are not part of the library's ABI.)
#define ADIMPI_HIDDEN __attribute__((visibility("hidden")))
ADIMPI_HIDDEN int adimpi_netvm_send(const void *, int, int, int, int);
ADIMPI_HIDDEN int adimpi_netvm_recv(void *, int, int, int, int, int *);
ADIMPI_HIDDEN int adimpi_bip_send(const void *, int, int, int, int);
ADIMPI_HIDDEN int adimpi_bip_recv(void *, int, int, int, int, int *);
ADIMPI_HIDDEN int adimpi_fm_send(const void *, int, int, int, int);
ADIMPI_HIDDEN int adimpi_fm_recv(void *, int, int, int, int, int *);
ADIMPI_HIDDEN int adimpi_via_send(const void *, int, int, int, int);
ADIMPI_HIDDEN int adimpi_via_recv(void *, int, int, int, int, int *);

// adimpi_bytes_of is the size of count elements of the builtin datatype
// dt, or -1 when the fast path does not take the datatype; *sig is its
// type signature code.
static inline int64_t adimpi_bytes_of(int count, int dt, uint32_t *sig) {
	uint32_t u = (uint32_t)dt;
	if ((u & ~0xffffu) != ADIMPI_BUILTIN_DATATYPE || count < 0)
		return -1;
	uint32_t i = u & 0xff;
	if (i >= ADIMPI_FAST_TYPES || adimpi_fast.tsize[i] == 0)
		return -1;
	*sig = adimpi_fast.sig[i];
	return (int64_t)count * adimpi_fast.tsize[i];
}

// adimpi_ring_bell bumps a peer's doorbell and wakes its sleepers, as the
// devices' Go side does.
static inline void adimpi_ring_bell(uint32_t *doorbell, uint32_t *sleepers) {
	__atomic_fetch_add(doorbell, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(sleepers, __ATOMIC_SEQ_CST) > 0)
		syscall(SYS_futex, doorbell, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

// adimpi_fill_status fills an MPI_Status (MPICH's five ints) for a
// received message of n bytes, unless it is MPI_STATUS_IGNORE.
static inline void adimpi_fill_status(int *status, uint64_t n, int source, int tag) {
	if ((uintptr_t)status > ADIMPI_STATUS_IGNORE) {
		status[0] = (int)(uint32_t)n; // count_lo
		status[1] = 0;                // count_hi_and_cancelled
		status[2] = source;
		status[3] = tag;
	}
}

// adimpi_tag_ok reports whether a message's tag t matches a receive's tag.
static inline int adimpi_tag_ok(int tag, int32_t t) { return tag == ADIMPI_ANY_TAG ? t >= 0 : t == tag; }
