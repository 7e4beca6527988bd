// MPI_Send and MPI_Recv with a fast path that stays in C: a small message
// between two processes on one host goes into or out of the device's
// shared memory directly — netvm's control ring, bip's short-message queue
// (with MPI-BIP's credits), fm's packet region (with FM's credits), via's
// receive queues (a peer's posted receive descriptor), each
// in its fastpath_DEVICE.c — without the C→Go crossing that every other
// call pays (docs/c-abi.md, "The C fast path"). Whatever the fast path
// does not handle — another communicator, a datatype that is not builtin,
// a message over ADIMPI_FAST_INLINE bytes, a wildcard source, a message
// that is not the expected one, a receive that would truncate, or
// anything pending in the Go side (adimpi_fast.open clear) — goes to the
// Go side as before, which then finds the shared memory exactly as the C
// side left it.

#include <stdint.h>

#include "fastpath_dev.h"

adimpi_fast_state adimpi_fast;

extern int adimpi_slow_Send(void *, int, int, int, int, int);
extern int adimpi_slow_Recv(void *, int, int, int, int, int, uintptr_t);

#define COMM_WORLD 0x44000000

// devices are the fast paths, by adimpi_fast.kind: a device with a fast
// path adds its pair here and its state to fastpath.h.
static const struct {
	adimpi_fast_send_fn send;
	adimpi_fast_recv_fn recv;
} devices[ADIMPI_FAST_DEVICES] = {
	[ADIMPI_FAST_NETVM] = {adimpi_netvm_send, adimpi_netvm_recv},
	[ADIMPI_FAST_BIP] = {adimpi_bip_send, adimpi_bip_recv},
	[ADIMPI_FAST_FM] = {adimpi_fm_send, adimpi_fm_recv},
	[ADIMPI_FAST_VIA] = {adimpi_via_send, adimpi_via_recv},
};

int MPI_Send(const void *buf, int count, int datatype, int dest, int tag, int comm) {
	if (adimpi_fast.open && comm == COMM_WORLD && (unsigned)dest < (unsigned)adimpi_fast.size && tag >= 0 &&
	    devices[adimpi_fast.kind].send(buf, count, datatype, dest, tag))
		return 0;
	return adimpi_slow_Send((void *)buf, count, datatype, dest, tag, comm);
}
int PMPI_Send(const void *, int, int, int, int, int) __attribute__((alias("MPI_Send")));

int MPI_Recv(void *buf, int count, int datatype, int source, int tag, int comm, int *status) {
	if (adimpi_fast.open && comm == COMM_WORLD && (unsigned)source < (unsigned)adimpi_fast.size && tag >= ADIMPI_ANY_TAG &&
	    devices[adimpi_fast.kind].recv(buf, count, datatype, source, tag, status))
		return 0;
	return adimpi_slow_Recv(buf, count, datatype, source, tag, comm, (uintptr_t)status);
}
int PMPI_Recv(void *, int, int, int, int, int, int *) __attribute__((alias("MPI_Recv")));
