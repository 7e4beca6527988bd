// Package bip reproduces BIP, the Basic Interface for Parallelism of
// Myrinet (seeds/003, and seeds/000 §2.4.3), on a host's shared memory and
// between hosts over TCP, and runs MPI over it as MPI-BIP did.
//
// # BIP
//
// An Endpoint is one process's BIP interface. BIP has two mechanisms:
//
//   - Short messages (at most Options.Short bytes) are written into a
//     circular queue at the receiver, one queue of Options.Queue slots per
//     sender. A short send completes at once, whether or not the receiver
//     has asked for anything (TrySend, SendShort); only a full queue stops
//     it: TrySend then reports false, and SendShort blocks — making
//     progress, spinning briefly, then sleeping on its futex doorbell until
//     the receiver consumes (NextShort, RecvShort) and rings it. The
//     receiver publishes how far it has consumed in a head word; the
//     sender keeps the value it last read and reads the word again only
//     when the queue looks full by that value, so that a stream of short
//     messages moves each slot's cache line to the receiver and nothing
//     back, as a NIC's receive queue costs the host nothing per message.
//   - Long messages use a rendezvous: the receive must be posted first
//     (PostLong, RecvLong), into a descriptor slot that the sender can see;
//     a long send (StartLong, SendLong) waits for a posted receive with its
//     tag and then streams the data straight into the receive buffer —
//     with process_vm_writev (internal/shm RemoteWrite, NetVM-style remote
//     write) when the kernel allows it, else through two shared-memory
//     staging chunks per slot that the receiver scatters into place.
//     Shared copy: when both buffers are contiguous, remote copies are
//     allowed both ways and the message is at least 64 KiB (pieces of an
//     eighth of it, 32 KiB to 512 KiB), the receiver, which waits for the
//     message anyway, copies too — it claims pieces on the slot
//     descriptor with the sender (an atomic counter) and reads each one
//     straight out of the send buffer with process_vm_readv, while the
//     sender writes the pieces it claims. It is still BIP's single copy
//     from the send buffer into the posted buffer, but the copy and the
//     kernel's pinning of the remote pages (which costs as much as the
//     copy itself) run on two cores instead of one; a receiver busy
//     elsewhere claims nothing and the sender copies it all, and the send
//     completes once every piece is in place. A non-contiguous receive
//     buffer of large blocks is described by a
//     gather list (address, length pairs, as BIP's NIC took them) that
//     the sender reads with process_vm_readv and writes through in one
//     scatter call per batch; small blocks go through the staging
//     chunks, which is faster for them. As in BIP, only a bounded number of long
//     operations per peer may be outstanding in each direction
//     (Options.MaxLong; beyond it PostLong and StartLong return ErrBusy).
//
// # Across hosts
//
// Peers on this process's host (same kernel, PID and mount namespaces)
// are reached through shared memory as above; peers on other hosts over
// the job's network endpoint (internal/wire), chosen per peer, with BIP's
// protocol kept (net.go). A short message is one frame, which the
// receiving side writes into its own circular queue, in the sender's
// slots, where NextShort finds it as any other; the sender counts those
// Queue slots as its credits, and the receiver returns them over the wire
// as it consumes (once half the queue is consumed, or at once when the
// sender found the queue full: the frame form of the waitSpace word). A
// long receive is announced to its sender by a frame describing its slot;
// the long send matches it as on shared memory and streams the data as
// frames that reference its buffer (no copy at the sender), which the
// receiving side writes into the posted buffer — NetVM-style remote write
// carried out by the receiver, as Myrinet's NIC did — or, with cma=off,
// through two staging chunks per send, each reused only once the receiver
// has emptied it. MaxLong bounds the long operations per peer as on one
// host. MPI-BIP above runs unchanged. A send over the wire completes only
// once the kernel has its frames, so that a process that stops calling
// BIP leaves nothing behind that a peer waits for. A peer whose connection
// breaks fails the operations that depend on it with an error naming its
// rank and host; when none does, the device's next Progress returns that
// error, so the job ends as when a rank dies.
//
// Open starts a standalone endpoint under any PMI-1 launcher (mpirun,
// Hydra, Slurm) and wires it up through the job's key-value space, as the
// devices do; New does the same with a given KVS. Both learn which peers
// share this host from the host identities the ranks publish. An Endpoint is driven by
// its caller: Progress advances long operations; Seq, Sleep and Wake let a
// caller wait on the doorbell without spinning.
//
// # MPI over BIP
//
// The device "bip" (mpirun -device bip) is MPI-BIP on this interface:
//
//   - Every MPI message starts with a 40-byte header in a BIP short
//     message. A message that fits in one short message goes eagerly; the
//     receiver matches it (package adi/match) or keeps a copy as
//     unexpected. A blocking send of such a message, and an eager Isend
//     when nothing waits for credit before it, is written straight into
//     the peer's queue with no request or backlog entry
//     (adi.ShortSender), and the device completes requests only inside
//     the core's calls (adi.LockedCompleter); Progress hands each eager
//     message straight from its queue slot to the matched receive, or
//     keeps a copy as unexpected (small ones reusing the memory of
//     those already delivered). BIP only stops a sender whose queue is full, so MPI-BIP
//     adds credit-based flow control above it: a sender has Queue−2
//     credits per receiver, the receiver returns them as it consumes —
//     piggybacked on every message it sends back, or in an explicit credit
//     message once half of them are owed, which uses the two reserved
//     slots. Messages without credit wait in an ordered per-peer backlog.
//   - A long message uses MPI-BIP's three messages: REQ (envelope, size,
//     type signature) → ACK once a receive has matched and the BIP long
//     receive is posted into its buffer → the data as a BIP long message.
//     MPI allows any number of pending operations, BIP only MaxLong per
//     peer: matched receives and acknowledged sends beyond BIP's bound
//     queue in the device and move on as BIP operations complete.
//     Synchronous sends always take this path, so they complete only once
//     matched.
//
// Derived datatypes move block by block (adi.Buffer Pieces/CopyIn/CopyOut
// into and out of queue slots, staging chunks and remote-write iovecs),
// never through a pack buffer of the whole message. A truncated receive
// gets the bytes that fit and ErrTruncate; a type-signature mismatch
// ErrType; a dead peer fails the requests waiting on it with ErrOther.
//
// The seed's point holds here: every step of the long protocol needs the
// host CPU of one side, so a program that computes without calling MPI
// gets no overlap; calling MPI_Iprobe in the computation, or running the
// core's progress goroutine (mpirun -async-progress), lets the protocol
// advance meanwhile. Unlike Myrinet's NIC, nothing here moves the bytes
// without a CPU: the remote write (or chunk copy) itself runs on a core,
// so the overlap it can give is bounded by the cores left idle by the
// computation.
//
// Options (mpirun -device-opt key=value, or ADIMPI_DEVICE_OPT; OptionTable
// holds each key's default, range and help, and Init refuses a bad value
// naming it):
//
//	short=N      largest short message, bytes (default 4096); MPI eager limit = short − 40-byte header
//	queue=N      short-message queue slots per sender (default 32, at least 4; the MPI device 66 unless given)
//	maxlong=N    outstanding long sends / receives per peer (default 1, as BIP)
//	chunk=N      staging chunk of a long message without remote write (default 32768)
//	cma=auto|off remote write with process_vm_writev when allowed, or always chunks
package bip
