// Package fm reproduces Illinois Fast Messages 2.x (seed 002: VIRTUS, §2.1,
// Table 1, and the multidestination paper, p. 115) on one host's shared
// memory, and across hosts over TCP, and MPI over it as VIRTUS did (the adi
// device "fm").
//
// # The FM model
//
// Every process exports one shared-memory segment holding a receive region
// per sender: Slots fixed-size packets (Packet bytes each, default 1536,
// a 24-byte header and the payload). A message is a stream:
//
//	s, _ := e.BeginMessage(dest, length, handler) // FM_begin_message
//	e.SendPiece(s, hdr)                           // FM_send_piece, any number of times
//	e.SendPiece(s, body)
//	e.EndMessage(s)                               // FM_end_message
//
// SendPiece gathers pieces into packets and hands a packet over (stores its
// flag word; the receiver polls it) as soon as it is full or holds the
// message's last byte, so small pieces share packets and a short message
// with its header takes one packet. Delivery is reliable and in order per
// sender (a region is a ring that only that sender writes).
//
// Flow control is by credits: a sender starts with Slots credits per
// destination and spends one per packet. The receiver returns a credit per
// packet it has handled: piggybacked in the header of its next packet to
// that sender, or explicitly — through a counter in the sender's segment,
// and a doorbell ring — when three quarters of a region are owed, or when
// owed credits were not carried by a packet before the next Extract but
// one (there is no reverse traffic). A SendPiece that finds no credit does not spin idle: it runs
// Extract (and sleeps on the doorbell when nothing arrives), so two
// processes flooding each other always drain each other's regions.
// Room(s) tells how many bytes SendPiece would take right now without
// waiting, for callers that must never block (the MPI device).
//
// SendShort(dest, handler, hdr, body) is the short-message fast path, as
// FM 1.x's FM_send_4 was: a whole message of at most one payload, copied
// into one packet with no stream; it never waits, and reports false (having
// sent nothing) when there is no credit or a stream to dest holds a
// half-filled packet. The MPI device sends its one-packet eager messages
// this way.
//
// BeginMessageMulti(dests, length, handler) is the multidestination stream
// of the seed's p. 115: each packet is written into every destination's
// region, and only when every destination has a credit for it.
//
// # Handlers
//
// Handlers are registered by a small integer (SetHandler) and run inside
// Extract (FM_extract). Go has no coroutines for handlers, so a handler is
// a function called once per packet of its stream: first when the stream's
// first packet arrives, then again for every further packet, in arrival
// order. Handlers of different incoming streams interleave as their
// packets arrive. In each call the handler pulls the packet's bytes with
// Receive(s, buf) — as many calls as it likes, each into wherever the bytes
// belong (FM_receive) — or drops them with Skip; bytes it leaves are
// dropped when it returns, and the packet's slot goes back to the sender.
// Its state between calls lives in s.Ctx; s.Last() says that the current
// packet is the stream's last. Stream values are recycled after their last
// packet: a handler must not keep one.
//
// A handler may begin and send messages, but as in FM a handler should
// not wait for credits: while it runs, Extract (called again by a blocking
// SendPiece) skips the sender whose packet is being handled, so two
// handlers sending to each other's full regions would wait for ever.
//
// Outside the packet model, an endpoint can also hold a bulk region per
// sender (Config.Bulk bytes; BulkOut, BulkIn, Ring) whose contents a layer
// above defines — the MPI device's bulk lane below — and can write into
// another process's memory directly (CanWrite, WriteTo, ScatterTo:
// process_vm_writev, probed at start, off with Config.NoRemoteWrite).
// Neither changes BeginMessage, SendPiece, EndMessage, Extract or Receive.
//
// # Starting
//
// Open(Config{}) starts a standalone endpoint in a program launched by
// mpirun (PMI-1 gives the rank, size and key-value space) and Close ends
// it; New(cfg) wires up with an existing key-value space. Close returns
// the credits this process owes and waits for every process in a PMI
// barrier, during which it does not extract: call it once no process
// still sends to this one. Poll(cond) extracts until cond holds (spinning
// briefly, then sleeping on the doorbell), failing if a watched rank dies;
// a blocking SendPiece to a rank that has died fails too. See
// devices/fm/example for a complete program and cmd/fmbench for
// the raw latency and bandwidth measurement.
//
// # MPI over FM (the adi device "fm")
//
// Every MPI message is one FM stream to handler 1, starting with a 32-byte
// header (kind, context, tag, type signature, size, send and receive ids).
// Up to the rendezvous threshold a message is eager: header and data in one
// stream, the data sent with one SendPiece per contiguous block of the
// send buffer (Buffer.Pieces, no pack buffer). The receiver's handler
// matches the header with package adi/match on the first packet; for an
// expected message it scatters every packet straight into the receive
// buffer with one Receive per contiguous block of its datatype (one copy,
// out of the packet region); an unexpected message goes into a temporary
// buffer (two copies). A truncated message fills the buffer and skips the
// rest (ErrTruncate); a type signature mismatch writes nothing (ErrType).
// A message of one packet, the common small one, takes the shortest path
// at both ends: a blocking MPI Send hands it to SendShort with no request
// (adi.ShortSender), which writes header and data straight into the
// packet; at the receiver Extract hands the packet to the device itself,
// without a stream or the handler table, which reads the header in place,
// matches it and copies the data straight into the receive.
//
// Larger messages, and synchronous sends of any size, use a rendezvous:
// RTS (header only), CTS from the receiver once it is matched (it carries
// the number of bytes that fit), then the data. The device never blocks in
// a call: a message that does not fit the credits waits in a per-destination
// queue, in order, and Progress pushes it. Liveness: a process that exits
// fails the requests that wait on it with ErrOther.
//
// # Rendezvous data: the bulk lane
//
// Streaming a large message through 1.5 KiB packets costs a flag, a header
// and a handler call per packet, and a credit round trip per region, which
// holds its bandwidth far below a copy's. So rendezvous data takes a bulk
// lane, FM's packets made large:
// besides its packet regions, every process's segment holds per sender a
// ring of bslots chunks of bulk bytes (defaults 16 × 64 KiB, each with a
// 64-byte header line). After the CTS
// the sender copies the data into the free chunks, gathering the send
// buffer's contiguous blocks (Buffer.Pieces) straight into the chunk, and
// hands each over by storing its flag word (the receive's id and byte count
// are in the chunk's header); the receiver's Progress copies every arrived
// chunk out into the receive buffer's blocks and frees it (clears the flag,
// rings the sender's doorbell). Flow control is the flag of the next chunk,
// as for a packet slot; one message at a time per pair uses the lane (the
// per-destination queue is in order), and the receive completes once its
// bytes have come. A strided and a contiguous message take the same path
// and the same two copies, with one copy call per block on each side and
// no pack buffer: this is the VIRTUS property, and it is why the bulk lane
// and not a remote write is the default. Both copies go through a chunk
// that stays in cache, and on two free cores they overlap. When the lane
// waits on the other process (no free chunk, or no chunk yet) and nothing
// else moved, Progress yields the CPU, so that on an oversubscribed core
// the peer runs at once rather than after the waiter's polling.
//
// With remote=1 the receiver also names its buffer in the CTS — its address
// when contiguous, else the list of its blocks — and a sender that can write
// into the receiver's memory (process_vm_writev, probed at start) writes the
// data straight there in one copy, gathering its own blocks, then sends a
// header-only FIN. That is used only when the blocks on both sides average
// at least minblock bytes (default 64 KiB): the kernel pins the remote
// pages once per remote block, so a remote scatter into small blocks runs
// several times slower than a contiguous remote write and would break the
// strided/contiguous ratio; smaller blocks take the bulk lane. When the write is not permitted or fails, the data takes the
// bulk lane (or packets with bulk=0). The remote write needs only the
// sender to run, which pays off on an oversubscribed machine, where the
// bulk lane's two processes wait on each other at every full ring; it
// trades the strided/contiguous ratio for contiguous bandwidth (figures in
// docs/performance.md).
//
// The device also offers adi.Multisender: IsendMulti sends one buffer to
// several ranks in one multidestination stream; every destination sees an
// ordinary eager message (context, sender's rank, tag), whatever its size.
// If a destination dies, the message still goes to the others and the send
// completes with ErrOther.
//
// # Across hosts
//
// With ranks on several hosts (Config.Hosts; the MPI device gets them from
// the core and implements adi.CrossHost), a peer on this host keeps every
// shared-memory path above, and a peer on another host is reached over the
// job's TCP wire (internal/wire) with FM's protocol unchanged. The sender's
// region for such a peer is a private mirror of the receiver's: SendPiece,
// SendShort and the multidestination stream fill its packets as they fill
// a shared region, and the packets handed over since the last doorbell
// travel as one frame (the span of the region that holds them, the frame
// referencing it), which the receiver's Extract copies into its region for
// that sender and then handles exactly as a local packet: same handlers,
// same per-sender order. Credits stay FM's: a sender spends one per packet
// and waits (or, in the MPI device, queues) when it has none, and the
// receiver returns them piggybacked on its own packets or, where it would
// add to the sender's mailbox word, in a credit frame. A multidestination
// stream writes each packet into every destination's region, so each
// destination on another host gets its own frames and the local ones get
// theirs in shared memory. FM's own SendPiece and EndMessage return once
// their frames are with the kernel (waiting as for credits), so that a
// sender need not call in again for its packets to leave; the MPI device
// completes such a send at that point too. Open finds the hosts itself, so
// that cmd/fmbench and other programs of FM's own API run across hosts.
//
// The bulk lane to another host is chunks of bulk bytes sent as frames
// that reference the send buffer (a non-contiguous one is packed first);
// the receiving side writes each into the receive buffer (a large chunk of
// a contiguous receive is read from the socket straight into it) and frees
// it with a frame, and a sender keeps at most bslots chunks unfreed, as the
// shared lane's ring allows. With remote=1 the receiver's CTS to another
// host names no address (its memory is out of the sender's reach): the
// sender sends the data as write frames of up to 1 MiB, which the
// receiving side writes into its buffer, as NetVM's NIC carried out a
// remote write, and then the header-only FIN. A peer whose connection
// breaks (its host down, its link cut, its process gone) is treated as a
// rank that died: what depends on it fails with an error naming the rank
// and its host.
//
// Options (mpirun -device-opt key=value; OptionTable holds each key's
// default, range and help, and Init refuses a bad value naming it):
//
//	packet=N   packet size in bytes, header included (default 1536)
//	slots=N    packets per sender's receive region, i.e. credits (default 64)
//	rndv=N     largest message sent eagerly (default 16384)
//	bulk=N     bulk lane chunk in bytes, a multiple of 64 (default 65536;
//	           0: no bulk lane, rendezvous data in packets)
//	bslots=N   chunks per sender's bulk lane (default 16)
//	remote=1   offer receive buffers for remote writes (default 0)
//	minblock=N with remote=1, least average block of either buffer for a
//	           remote write (default 65536)
package fm
