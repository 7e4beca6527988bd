package mpi

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	goruntime "runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	_ "unsafe" // go:linkname nanotime

	"github.com/adimpi/adimpi/adi"
	_ "github.com/adimpi/adimpi/devices" // links in and registers every device
	"github.com/adimpi/adimpi/internal/goid"
	"github.com/adimpi/adimpi/internal/pmi"
)

// DefaultDevice is the device used when ADIMPI_DEVICE is not set.
const DefaultDevice = "netvm"

// runtime is the one MPI runtime of a process.
type runtime struct {
	mu          devLock // serialises every call into the device (devlock.go)
	dev         adi.Device
	short       adi.ShortSender // dev's immediate small sends, if it has them
	drain       adi.Drainer     // dev's engine, which MPI_Finalize lets drain (adi.Drainer), if it has one
	raw         adi.Device      // the job's device behind dev's joinDev (wrapJoin), for hot
	rawShort    adi.ShortSender // likewise for short
	heldOK      bool            // dev is an adi.LockedCompleter: blocking calls may set Request.Held
	devName     string
	pmi         *pmi.Client
	rank        int
	size        int
	world       *Comm
	self        *Comm
	spin        time.Duration // how long a waiter polls before it sleeps
	poll        time.Duration // how much of the spin polls without yielding the CPU
	bsend       bsendBuffer
	nextCtx     uint32
	ids         ctxIDs                     // the free context-id pairs (communicator creation)
	async       *asyncProgress             // the progress goroutine, if asyncOn
	reqs        sync.Pool                  // *Request objects of completed blocking calls, for reuse
	slab        atomic.Pointer[handleSlab] // where newHandle carves request handles from
	bodies      []*adi.Request             // completed adi.Requests for reuse, under mu (takeBody, giveBody)
	held        heldSlab                   // where startFlatIn carves handles from, under mu
	waits       atomic.Uint64              // if asyncOn: goroutines inside waitFor (low 32 bits), waitFor returns (high 32)
	asyncOn     atomic.Bool                // the progress goroutine runs (set before the runtime is published)
	resume      chan struct{}              // wakes the parked progress goroutine
	native      bool                       // use the device's native collectives (ADIMPI_NATIVE_COLL=off: never)
	deviceBoard bool                       // MPI_COMM_WORLD uses the device's own board, not a core-built one (ADIMPI_DEVICE_BOARD=on)
	hosts       []int                      // world rank -> number of its host (hosts.go)
	hostNames   []string                   // host number -> its name
	place       []int                      // world rank -> host, as collectives and SplitType see it: hosts, or ADIMPI_PRETEND_HOSTS's (hosts.go)
	spread      bool                       // place puts the ranks on more than one host
	hierColls   atomic.Int64               // tiered collectives run (collhier.go)
	hostBoard   atomic.Int64               // tiered collectives whose host phases ran on a board (collhier.go)
	join        *joinDev                   // dev as the core sees it: the device, and the inter-job channel (join.go)
	// sentShort is the completed operation of every non-blocking send
	// that the device took whole when it started (startFlatIn): shared,
	// never given to the device, complete from Init on.
	sentShort adi.Request
}

var (
	stateMu sync.Mutex
	live    atomic.Pointer[runtime] // rt while MPI runs, read without stateMu
	rt      *runtime
	ended   bool // Finalize has run
)

var epoch = time.Now()

// Init starts MPI: it connects to the launcher (PMI-1), starts the device
// named by ADIMPI_DEVICE (default netvm) with options from
// ADIMPI_DEVICE_OPT, and wires it up with the other ranks. Without a
// launcher the program runs as a singleton: rank 0 of 1. From Init on,
// SIGUSR2 makes the process print to stderr where it waits (mpirun
// -timeout sends it).
func Init() error { return InitWith(Options{}) }

// Options choose what InitWith starts. Zero fields take their values from
// the environment that mpirun sets (ADIMPI_DEVICE, ADIMPI_DEVICE_OPT,
// ADIMPI_ASYNC_PROGRESS), and then from the defaults.
type Options struct {
	// Device is the device's name (default: ADIMPI_DEVICE, else netvm).
	Device string
	// DeviceOptions are the device's key=value options (default: ADIMPI_DEVICE_OPT).
	DeviceOptions map[string]string
	// AsyncProgress starts a progress goroutine that advances communication
	// while the program computes (also: ADIMPI_ASYNC_PROGRESS=1, mpirun
	// -async-progress). It sleeps on the device's futex when there is
	// nothing to do.
	AsyncProgress bool
}

// InitWith starts MPI like Init, with explicit options.
func InitWith(o Options) error {
	stateMu.Lock()
	defer stateMu.Unlock()
	if rt != nil || ended {
		return errorf(ErrOther, "MPI_Init", "MPI is already initialized or finalized")
	}
	name := o.Device
	if name == "" {
		name = os.Getenv("ADIMPI_DEVICE")
	}
	if name == "" {
		name = DefaultDevice
	}
	factory, ok := adi.Lookup(name)
	if !ok {
		return errorf(ErrArg, "MPI_Init", "unknown device %q (ADIMPI_DEVICE); known devices: %s", name, strings.Join(adi.Devices(), ", "))
	}
	opts := o.DeviceOptions
	if opts == nil {
		var err error
		if opts, err = parseOptions(os.Getenv("ADIMPI_DEVICE_OPT")); err != nil {
			return errorf(ErrArg, "MPI_Init", "%v", err)
		}
	}
	client, err := pmi.Connect()
	if err != nil {
		return errorf(ErrOther, "MPI_Init", "connecting to the launcher: %v", err)
	}
	startWaitReports(client.Rank()) // where this rank waits, when mpirun -timeout asks (waitinfo.go)
	r := &runtime{pmi: client, rank: client.Rank(), size: client.Size(), devName: name, nextCtx: 4}
	if err := r.learnHosts(client); err != nil {
		e := errorf(ErrOther, "MPI_Init", "learning where the ranks run: %v", err)
		client.Abort(1, e.Error())
		return e
	}
	if err := r.bind(); err != nil {
		e := errorf(ErrOther, "MPI_Init", "binding to a core: %v", err)
		client.Abort(1, e.Error())
		return e
	}
	r.dev = factory()
	if err := r.oneHost(r.dev); err != nil {
		// Every rank reaches this verdict from the same map, so each
		// returns it to its program rather than racing to abort the job.
		return errorf(ErrOther, "MPI_Init", "%v", err)
	}
	r.short, _ = r.dev.(adi.ShortSender)
	r.drain, _ = r.dev.(adi.Drainer)
	_, r.heldOK = r.dev.(adi.LockedCompleter)
	if err := r.dev.Init(adi.Config{Rank: r.rank, Size: r.size, KVS: client, Options: opts, Hosts: r.hosts}); err != nil {
		e := errorf(ErrOther, "MPI_Init", "%v", deviceError(name, err))
		client.Abort(1, e.Error()) // mpirun prints an "MPI_X: ..." message as the rank's error
		return e
	}
	r.dev, r.short, r.join = wrapJoin(r, r.dev, r.short)
	r.sentShort.Complete(adi.Status{})
	// A waiter polls, then polls yielding the CPU to other runnable
	// processes between polls, then sleeps on the device's futex. Sleeping
	// costs a wake-up (a syscall for the waker, scheduling latency for the
	// sleeper), so it is worth it only once a wait is clearly long, or when
	// ranks outnumber cores and a poller would take the CPU its peer needs.
	r.poll, r.spin = time.Millisecond, time.Millisecond
	if r.size > goruntime.NumCPU() {
		r.poll, r.spin = 0, 100*time.Microsecond
	}
	if v := os.Getenv("ADIMPI_SPIN_US"); v != "" {
		if us, err := strconv.Atoi(v); err == nil && us >= 0 {
			r.spin = time.Duration(us) * time.Microsecond
			r.poll = min(r.poll, r.spin)
		}
	}
	// The device's own collectives (adi.Board, adi.Multisender) are
	// used unless ADIMPI_NATIVE_COLL=off asks for the core's message-based
	// algorithms, for comparisons.
	r.native = os.Getenv("ADIMPI_NATIVE_COLL") != "off"
	r.deviceBoard = os.Getenv("ADIMPI_DEVICE_BOARD") == "on"
	r.world = newComm("MPI_COMM_WORLD", 0, r.rank, identity(r.size))
	r.self = newComm("MPI_COMM_SELF", 2, 0, []int{r.rank})
	r.resume = make(chan struct{}, 1)
	if o.AsyncProgress || os.Getenv("ADIMPI_ASYNC_PROGRESS") == "1" {
		r.startProgress()
	}
	mainGoroutine.Store(goid.ID()) // for IsThreadMain
	rt = r
	live.Store(r)
	initDone.Store(true)     // for wait reports (waitinfo.go)
	return r.connectParent() // a spawned job meets its parent (spawn.go)
}

// deviceError names the device in err unless err already starts with its
// name, as the devices' own errors do ("netvm: option ring=1: ...").
func deviceError(name string, err error) error {
	if strings.HasPrefix(err.Error(), name+":") {
		return err
	}
	return fmt.Errorf("device %s: %w", name, err)
}

// parseOptions reads "k=v,k=v".
func parseOptions(s string) (map[string]string, error) {
	opts := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		kv = strings.TrimSpace(kv)
		if kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("device option %q: want key=value", kv)
		}
		opts[k] = v
	}
	return opts, nil
}

// Finalize ends MPI. Every request the program started must be complete;
// buffered sends still in flight are completed first. Finalize is collective:
// it returns once every rank has called it.
//
// A rank that panics must not wait there for ranks that wait for it. When
// Finalize is itself the deferred call (defer mpi.Finalize()) and the
// goroutine is panicking, it prints "rank N: panic: <value>" and the stack
// of the panic to stderr, aborts the job through the launcher and exits
// with status 2, as an unrecovered panic does; the panic does not go on. When
// it is called in some other way while the goroutine panics (from a deferred
// function literal, where it cannot see the panic's value), it returns an
// error at once, without waiting, and the panic goes on to end the process.
// A program that recovers from panics and goes on to finalize must recover
// in a deferred function of its own, deferred after Finalize: a deferred
// function that recovers and then calls Finalize is still inside the panic
// and is taken for a panicking one.
func Finalize() error {
	if v := recover(); v != nil {
		panicked(v)
	}
	if unwinding() {
		rank := -1
		if r := live.Load(); r != nil {
			rank = r.rank
		}
		fmt.Fprintf(os.Stderr, "rank %d: MPI_Finalize called while the goroutine panics: not waiting for the other ranks\n", rank)
		return errorf(ErrOther, "MPI_Finalize", "called while the goroutine panics; MPI is not finalized")
	}
	r, err := current("MPI_Finalize")
	if err != nil {
		return err
	}
	if err := r.waitFor(func() bool { return r.bsend.idle() }); err != nil {
		return err
	}
	if err := r.finalBarrier(); err != nil {
		return err
	}
	if r.drain != nil {
		// The engine may still be sending this rank's last barrier
		// message, and need the process manager to find its peer.
		if err := r.waitFor(r.drain.Drained); err != nil {
			return err
		}
	}
	if err := r.pmi.Barrier(); err != nil {
		// The other ranks wait in their barrier for this one: end the job
		// rather than leave them there (the launcher may still read an
		// abort after a spawn it never answered, see pmi.Client.Abort).
		ferr := errorf(ErrOther, "MPI_Finalize", "barrier: %v", err)
		_ = r.pmi.Abort(1, ferr.Error())
		return ferr
	}
	stateMu.Lock()
	rt, ended = nil, true
	live.Store(nil)
	stateMu.Unlock()
	// The progress goroutine takes r.mu for every pass: stop it before
	// taking the lock, or it may wait for the lock while we wait for it.
	r.stopProgress()
	r.mu.Lock()
	derr := r.dev.Finalize()
	r.mu.Unlock()
	if err := r.pmi.Finalize(); err != nil {
		return errorf(ErrOther, "MPI_Finalize", "%v", err)
	}
	if derr != nil {
		return errorf(ErrOther, "MPI_Finalize", "device %s: %v", r.devName, derr)
	}
	return nil
}

// panicked ends the job for a panic that Finalize recovered: it prints the
// value and the stack from the panic's site (the deferred call runs on top
// of the panicking frames) naming the rank, as Go prints an unrecovered
// panic, aborts the job so that no rank waits for this one, and exits with
// an unrecovered panic's status.
func panicked(v any) {
	rank := -1
	r := live.Load()
	if r != nil {
		rank = r.rank
	}
	fmt.Fprintf(os.Stderr, "rank %d: panic: %v\n\n%s", rank, v, panicStack(debug.Stack()))
	if r != nil {
		_ = r.pmi.Abort(2, fmt.Sprintf("panic: %v", v))
	}
	os.Exit(2)
}

// panicStack cuts from a goroutine's stack trace, taken in a deferred call,
// the frames above the panic: the trace then starts at the panic's site.
func panicStack(trace []byte) []byte {
	lines := bytes.SplitAfter(trace, []byte("\n"))
	for i := 1; i+1 < len(lines); i++ {
		if bytes.HasPrefix(lines[i], []byte("panic(")) {
			return bytes.Join(append(lines[:1:1], lines[i+2:]...), nil)
		}
	}
	return trace
}

// unwinding reports whether the calling goroutine is panicking: whether
// runtime.gopanic, which runs the deferred calls of a panic, is on its stack.
func unwinding() bool {
	var pc [64]uintptr
	frames := goruntime.CallersFrames(pc[:goruntime.Callers(2, pc[:])])
	for {
		f, more := frames.Next()
		if f.Function == "runtime.gopanic" {
			return true
		}
		if !more {
			return false
		}
	}
}

// Initialized reports whether Init has been called (and Finalize not yet).
func Initialized() bool {
	stateMu.Lock()
	defer stateMu.Unlock()
	return rt != nil
}

// Finalized reports whether Finalize has completed.
func Finalized() bool {
	stateMu.Lock()
	defer stateMu.Unlock()
	return ended
}

// Abort ends every process of the job with the given exit code. It does not
// return unless the launcher cannot be told.
func Abort(c *Comm, code int) error {
	stateMu.Lock()
	r := rt
	stateMu.Unlock()
	if r != nil {
		_ = r.pmi.Abort(code, fmt.Sprintf("MPI_Abort(%s, %d) called by rank %d", c.Name(), code, r.rank))
	}
	os.Exit(code)
	return nil
}

// Wtime is the wall-clock time in seconds since an arbitrary point in the past.
func Wtime() float64 { return time.Since(epoch).Seconds() }

// Wtick is the resolution of Wtime in seconds.
func Wtick() float64 { return 1e-9 }

// DeviceName is the name of the device this process runs on.
func DeviceName() string {
	stateMu.Lock()
	defer stateMu.Unlock()
	if rt == nil {
		return ""
	}
	return rt.devName
}

// Counters reports the device's resource and traffic counters (live requests,
// queued messages, bytes moved), for leak checks and benchmarks, and the
// core's: board_rounds counts the rounds of collectives run on the
// device's board (collboard.go), hier_collectives the collectives run in
// tiers across hosts (collhier.go).
func Counters() map[string]int64 {
	r, err := current("MPI_Counters")
	if err != nil {
		return nil
	}
	r.mu.Lock()
	m := maps.Clone(r.dev.Counters())
	r.mu.Unlock()
	if m == nil {
		m = map[string]int64{}
	}
	m["board_rounds"] = r.boardRounds()
	m["hier_collectives"] = r.hierColls.Load()
	m["host_board_collectives"] = r.hostBoard.Load()
	return m
}

// current returns the runtime, or an error naming op if MPI is not running.
func current(op string) (*runtime, error) {
	if r := live.Load(); r != nil {
		return r, nil // the fast path of every call: no lock
	}
	stateMu.Lock()
	defer stateMu.Unlock()
	if rt == nil {
		if ended {
			return nil, errorf(ErrOther, op, "called after MPI_Finalize")
		}
		return nil, errorf(ErrOther, op, "called before MPI_Init")
	}
	return rt, nil
}

// progress runs one non-blocking pass of the device.
func (r *runtime) progress() error {
	r.mu.Lock()
	_, err := r.hot().Progress()
	if rmaWork.Load() {
		r.serveRMA() // RMA operations that arrived (rma_agent.go)
	}
	r.mu.Unlock()
	if err == nil {
		err = r.failed()
	}
	if err != nil {
		return errorf(ErrIntern, "progress", "device %s: %v", r.devName, err)
	}
	return nil
}

// waitFor drives progress until cond holds: it polls for r.poll, polls and
// yields the CPU until r.spin, then sleeps on the device's doorbell so that
// oversubscribed ranks do not starve each other.
func (r *runtime) waitFor(cond func() bool) error {
	return r.waitSleeping(cond, nil)
}

// waitDone is waitFor(ar.Done), the wait of Request.Wait on a request of
// communicator c: first a burst of polls under one hold of the lock
// (pollHeld), then waitFor.
func (r *runtime) waitDone(ar *adi.Request, c *Comm) error {
	r.mu.Lock()
	done, err := r.pollHeld(ar)
	r.mu.Unlock()
	if done || err != nil {
		return err
	}
	return r.waitOn(ar.Done, nil, ar, c)
}

// pollHeld, called with the lock held, polls the device until ar is done,
// for at most freePolls polls, and reports whether it is. Polling under one
// hold of the lock keeps two atomic operations out of each poll, which
// shortens the time from a message's arrival to its being seen. It makes no
// poll when the waiter must yield the CPU at once (ranks outnumber cores)
// or the progress goroutine runs: the caller goes on in waitFor.
func (r *runtime) pollHeld(ar *adi.Request) (bool, error) {
	if r.poll == 0 || r.asyncOn.Load() {
		return ar.Done(), nil
	}
	d := r.hot()
	for i := 0; i < freePolls && !ar.Done(); i++ {
		if _, err := d.Progress(); err != nil {
			return false, errorf(ErrIntern, "progress", "device %s: %v", r.devName, err)
		}
	}
	return ar.Done(), nil
}

// waitSleeping is waitFor with a hook: before the waiter's first sleep it
// calls beforeSleep (which announces the sleep to whoever must ring for
// it), then looks at cond once more, so that a condition made true before
// the announcement was seen is not slept through.
func (r *runtime) waitSleeping(cond func() bool, beforeSleep func()) error {
	return r.waitOn(cond, beforeSleep, nil, nil)
}

// waitOn is waitSleeping for a wait on request ar of communicator c (nil,
// nil: not a single request), which a wait report names (waitinfo.go).
func (r *runtime) waitOn(cond func() bool, beforeSleep func(), ar *adi.Request, c *Comm) error {
	if !r.asyncOn.Load() {
		return r.wait(cond, beforeSleep, ar, c)
	}
	// The progress goroutine stays out of the device while a goroutine
	// waits here (it progresses by itself), and learns from the count of
	// returns whether the program keeps calling MPI. Two atomic adds on a
	// word no other process touches: no clock, no wake-up.
	r.waits.Add(1)
	err := r.wait(cond, beforeSleep, ar, c)
	r.waits.Add(1<<32 - 1)
	return err
}

// freePolls is how many polls a waiter makes before it first reads the
// clock (when r.poll > 0): reading it costs more than a poll, and most waits
// of a latency-bound program end within a few polls.
const freePolls = 64

// wait is waitFor's loop. A wait that goes to sleep is recorded for wait
// reports (beginWait): ar and c say what it waits for.
func (r *runtime) wait(cond func() bool, beforeSleep func(), ar *adi.Request, c *Comm) error {
	free, mask := freePolls, 63
	if r.poll == 0 {
		// Ranks outnumber cores: yield from the start, and often.
		free, mask = 0, 15
	}
	var start, last int64
	var slept *waitRecord
	var lostCPU int64 // when a spin of this wait last lost its CPU (preemptGap)
	for i := 0; ; i++ {
		// The device's Seq is read only before a pass after which the
		// waiter may sleep: the doorbell's cache line moves to the sender
		// at every message, and reading it in every poll would put that
		// miss in the way of seeing the message itself.
		clock := i > free && i&mask == 0
		var seq uint32
		if clock {
			seq = r.dev.Seq()
		}
		r.mu.Lock()
		_, err := r.hot().Progress()
		served := rmaWork.Load()
		if served {
			r.serveRMA() // RMA operations that arrived (rma_agent.go)
		}
		r.mu.Unlock()
		if err == nil && r.async != nil {
			err = r.failed() // a loss the progress goroutine took
		}
		if err != nil || cond() {
			if slept != nil {
				endWait(slept)
			}
			if err != nil {
				return errorf(ErrIntern, "progress", "device %s: %v", r.devName, err)
			}
			return nil
		}
		// A passive target serving one-sided operations keeps spinning
		// while they arrive, as a waiter does for its own messages,
		// instead of sleeping between them; unless its spin has lately
		// lost the CPU, as on a machine busier than the job, where a
		// spinner waits for its next time slice and the origin with it,
		// while a sleeper is woken at once.
		renew := served && i > free
		if renew && lostCPU != 0 {
			renew = time.Duration(nanotime()-lostCPU) > preemptHold
		}
		if i == free || renew {
			start = nanotime()
		}
		if !clock {
			continue
		}
		now := nanotime()
		if last != 0 && time.Duration(now-last) > preemptGap {
			lostCPU = now
		}
		last = now
		if waited := time.Duration(now - start); waited < r.spin {
			if waited >= r.poll {
				osYield()
			}
			continue
		}
		if beforeSleep != nil {
			beforeSleep()
			beforeSleep = nil
			if cond() {
				if slept != nil {
					endWait(slept)
				}
				return nil
			}
		}
		if slept == nil {
			slept = beginWait(start, ar, c)
		}
		r.dev.Sleep(seq, sleepBound(100*time.Millisecond))
		last = 0 // the gap a sleep leaves is not a lost CPU
	}
}

// preemptGap is the gap between two clock readings of a spinning wait
// (64 polls apart, microseconds) that says the waiter lost its CPU;
// serving renews the wait's spin time again preemptHold after the last
// such loss.
var preemptGap, preemptHold = 200 * time.Microsecond, 100 * time.Millisecond

// nanotime is the runtime's monotonic clock in nanoseconds: time.Now reads
// the wall clock as well and costs twice as much, on the waiters' path.
//
//go:linkname nanotime runtime.nanotime
func nanotime() int64

// osYield gives the CPU to another runnable process, if there is one.
func osYield() { syscall.RawSyscall(syscall.SYS_SCHED_YIELD, 0, 0, 0) }

// finalBarrier is a dissemination barrier over the device, on the world's
// collective context. Unlike the launcher's barrier it keeps every rank's
// progress engine running until all ranks have arrived, so a peer still
// finishing its own protocol (answering a cancel, draining a ring) is served.
func (r *runtime) finalBarrier() error {
	const op = "MPI_Finalize"
	ctx := r.world.ctx + 1
	var token [1]byte
	for k := 1; k < r.size; k <<= 1 {
		to, from := (r.rank+k)%r.size, (r.rank-k+r.size)%r.size
		recv := &adi.Request{Op: adi.OpRecv, Context: ctx, Peer: from, Tag: k, Buf: adi.Bytes(token[:0])}
		send := &adi.Request{Op: adi.OpSend, Context: ctx, Peer: to, Tag: k, Buf: adi.Bytes(token[:0])}
		r.mu.Lock()
		err := r.dev.Irecv(recv)
		if err == nil {
			err = r.dev.Isend(send)
		}
		r.mu.Unlock()
		if err != nil {
			return named(op, err)
		}
		if err := r.waitFor(func() bool { return recv.Done() && send.Done() }); err != nil {
			return named(op, err)
		}
		if err := recv.Status.Err; err != nil {
			return named(op, err)
		}
	}
	return nil
}
