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

// Barrierer is an optional device capability: a barrier among all the
// processes of the job, done natively (netvm: each process remote-writes an
// arrival counter that the others read, in the spirit of the reflective
// memory collectives of seed 002). The core uses it for MPI_Barrier on
// MPI_COMM_WORLD when the device offers it.
type Barrierer interface {
	// BarrierEnter announces this process's arrival at barrier number k
	// (1, 2, 3, ... in order). Called under the core's lock.
	BarrierEnter(k uint64)
	// BarrierDone reports whether every process has arrived at barrier k,
	// or an error if a process that has not arrived is gone. It may be
	// called without the core's lock.
	BarrierDone(k uint64) (bool, error)
}

// Multisender is an optional device capability: one send of a buffer to
// several destinations at once (FM's multidestination streams, seed 002
// p. 115), with flow control checked for every destination. Each
// destination receives an ordinary message with envelope (r.Context, this
// process's world rank, r.Tag), which it matches with a normal Irecv; the
// request (Op == OpSend, Peer unused) completes when r.Buf may be reused.
// The core uses it for broadcasts when the device offers it.
type Multisender interface {
	// IsendMulti starts the send of r.Buf to every world rank in dests
	// (distinct, none of them this process).
	IsendMulti(r *Request, dests []int) error
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
