// Package via is a Virtual Interface Architecture provider and the MPI
// device built on it (-device via). It reproduces the design study "Comparison
// and Evaluation of Design Choices for Implementing the Virtual Interface
// Architecture" (seed 002, p. 145): every process has a NIC whose
// firmware is a goroutine, and the seed's design alternatives are options
// that change what that goroutine and the posting calls really do.
//
// # The VIPL-style API
//
// The API follows the VI Provider Library, in Go dress:
//
//	nic, _ := via.OpenNIC(via.DefaultOptions())      // VipOpenNic
//	cq, _  := nic.CreateCQ()                          // VipCreateCQ
//	vi, _  := nic.CreateVI(sendCQ, recvCQ)            // VipCreateVi (CQs may be nil)
//	vi.Connect(peerNICAddress, peerVI)                // both sides; loopback allowed
//	h, _   := nic.RegisterMem(buf)                    // VipRegisterMem → memory handle
//	d := &via.Descriptor{Control: via.OpSend | via.FlagImmediate, Imm: 7,
//		DS: []via.DataSegment{via.Seg(h, buf[:n])}}      // control + data segments
//	vi.PostSend(d) / vi.PostRecv(d)                   // VipPostSend / VipPostRecv
//	vi.SendDone() / vi.RecvDone()                     // VipSendDone / VipRecvDone: poll
//	vi.SendWait(t) / vi.RecvWait(t)                   // VipSendWait / VipRecvWait: block
//	cq.Done() / cq.Wait(t)                            // VipCQDone / VipCQWait
//
// A Descriptor is the seed's descriptor: a control segment (Control =
// operation | flags, Length, Imm = immediate data, Status), an address
// segment (RemoteHandle, RemoteAddr: the peer's registered memory, for RDMA)
// and data segments DS, each (address, length, memory handle): a gather list
// for sends and RDMA writes, a scatter list for receives and RDMA reads.
// Every data segment must lie in memory registered with this NIC; a post
// that names anything else fails with an error that names the segment and
// the region. The address segment is checked by the NIC against the peer's
// registrations; a bad one completes the descriptor with
// StatusProtectionError. Operations: OpSend (consumes the peer's oldest
// posted receive descriptor; a send longer than it completes both with
// StatusLengthError), OpRDMAWrite (required by VIA; with FlagImmediate it also
// consumes a receive descriptor at the peer, which reports Imm and the
// length), OpRDMARead (optional in VIA; done here). The NIC writes Length,
// Imm and then Status into the descriptor when it is done; Done and Err read
// them.
//
// A process started by mpirun (or alone) gets its NIC and its peers' NIC
// addresses with Open, which wires up through the launcher's PMI key-value
// space like the MPI runtime does: job.Connect(vi, rank, remoteVI). The
// command testdata/viaping is a complete cross-process program; Example
// shows the calls within one process.
//
// # The NIC engine
//
// Each NIC is a shared-memory segment (memfd, mapped by its peers) that
// plays NIC memory, and an engine that plays the firmware. The engine
// notices doorbells, takes send descriptors (from its descriptor cache or
// by fetching them from host memory), translates their addresses, takes
// the connected peer's oldest posted receive descriptor from the receive
// queue in the peer's segment, and moves the data into the peer's
// registered buffers. It then writes the receive descriptor's completion
// (length, immediate data, then status) into that descriptor's
// receive-queue slot, appends completion entries (CQ1) and rings the peer
// application's completion futex if it sleeps. The receiving application
// is not involved: it only finds completed descriptors. A peer's NIC moves
// the application's completion word (NIC.Seq) only while a waiter has
// announced its sleep, so that a message costs no store into a line the
// application polls beside; Sleep announces, then looks at the CQs and
// the work queues' oldest descriptors once more before it sleeps. A send for which
// the peer has posted no receive descriptor waits at the NIC (the peer's
// next PostRecv rings the engine), holding up only its own VI. A waiter of
// the MPI device gives its core away on an idle poll (sched_yield) only
// while its NIC holds send descriptors not yet carried out (NIC.Busy) or a
// large rendezvous is under way: a send on the wire that waits for the
// remote NIC's acknowledgement is the other host's work, and yielding on
// every poll for it made each message across hosts a trip through the
// scheduler.
//
// How the emulation maps to the VI Architecture, and where it takes a
// shortcut that a process-based NIC needs:
//
//   - Doorbells and work queues are as in VIA: a post writes the
//     descriptor's entry into the VI's send queue in NIC memory and rings
//     the NIC's doorbell word. The firmware is code that runs on whichever
//     thread has a core: the engine goroutine, the doorbell of an idle NIC,
//     or the application itself while it waits for completions (NIC.Help,
//     called by CQ.Wait, the VIs' Wait calls and the MPI device's
//     progress), as software VIA for NICs without VIA firmware (M-VIA)
//     does the NIC's work in the kernel on behalf of the process that
//     rang. The doorbell: a send of up to 32 KiB posted (doorbell=d1)
//     while no pass runs is executed by PostSend itself, after the VI's
//     older entries (counter nic_inline): on a VI of this host its data
//     is copied, on one connected to another host its frame goes to the
//     wire; a send that finds no receive descriptor stays queued and the
//     doorbell rings as usual.
//     While the application helps,
//     the sleeping engine is not woken by this process's doorbells; it
//     takes over when the application sleeps (NIC.Sleep hands back at
//     once) or stops helping for a millisecond; a NIC on the wire runs no
//     pass of its own until then (counter nic_engine_passes), which
//     would take a core from the ranks and the lock from the
//     application's next pass. An idle engine polls for
//     Options.Spin, yielding the CPU, then sleeps on its doorbell futex.
//   - DMA: a NIC writes host memory of another process either through the
//     kernel (process_vm_writev, consecutive sends of one VI, up to 32,
//     in one call, as a NIC pipelines its DMAs) or, for memory handed out
//     by NIC.AllocHostMem (pages of the NIC's segment, which its peers
//     map, as a NIC reaches pinned memory without the host's CPU), with a
//     plain copy. Either way the memory must be registered and every
//     address is translated through the owner's tables.
//   - Both ends of a large RDMA transfer (dmashare.go): an RDMA read or
//     write on one host of at least 64 KiB, contiguous on both sides, is
//     moved by the initiator's NIC and the target's together, as the
//     requester's and the responder's DMA engines of a real NIC each
//     carry one end of it. The initiator publishes the transfer as a job
//     in the target VI's header (NIC memory of the target) and both claim
//     pieces of it (a quarter of what is left, 32–512 KiB, so that the
//     last pieces are small and neither NIC waits long for the other's
//     last one) with an atomic operation on
//     the job's claim word, each copying its pieces with
//     process_vm_readv/writev on the other's memory; the descriptor
//     completes when every piece is in place. The target's part runs in
//     its engine's pass, so in its engine goroutine or in its application
//     while that waits (Help): the kernel's pinning of the other process's
//     pages and the copy, which one process did alone at 14–15 GB/s, run
//     on two cores. A target busy elsewhere claims nothing and the
//     initiator moves it all; a piece the target's kernel refuses goes
//     back to the initiator. Counters nic_shared_init and
//     nic_shared_target count the pieces each end moved.
//   - Staged RDMA reads (dmastage.go): such a read goes instead as a real
//     NIC pair moves it, when the target NIC's staging buffers are free
//     (sixteen 32 KiB buffers in its NIC memory, one transfer at a time):
//     the target's NIC copies chunks of the registered source from its
//     host memory into the buffers, and the initiator's NIC copies each,
//     as it arrives, into the registered destination in its host memory.
//     Both are plain copies of a process's own memory into or out of the
//     shared segment, with no system call and no pinning of another
//     process's 4 KiB pages (which cost process_vm_readv/writev more than
//     the copy), one chunk apart on two cores. Neither end waits for the
//     other: an initiator that receives nothing for 5 µs reads the next
//     chunks itself (process_vm_readv, a quarter of what is left at a
//     time, up to 256 KiB, counted in nic_stage_reads), and a target that finds the next
//     buffer still full
//     writes that chunk straight into the initiator's memory
//     (process_vm_writev). The same counters count the chunks, and
//     nic_stage_staged, nic_stage_early, nic_stage_late, nic_stage_direct
//     and nic_stage_busy say which way they went (staged; read by the
//     initiator before or after the target's first chunk; written
//     straight; reads that found the buffers taken). RDMA writes keep the
//     shared DMA.
//   - Completions: the NIC writes a receive descriptor's completion into
//     its receive-queue slot in the owning NIC's memory, not into the
//     Descriptor (Go memory of another process, which only the kernel
//     could write), and the Descriptor takes it from there the first time
//     Done, Err, RecvDone, RecvWait or a CQ call looks at it: observably
//     the descriptor is complete, with its length, immediate data and
//     status, when the NIC has completed it. Send descriptors, which the
//     NIC of their own process completes, are written directly.
//   - Queue pointers: the engine that consumes a peer VI's receive queue
//     (the one connected to it) keeps the queue's head and the tail it
//     last read itself, as a NIC keeps them in its registers, and reads
//     the tail from the peer's segment only when the descriptors it knows
//     of run out, so that a message moves as few cache lines between the
//     processes as the queue model allows. For the same reason a
//     receive-queue slot starts a cache line and keeps the completion
//     beside the descriptor's address and first data segment: a
//     one-segment receive descriptor is one line, which its owner writes
//     when it posts and the consuming NIC reads and completes.
//
// Addresses: a NIC moves data by DMA to physical addresses. Here the only
// addresses another process's kernel can write to are virtual ones, so the
// "frame" a translation table holds for a page is the page's virtual
// address in its owner. The tables, caches, lookups, misses and their DMA
// reads are all real; only the numbers they translate to are the same.
//
// # Across hosts
//
// A NIC may also reach NICs on other hosts, whose memory no process here
// can map or write: the MPI device gives it the job's wire endpoint
// (package internal/wire; NIC.UseWire) and connects the VI of each rank on
// another host with VI.ConnectRemote, the others' with Connect as above. A
// VI so connected keeps the VIA model: descriptors are posted to its work
// queues and doorbells rung as on one host, and the engine that executes a
// send descriptor carries its data to the remote NIC as frames. The remote
// engine, which owns the target memory, consumes the VI's oldest posted
// receive descriptor, translates its segments through its own tables (so
// every translation design applies) and writes the data, then the
// descriptor's length, immediate data and status, and the CQ entry. An RDMA
// write is written into the target's registered region once the target
// engine has checked the memory handle and the bounds; an RDMA read is a
// request frame answered by the data in frames. The initiator completes a
// send-queue descriptor when the target acknowledges it, so an error found
// there (a bad handle, a range outside the region, a send longer than the
// receive descriptor) completes it with the same status bits as on one
// host; a send whose receive descriptor is not posted yet waits at the
// target NIC, holding up only its VI. A lost connection (a peer killed, its
// host's link cut) completes every descriptor of the VIs to that NIC,
// posted or in flight, with StatusTransportError, and VI.Lost names the
// peer and its host. The engine goroutine owns the endpoint (it alone
// polls and sends on it); when idle it sleeps in the endpoint's epoll,
// which an arriving frame or this process's doorbell ends. Every design
// option below
// works across hosts: the doorbell designs decide how posts reach the
// engine, the CQ designs how completions reach the application, both the
// same for a VI on another host. The standalone job (Open) connects
// through shared memory only.
//
// # Design options (mpirun -device-opt key=value, repeatable)
//
//	doorbell=d1   one doorbell queue per VI in NIC memory; the engine polls
//	              every connected VI's queue (cost grows with VIs) [default]
//	doorbell=d2   one central queue for all VIs behind the "kernel": every
//	              post makes a system call and takes one lock shared by all
//	              VIs; the engine polls that queue only
//	at=at1        host translation table per region; the host translates at
//	              post time (one system call per post + one index per page);
//	              descriptors reach the NIC already translated
//	at=at2        the whole table in NIC memory (the segment); registration
//	              writes every page's entry; the NIC translates
//	at=at3        host table + a direct-mapped translation cache of tlbsize
//	              entries in NIC memory; a miss reads the host table entry by
//	              DMA (process_vm_readv), with those of the transfer's next
//	              pages (up to 64 entries in one DMA), which fill the cache
//	              too: a transfer beyond the cache's reach misses on every
//	              page but pays one DMA per 64. In front of the cache,
//	              two registers hold the NIC's last one-page translations
//	              of its own memory (a ping-pong's send buffer and latest
//	              receive buffer), cleared by deregistration. Counters
//	              tlb_hits / tlb_misses (pages) / tlb_reads (DMAs)
//	              [default, tlbsize=1024]
//	tlbsize=N     at3 cache entries
//	desccache=on  posting copies what the NIC needs (buffer addresses and
//	              sizes, control, where the status goes) into NIC memory: a
//	              send-queue entry, or the receive-queue slot in the segment
//	              (up to 4 segments) [default]
//	desccache=off the NIC fetches each descriptor from host memory by DMA
//	              (two process_vm_readv: control/address segment, then the
//	              segment list) when it processes it — for a receive, when
//	              the message arrives
//	cq=cq1        the NIC appends an entry to the CQ in the owner's segment
//	              after marking the descriptor [default]
//	cq=cq2        no CQ memory: CQDone polls the head descriptor of every
//	              work queue associated with the CQ
//	dmashare=on   an RDMA read or write on one host of 64 KiB or more,
//	              contiguous on both sides, is moved by both NICs, the
//	              initiator's and the target's (above; a read through the
//	              target's staging buffers) [default]
//	dmashare=off  the initiator's NIC moves it alone
//	timers=on     time posts, descriptor executions and CQ checks (one in
//	              16; counters host_post_ns, nic_exec_ns, cq_done_ns) [off:
//	              reading the clock costs more than a CQ check]
//
// Receive-side translation is done by the NIC that moves the data, through
// the receiving NIC's tables and cache (they are in its segment), so a
// cache's hit and miss counters belong to the NIC that owns the memory.
//
// # MPI over VIA
//
// The device connects one VI to every rank (itself included), over the
// wire for a rank on another host (Config.Hosts), reports the send queues
// to one CQ and polls the receive queues (VipRecvDone, which reads the
// oldest descriptor's receive-queue slot without a lock): a message's
// completion is then the one line of its slot, where a receive CQ would
// add its entry and its tail, which every sender's NIC contends for. The
// protocol above the VIs is the same on one host and across hosts. Small messages (eager=N bytes, default 16384)
// are copied with their 48-byte envelope into a registered send buffer and
// sent into one of the credits=N (default 16) receive buffers the peer
// pre-posted for this VI; each message costs a credit, and credits come back
// piggybacked on every message, or in an explicit credit message once half
// of them are owed (the last credit is kept for that, so two senders out of
// credits cannot deadlock). A receive buffer is posted again at the next
// Progress, not before the call that handled its message returns (posting
// writes the slot the sender's NIC reads, a line that would sit on every
// message's way to the application); its credit goes back once it is
// posted. Larger and synchronous messages use rendezvous: an RTS carries
// the send buffer's memory handle and address when it is contiguous, and
// the receiver matches it (package adi/match). On one host (rndv=read, the
// default) the receiver then RDMA-reads the send buffer straight into its
// own — a scatter list built from Buffer.Pieces when the receive buffer is
// a derived datatype — and answers DONE: the data moves as soon as the RTS
// is matched, and a message costs one receive buffer each way. The DONE is
// posted with the reads, behind them on the VI, so the NIC sends it (with
// the credits it returns) the moment the data is in: in a stream the next
// messages' RTSs arrive while the current reads move (DMPI's pipelining of
// the handshake with the data), and the sender, which waits in its
// progress, moves its part of each contiguous read as the target NIC
// (above: it stages the chunks of a staged read): while a peer of its
// host reads such sends (64 KiB or more) in a stream (its NIC copied a
// piece within the last millisecond), the sender's wait neither sleeps
// nor yields its core, unless the host's ranks outnumber its cores, so
// that it claims its pieces as soon as the reader publishes them (a
// sleeping sender's engine had to be woken for every transfer, and a
// yield on a loaded host gave the core to another job).
// A read that the doorbell ran on the receiver's thread completes its
// receive in the same progress call. Otherwise
// (a peer on another host, where a read is a request frame and the data's
// return; rndv=write; a send buffer that is not contiguous) the receiver
// answers CTS with its registered buffer, into which the sender RDMA-writes
// from its own — a gather list, so derived datatypes go without packing —
// then sends FIN; if neither buffer is contiguous, the sender writes into a
// registered bounce buffer the receiver unpacks. The receive buffers are
// in the NIC's host memory (AllocHostMem; on the heap when the job needs
// more than 256 MiB of them), so an eager message reaches the peer with a
// copy and no system call. Rendezvous buffers stay
// registered after use in a registration cache (regcache=N bytes, default
// 64 MiB, least recently used out first; 0 = deregister at once), so that a
// buffer used again costs no registration and its pages stay in the NIC's
// translation cache. Eager sends complete as soon as their copy is posted;
// their descriptors carry FlagQuiet, so the NIC does not wake a sleeping
// waiter for a completion nobody waits for. Truncation, Iprobe,
// CancelRecv, type-signature checks (ErrType) and failure of requests on a
// dead peer (ErrOther) behave as in netvm.
//
// One-sided communication (MPI-3 RMA, rma.go): the device offers the
// extended ADI's remote memory access (adi.RemoteMemory). A window's memory
// is registered with its owner's NIC when the window is made, the memory
// handle travels to the other ranks, and an origin's Put or Get is an RDMA
// write or read descriptor on its VI to the target, executed by the NICs
// (on one host by the origin's, across hosts by the target's engine), so
// that a passive target need not call MPI. The waiting origin runs the
// engine's pass itself. docs/rma.md tells the rest.
//
// MPI device options, besides the NIC's: eager=N (bytes, default 16384),
// credits=N (receive buffers per peer, default 16), regcache=N (bytes,
// default 64 MiB), nicspin=N (microseconds an idle engine polls before it
// sleeps, default 5), rndv=read|write (the rendezvous on one host, default
// read), rma=on|off (one-sided Put and Get by RDMA, default
// on; off leaves them to the target's agent). OptionTable holds every key, the NIC's and the
// device's, with its default, range and help; Init refuses a bad value
// naming it.
package via
