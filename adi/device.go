package adi

import (
	"sort"
	"sync"
	"time"
)

// KVS is the job's key-value space (PMI-1), through which a device publishes
// its address and finds its peers' during Init.
type KVS interface {
	Put(key, value string) error
	Barrier() error
	Get(key string) (string, error)
}

// Config is what a device gets when the job starts.
type Config struct {
	Rank    int               // this process's world rank
	Size    int               // world size
	KVS     KVS               // wire-up
	Options map[string]string // -device-opt key=value pairs
	// Hosts gives the number of every world rank's host, hosts numbered by
	// their lowest rank: ranks with equal numbers share a kernel and its
	// process and mount namespaces (shared memory works between them);
	// others reach each other only over a network. Nil means one host.
	Hosts []int
}

// Device moves envelopes and bytes between the processes of a job. See the
// package documentation for the rules every device follows.
type Device interface {
	// Init wires the device up with its peers; it is collective over the job.
	Init(cfg Config) error
	// Isend starts a send request (Op == OpSend).
	Isend(r *Request) error
	// Irecv posts a receive request (Op == OpRecv).
	Irecv(r *Request) error
	// Iprobe reports the envelope and size of the first message that a
	// receive with (ctx, src, tag) would match, without receiving it.
	Iprobe(ctx uint32, src, tag int) (Status, bool, error)
	// CancelRecv withdraws a posted receive that has not matched a message
	// yet; it reports false when the receive is already matched.
	CancelRecv(r *Request) bool
	// Progress advances every protocol as far as it can without blocking
	// and reports whether anything happened.
	Progress() (bool, error)
	// Seq returns the device's event sequence word: it changes whenever
	// something arrives that Progress would handle.
	Seq() uint32
	// Sleep blocks until Seq differs from seq, Wake is called, or d elapses.
	// It is called without the core's lock.
	Sleep(seq uint32, d time.Duration)
	// Wake makes every Sleep in this process return.
	Wake()
	// Finalize releases the device's resources; every request is complete.
	Finalize() error
	// Counters reports resource counters (live requests, queued messages,
	// bytes moved, ...) for leak checks and benchmarks.
	Counters() map[string]int64
}

// Board is an optional device capability: every process of the job owns a
// small board in shared memory that every other process reads directly
// (netvm: a corner of its segment, which every peer maps; the reflective
// memory of "Fast Collective Communication Algorithms for Reflective Memory
// Network Clusters"). A board is a sequence word and two data slots. The
// core runs Barrier, Bcast, Reduce, Allreduce and Alltoall on
// MPI_COMM_WORLD over the boards, with no messages at all: small data in
// the slots, large data staged through them or read where they lie
// (BoardRead).
//
// The core numbers those collectives 1, 2, 3, ... and uses slot k%2 for
// collective k. Posting k tells every peer both that this process's slot
// k%2 holds its data for k (if it has any) and that it has finished with
// every board collective before k.
type Board interface {
	// BoardSlotSize is the size in bytes of one slot.
	BoardSlotSize() int
	// BoardSlot returns slot i (0 or 1) of world rank p's board, mapped in
	// this process: its own for writing, a peer's for reading.
	BoardSlot(p, i int) []byte
	// BoardLine returns a few dozen bytes that may stand in for slot i
	// (same rules) and travel with the sequence word, in the same cache
	// line: a peer that sees round k posted has line k%2's data already.
	BoardLine(p, i int) []byte
	// BoardPost publishes k in this process's sequence word, after its
	// slot writes. It wakes the peers that wait with BoardWaiting raised
	// when this post completes a round (every process has now posted k), or
	// always when wakeAll is set (a broadcast root's data is ready). Called
	// without the core's lock.
	BoardPost(k uint64, wakeAll bool)
	// BoardWaiting raises (before a wait that may sleep, and before its
	// next look at the boards) or lowers this process's flag telling
	// posters to wake it. A waiter that only polls needs no wake-up, and its
	// posters then touch none of its memory.
	BoardWaiting(on bool)
	// BoardPosted reports whether world rank p has posted k or later, or an
	// error if p's process is gone without posting it. It may be called
	// without the core's lock.
	BoardPosted(p int, k uint64) (bool, error)
	// BoardReadable reports whether this process may read every peer's
	// memory with BoardRead (netvm: process_vm_readv is permitted). The
	// core agrees on it job-wide before relying on it.
	BoardReadable() bool
	// BoardRead copies len(dst) bytes of peer p's memory, at address addr
	// of p's address space, into dst (a remote read, without p's help).
	BoardRead(p int, addr uintptr, dst []byte) error
	// BoardWrite copies src into peer p's memory at address addr of p's
	// address space (a remote write, without p's help). BoardReadable
	// covers it too.
	BoardWrite(p int, addr uintptr, src []byte) error
}

// Multisender is an optional device capability: one send of a buffer to
// several destinations at once (FM's multidestination streams, as in
// "Broadcast/Multicast over Myrinet Using NIC-Assisted Multidestination
// Messages"), with flow control checked for every destination. Each
// destination receives an ordinary message with envelope (r.Context, this
// process's world rank, r.Tag), which it matches with a normal Irecv; the
// request (Op == OpSend, Peer unused) completes when r.Buf may be reused.
// The core uses it for broadcasts when the device offers it.
type Multisender interface {
	// IsendMulti starts the send of r.Buf to every world rank in dests
	// (distinct, none of them this process).
	IsendMulti(r *Request, dests []int) error
}

// ShortSender is an optional device capability: a blocking standard-mode
// send of a small contiguous message handed to the wire at once, without a
// request. The core tries it first for every blocking Send whose buffer is
// contiguous; it is the per-message path of latency-bound programs.
type ShortSender interface {
	// SendShort sends data, whose type signature is sig, to world rank peer
	// with envelope (ctx, this process, tag), eagerly and now, and reports
	// true once data may be reused. It reports false, having sent nothing,
	// whenever it cannot do so at once (data too long for one eager unit,
	// no credit, messages queued to peer before it, peer gone); the core
	// then starts a request as usual. Called under the core's lock.
	SendShort(ctx uint32, peer, tag int, sig uint32, data []byte) bool
}

// LockedCompleter is an optional device capability: the device completes
// requests only inside the core's calls into it, under the core's lock,
// never from a goroutine of its own. The core may then let a request whose
// completion it watches under that lock complete without an atomic store
// (Request.Held), which a blocking Send or Recv saves on every message.
type LockedCompleter interface {
	CompletesUnderLock()
}

// CrossHost is an optional device capability: the device reaches peers on
// other hosts (Config.Hosts) over a network, keeping shared memory for
// peers on its own host. The core refuses to start a job whose ranks span
// hosts on a device without it.
type CrossHost interface {
	// CrossHost reports whether the device reaches ranks on other hosts.
	CrossHost() bool
}

// Drainer is an optional device capability, for a device whose own engine
// (a thread of its simulated NIC) may still have to put messages on the
// network after their requests completed. MPI_Finalize waits, making
// progress, until Drained reports true before the job's final barrier
// outside MPI: that barrier holds the process manager's connection, which
// the engine may need to finish (the lookup of a peer's address), and a
// peer may wait for those messages to leave the barrier.
type Drainer interface {
	// Drained reports whether every message handed to the device's
	// engine has been carried out to the network.
	Drained() bool
}

// OptionHelper is an optional device capability: a description of the
// device's -device-opt keys, one line per key ("  key=default\t(range)
// help"), for a launcher's help output. A fresh, uninitialised device
// answers it.
type OptionHelper interface {
	OptionHelp() string
}

// Factory makes a fresh, uninitialised device.
type Factory func() Device

var (
	registryMu sync.Mutex
	registry   = map[string]Factory{}
)

// Register makes a device available under name. Devices call it from init.
func Register(name string, f Factory) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if _, dup := registry[name]; dup {
		panic("adi: device " + name + " registered twice")
	}
	registry[name] = f
}

// Lookup finds a registered device.
func Lookup(name string) (Factory, bool) {
	registryMu.Lock()
	defer registryMu.Unlock()
	f, ok := registry[name]
	return f, ok
}

// Devices lists the registered device names, sorted.
func Devices() []string {
	registryMu.Lock()
	defer registryMu.Unlock()
	names := make([]string, 0, len(registry))
	for n := range registry {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
