// Package netvm is the device that reproduces NetVM remote write (MPIN, the
// thesis in seeds/000, chapter 3) on one host's shared memory, and reaches
// peers on other hosts over the network.
//
// Every process exports one segment. For each peer w it holds a Control
// Message Area ring of 128 fixed 32-byte control messages written only by w,
// and an eager byte ring also written only by w. A writer keeps its own tail
// and a lazily refreshed copy of the reader's head: the reader remote-writes
// its head back only when it has consumed half a ring, so a writer never reads
// remote memory. A full ring never crashes (the thesis' MPIN did): messages
// wait in a local backlog, flushed by the progress engine as space frees.
//
// Data is written once, straight into the receiver's buffer: the receiver
// sends RTR with its buffer's address, the sender writes the data into the
// receiver's virtual memory with process_vm_writev (NetVM's remote write) and
// then sends SC. Small messages travel eagerly in the eager ring (threshold
// set by the option eager=N bytes), so programs that count on small sends
// being buffered do not deadlock.
//
// With eager > 0 (the default) every message is announced by its sender
// (EAGER with the payload, or RTS for a large one) and matched at the
// receiver by package adi/match; a matched RTS is answered with CTS carrying
// the buffer's address, and the data moves by remote write as in MPIN.
//
// A receive buffer that is not contiguous gets a rendezvous message as
// pipelined chunks through the eager ring (the sender packs, the receiver
// unpacks: two copies, in cache, on both cores); the sender offers its
// layout with the stream, and when the stream stalls (the sender is off
// the CPU, or packs slower than the receiver unpacks) the receiver reads
// the message's tail itself with process_vm_readv while the sender's
// chunks still come from the front, until the two meet, so a loaded
// machine does not need both processes running for every chunk and no
// byte moves twice (offer.go). When the sender's plain packing runs slow
// (its stores wait for ring lines the receiver's core still holds), it
// packs with non-temporal stores instead (ntpack.go). No path uses a
// temporary buffer of the message's size.
//
// With eager=0 the device runs the thesis' pure receiver-initiated protocol
// (mpin.go): RTR/SC, sender-side matching in post order, and ANY_SOURCE
// through RFA/SRFA with ENA_ANY/RTR_ANY/UNA_ANY/DISABLE_ANY, extended with
// ANY_TAG, many communicators and receive cancellation. Probe is not
// possible there (ErrNotSupported), every send waits for its receive (as
// in the thesis), and cancelling a receive whose RTR is out waits for the
// sender's answer.
//
// Peers on other hosts (adi.Config.Hosts; adi.CrossHost) are reached over
// the job's wire endpoint (internal/wire), chosen per peer (netlink.go):
// every control message is a frame, an eager message carries its payload
// in the frame's body, and the remote write is carried out by the
// receiving side, as NetVM's NIC did: the receiver's CTS (or MPIN's RTR)
// carries no address, the sender streams the data as chunks of up to
// 1 MiB whose frames reference its buffer (no copy), and the receiver's
// endpoint reads each chunk straight into the posted buffer at its offset
// (unpacking it when the buffer is not contiguous); SC completes the
// receive as on a ring. MPIN's RFA flags travel as messages that the
// receiver turns into its own flags. What needs a peer's memory (split,
// pull, scatter, offered streams, the board) stays among the peers of one
// host, and the board is not readable when the job spans hosts (the core
// then runs no board collective). A waiter arms the endpoint's sleeper
// before it sleeps on the doorbell, so that a frame wakes it; with no peer
// on its own host it sleeps in the endpoint itself, which a frame wakes
// directly, and a goroutine watches the doorbell instead. A connection
// that breaks (its process died, its host or link went: keepalive probes
// notice within about five seconds) fails every request that depends on
// the peer, naming its rank and host, and the progress engine's error ends
// the job.
//
// The segment also holds the process's board (board.go, adi.Board): a
// sequence word and two 1 MiB slots that every peer reads in place. The core
// runs MPI_COMM_WORLD's board collectives there when ADIMPI_DEVICE_BOARD=on
// asks (by default on a board it builds itself, whose waiters share one
// doorbell); a post rings sleeping peers only when it completes a round.
//
// Options (mpirun -device-opt key=value, or ADIMPI_DEVICE_OPT; OptionTable
// holds each key's default, range and help, and Init refuses a bad value
// naming it):
//
//	eager=N      largest message sent eagerly, bytes (default 16384; 0 = pure MPIN)
//	ring=N       eager ring per peer, bytes (default 1048576 for jobs of up to 4
//	             processes, else 262144; eager must be ≤ ring/4); streams go in
//	             chunks of ring/4
//	cma=auto|off single-copy remote write with process_vm_writev when allowed (auto),
//	             or always copy through the eager ring in chunks (off)
//	split=N      smallest message whose single copy both processes share
//	             (default 65536; 0 = never): the receiver reads the second half
//	             with process_vm_readv while the sender writes the first half
//	             (either buffer may be non-contiguous: the layouts travel as
//	             regular runs, vmcopy.go)
//	scatter=N    a non-contiguous receive whose blocks hold at least N bytes
//	             sends its layout, and the sender writes the blocks in place
//	             with one process_vm_writev per 1024 blocks (shared with the
//	             receiver as split says) (default 0 = never)
//	stream=N     a contiguous rendezvous receive of at least N bytes takes the
//	             data as pipelined chunks through the eager ring, offered for
//	             takeover like non-contiguous streams, instead of a remote
//	             write (default 0 = never: on a 2-vCPU machine the faster of
//	             the two flipped with the machine's state, and the remote
//	             write needs only the sender on a CPU)
//	offer=N      a non-contiguous rendezvous message of at least N bytes goes
//	             as pipelined chunks through the eager ring (pack on one core,
//	             unpack on the other, in cache), and the sender offers its
//	             layout so that the receiver reads the rest itself when the
//	             stream stalls (offer.go) (default 65536; 0 = chunks only)
//	stall=N      microseconds without progress after which an offered stream
//	             counts as stalled and the receiver reads its tail (default 10)
//	pull=N       a non-contiguous receive of at least N bytes always reads the
//	             whole message itself (default 0 = never)
//	ntpack=N     a stream's chunks are packed with non-temporal stores once
//	             three timed plain packs in a row ran slower than N MB/s,
//	             and plainly again once a timed plain pack (one every 2 ms)
//	             is faster (default 4000; 0 = never) (ntpack.go)
//	gap=N        a read of blocks of 1 KiB or more takes gaps of up to N bytes
//	             between the sender's blocks along, so that a run of blocks is
//	             one remote iovec (default 2048: a remote iovec costs about
//	             as much as copying 2-4 KiB); smaller blocks, and blocks under
//	             4 KiB with wider gaps, are read a whole span at a time into a
//	             256 KiB bounce buffer (vmcopy.go)
//	predict=on|off guess the sender of the next message from the order of
//	             the last ones (single-cycle heuristic) and poll its ring
//	             first; a pass whose guessed ring brings messages leaves the
//	             others for up to 8 passes (default on; counters
//	             predict_messages, predict_hits, predict_fast_passes)
//	             (predict.go)
package netvm
