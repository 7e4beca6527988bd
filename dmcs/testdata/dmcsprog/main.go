// Command dmcsprog is the MPI program of package dmcs's tests and
// benchmark: each mode checks one use of DMCS and prints one line per rank
// that passed; "bench" prints the cost of RSRs by payload size.
//
// MODE poll or thread may end in -heap (Options.Heap: memory in an MPI
// window, one-sided Put/Get/PutOp) and then in -p2p (requests as MPI
// messages only).
//
//	dmcsprog storm poll|thread K     every rank sends K RSRs of 0–4 args and payloads to every rank
//	dmcsprog counter poll|thread N   a distributed counter: PutOp, RSR and Get
//	dmcsprog list poll|thread N      a linked list of N nodes malloc'd on the next rank
//	dmcsprog bench poll|thread N     rank 0 → 1: RSR call time, round trip and raw MPI, by size
//	dmcsprog app poll N [W]          an application: N items of W (2000) rounds of arithmetic per rank into a
//	                                 distributed histogram; DMCS's share of its time
//	dmcsprog app poll N W rsr|local  N items of W rounds into a distributed hash table (an RSR to the key's
//	                                 owner per item), or the same work into a local table: the run's time
package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"log"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/adimpi/adimpi/dmcs"
	"github.com/adimpi/adimpi/mpi"
)

func main() {
	if len(os.Args) < 4 {
		log.Fatal("usage: dmcsprog MODE poll|thread N")
	}
	if _, err := mpi.InitThread(mpi.ThreadMultiple); err != nil {
		log.Fatal(err)
	}
	defer mpi.Finalize()
	n, err := strconv.Atoi(os.Args[3])
	if err != nil {
		log.Fatal(err)
	}
	// The mode is poll or thread, with "-p2p" for MPI messages only
	// (Options.NoShm).
	mode, p2p := strings.CutSuffix(os.Args[2], "-p2p")
	mode, withHeap = strings.CutSuffix(mode, "-heap")
	threaded = mode == "thread"
	opts := dmcs.Options{PollThread: threaded, NoShm: p2p, Timing: os.Args[1] == "app" && os.Getenv("DMCSPROG_PROFILE") == ""}
	if withHeap {
		opts.Heap = 1 << 20
	}
	d, err := dmcs.Init(opts)
	check(err, "Init")
	switch os.Args[1] {
	case "storm":
		storm(d, n)
	case "counter":
		counter(d, n)
	case "list":
		list(d, n)
	case "bench":
		bench(d, n)
	case "app":
		work := 2000
		if len(os.Args) > 4 {
			work, err = strconv.Atoi(os.Args[4])
			check(err, "W")
		}
		if len(os.Args) > 5 {
			hashApp(d, n, work, os.Args[5])
		} else {
			app(d, n, work)
		}
	default:
		log.Fatalf("dmcsprog: unknown mode %q", os.Args[1])
	}
}

// threaded: the poll thread serves requests; withHeap: DMCS has a heap.
var threaded, withHeap bool

func check(err error, what string) {
	if err != nil {
		log.Fatalf("rank %d: %s: %v", mpi.World().Rank(), what, err)
	}
}

// payloadOf is the payload of RSR number k from src: sizes cycle through
// 0 bytes, a few bytes, the largest inline ones (InlineMax in an MPI
// message, RingMax in a shared-memory ring) and larger ones that travel
// as separate messages.
func payloadOf(src, k int) []byte {
	size := []int{0, 5, dmcs.InlineMax, 3000, dmcs.RingMax, dmcs.RingMax + 1000}[k%6]
	p := make([]byte, size)
	for i := range p {
		p[i] = byte(src*31 + k + i)
	}
	return p
}

// storm: every rank sends k RSRs to every rank (itself included), polling
// as it goes; each handler checks its arguments and payload.
func storm(d *dmcs.DMCS, k int) {
	var got atomic.Int64
	var bad atomic.Value
	h := d.Register(func(d *dmcs.DMCS, src int, args []uint64, payload []byte) {
		seq := int(args[0])
		if len(args) != seq%5 && !(seq%5 == 0 && len(args) == 1) {
			bad.Store(fmt.Sprintf("RSR %d from %d: %d args", seq, src, len(args)))
		}
		for i := 1; i < len(args); i++ {
			if args[i] != uint64(src*1000+seq+i) {
				bad.Store(fmt.Sprintf("RSR %d from %d: arg %d = %d", seq, src, i, args[i]))
			}
		}
		if !bytes.Equal(payload, payloadOf(src, seq)) {
			bad.Store(fmt.Sprintf("RSR %d from %d: payload of %d bytes differs", seq, src, len(payload)))
		}
		got.Add(1)
	})
	me, n := d.Rank(), d.Size()
	for seq := 0; seq < k; seq++ {
		for dest := 0; dest < n; dest++ {
			args := []uint64{uint64(seq)}
			for i := 1; i < max(seq%5, 1); i++ {
				args = append(args, uint64(me*1000+seq+i))
			}
			check(d.RSRPayload(dest, h, payloadOf(me, seq), args...), "RSR")
		}
		if seq%16 == 0 {
			_, err := d.Poll()
			check(err, "Poll")
		}
	}
	check(d.Close(), "Close")
	if v := bad.Load(); v != nil {
		log.Fatalf("rank %d: %v", me, v)
	}
	if got.Load() != int64(k*n) {
		log.Fatalf("rank %d: handled %d RSRs, want %d", me, got.Load(), k*n)
	}
	fmt.Printf("rank %d: storm of %d RSRs ok\n", me, k*n)
}

// counter: a counter on rank 0, incremented n times by every rank with
// PutOp and n times with an RSR whose handler adds locally; every rank
// then reads it with Get.
func counter(d *dmcs.DMCS, n int) {
	cell := make([]byte, 8)
	ptr := d.Expose(cell) // the same Ptr on every rank
	if withHeap {
		var err error
		ptr, cell, err = d.HeapAlloc(8) // the same Ptr on every rank too
		check(err, "HeapAlloc")
	}
	var viaRSR atomic.Int64
	inc := d.Register(func(d *dmcs.DMCS, src int, args []uint64, _ []byte) {
		viaRSR.Add(int64(args[0]))
	})
	// Exposing is local: no rank may use rank 0's cell before rank 0 has
	// exposed it (a poll thread serves at once).
	check(d.Barrier(), "Barrier")
	one := binary.LittleEndian.AppendUint64(nil, 1)
	var c dmcs.Counter
	for i := 0; i < n; i++ {
		check(d.PutOpAsync(0, ptr, one, dmcs.SumInt64, &c), "PutOpAsync")
		check(d.RSR(0, inc, 1), "RSR")
	}
	check(d.WaitCounter(&c, int64(n)), "WaitCounter")
	check(c.Err(), "PutOpAsync")
	check(d.Barrier(), "Barrier") // every increment has been applied
	buf := make([]byte, 8)
	check(d.Get(0, ptr, buf), "Get")
	want := int64(n * d.Size())
	if v := int64(binary.LittleEndian.Uint64(buf)); v != want {
		log.Fatalf("rank %d: counter %d, want %d", d.Rank(), v, want)
	}
	check(d.Close(), "Close")
	if d.Rank() == 0 && viaRSR.Load() != want {
		log.Fatalf("rank 0: RSR counter %d, want %d", viaRSR.Load(), want)
	}
	fmt.Printf("rank %d: counter %d ok\n", d.Rank(), want)
}

// list: every rank builds a list of n nodes in memory it mallocs on the
// next rank — node = value, next Ptr — then walks it back with Get and
// frees it.
func list(d *dmcs.DMCS, n int) {
	me := d.Rank()
	next := (me + 1) % d.Size()
	var head dmcs.Ptr
	for i := 0; i < n; i++ {
		p, err := d.Malloc(next, 16)
		check(err, "Malloc")
		node := binary.LittleEndian.AppendUint64(nil, uint64(me*1_000_000+i))
		node = binary.LittleEndian.AppendUint64(node, uint64(head))
		check(d.Put(next, p, node), "Put")
		head = p
	}
	k := n - 1
	node := make([]byte, 16)
	for p := head; p != 0; k-- {
		check(d.Get(next, p, node), "Get")
		if v := binary.LittleEndian.Uint64(node); v != uint64(me*1_000_000+k) {
			log.Fatalf("rank %d: node %d holds %d", me, k, v)
		}
		check(d.Free(next, p), "Free")
		p = dmcs.Ptr(binary.LittleEndian.Uint64(node[8:]))
	}
	if k != -1 {
		log.Fatalf("rank %d: walked %d nodes, want %d", me, n-1-k, n)
	}
	if err := d.Free(next, head); err == nil {
		log.Fatalf("rank %d: freeing a freed block succeeded", me)
	}
	check(d.Close(), "Close")
	fmt.Printf("rank %d: list of %d nodes ok\n", me, n)
}

// bench times, from rank 0 to rank 1, by payload size: the call of an
// asynchronous RSR (n calls back to back, then waiting for the last
// handler's answer), an RSR round trip (an RSR and its acknowledgement),
// and the same two patterns in plain MPI (Isend of header-sized messages,
// Send/Recv ping-pong) for the DMCS overhead. It is long because the four
// timed patterns and their matching halves on rank 1 read best in one place.
func bench(d *dmcs.DMCS, n int) {
	me := d.Rank()
	var pongs atomic.Int64
	pongCh = make(chan struct{}, 1)
	var pong int
	pong = d.Register(func(d *dmcs.DMCS, src int, args []uint64, _ []byte) {
		pongs.Add(1)
		select {
		case pongCh <- struct{}{}:
		default:
		}
	})
	roundDone := make(chan struct{}, 16)
	doneH := d.Register(func(*dmcs.DMCS, int, []uint64, []byte) { roundDone <- struct{}{} })
	ping := d.Register(func(d *dmcs.DMCS, src int, args []uint64, p []byte) {
		if len(args) > 0 && args[0] == 1 {
			_ = d.RSR(src, pong)
		}
	})
	if me == 0 {
		fmt.Printf("%-8s %12s %12s %12s %12s\n", "bytes", "rsr_call_ns", "mpi_isend_ns", "rsr_rtt_us", "mpi_rtt_us")
	}
	for _, size := range []int{0, 8, 64, 512, 1024, 4096, 8192} {
		payload := make([]byte, size)
		raw := make([]byte, 64+size)
		check(mpi.Barrier(d.Comm()), "Barrier")
		var call, isend, rtt, mrtt time.Duration
		if me == 0 {
			// RSR calls: the last asks for an answer, which ends the round.
			// Above InlineMax the payload travels by reference: the
			// asynchronous form, with a Counter.
			want := pongs.Load() + 1
			var c dmcs.Counter
			t0 := time.Now()
			for i := 0; i < n; i++ {
				flag := uint64(0)
				if i == n-1 {
					flag = 1
				}
				if size > dmcs.InlineMax {
					check(d.RSRPayloadAsync(1, ping, payload, &c, flag), "RSR")
				} else {
					check(d.RSRPayload(1, ping, payload, flag), "RSR")
				}
			}
			call = time.Since(t0) / time.Duration(n)
			waitPongs(d, &pongs, want)
			if size > dmcs.InlineMax {
				check(d.WaitCounter(&c, int64(n)), "WaitCounter")
			}
			// Round trips: an RSR and its acknowledgement, which comes
			// once the handler has run.
			var rc dmcs.Counter
			t0 = time.Now()
			for i := 0; i < n; i++ {
				check(d.RSRPayloadAsync(1, ping, payload, &rc, 0), "RSR")
				check(d.WaitCounter(&rc, int64(i+1)), "WaitCounter")
			}
			rtt = time.Since(t0) / time.Duration(n)
			check(d.RSR(1, doneH), "RSR")
			ibarrier()
		} else if me == 1 {
			if threaded {
				// Sleep while the poll thread serves: a main goroutine
				// waiting in MPI would spin beside it.
				<-roundDone
			}
			serveUntil(d)
		} else {
			ibarrier()
		}
		check(mpi.Barrier(d.Comm()), "Barrier")
		// Plain MPI on the world: n Isends, then ping-pong.
		w := mpi.World()
		if me == 0 {
			reqs := make([]*mpi.Request, 0, n)
			t0 := time.Now()
			for i := 0; i < n; i++ {
				q, err := mpi.Isend(w, raw, 1, 9)
				check(err, "Isend")
				reqs = append(reqs, q)
			}
			isend = time.Since(t0) / time.Duration(n)
			_, err := mpi.Waitall(reqs)
			check(err, "Waitall")
			t0 = time.Now()
			for i := 0; i < n; i++ {
				check(mpi.Send(w, raw, 1, 10), "Send")
				_, err := mpi.Recv(w, raw, 1, 10)
				check(err, "Recv")
			}
			mrtt = time.Since(t0) / time.Duration(n)
			fmt.Printf("%-8d %12d %12d %12.2f %12.2f\n", size, call.Nanoseconds(), isend.Nanoseconds(),
				float64(rtt.Nanoseconds())/1e3, float64(mrtt.Nanoseconds())/1e3)
		} else if me == 1 {
			for i := 0; i < n; i++ {
				_, err := mpi.Recv(w, raw, 0, 9)
				check(err, "Recv")
			}
			for i := 0; i < n; i++ {
				_, err := mpi.Recv(w, raw, 0, 10)
				check(err, "Recv")
				check(mpi.Send(w, raw, 0, 10), "Send")
			}
		}
	}
	check(d.Close(), "Close")
}

// pongCh tells a waiter that the poll thread ran the pong handler.
var pongCh chan struct{}

// waitPongs polls until pongs reaches want; with a poll thread it sleeps
// until the handler says (a spinning main goroutine would take the CPU the
// poll thread needs).
func waitPongs(d *dmcs.DMCS, pongs *atomic.Int64, want int64) {
	for pongs.Load() < want {
		if threaded {
			// Watch for a few microseconds before sleeping on the
			// channel, as WaitCounter does.
			for t0 := time.Now(); pongs.Load() < want && time.Since(t0) < 20*time.Microsecond; {
				runtime.Gosched()
			}
			if pongs.Load() < want {
				<-pongCh
			}
			continue
		}
		_, err := d.Poll()
		check(err, "Poll")
	}
}

// ibarrier is a barrier on the world that matches serveUntil's (a
// blocking barrier never matches a non-blocking one).
func ibarrier() {
	q, err := mpi.Ibarrier(mpi.World())
	check(err, "Ibarrier")
	_, err = q.Wait()
	check(err, "Wait")
}

// serveUntil serves rank 0's requests on rank 1 until rank 0 reaches the
// barrier that follows its rounds: it polls, and checks for the barrier's
// arrival with a non-blocking barrier of its own.
func serveUntil(d *dmcs.DMCS) {
	q, err := mpi.Ibarrier(mpi.World())
	check(err, "Ibarrier")
	if threaded {
		_, err := q.Wait()
		check(err, "Wait")
		return
	}
	for {
		_, err := d.Poll()
		check(err, "Poll")
		if _, done, err := q.Test(); err != nil || done {
			check(err, "Test")
			return
		}
	}
}

// app is a small application in the seed's style: every rank computes n
// items (a few microseconds of arithmetic each) and adds each result into
// a histogram whose bins are spread over all ranks, with an asynchronous
// remote accumulate, polling every 32 items. It checks the histogram's
// total and prints DMCS's own time, the MPI time DMCS spent, and their
// shares of the run (the largest over the ranks).
func app(d *dmcs.DMCS, n, work int) {
	const binsPer = 64
	bins := make([]byte, 8*binsPer)
	ptr := d.Expose(bins)
	one := binary.LittleEndian.AppendUint64(nil, 1)
	var c dmcs.Counter
	check(d.Barrier(), "Barrier")
	// DMCSPROG_PROFILE=FILE: rank 0 writes a CPU profile of the run, in
	// which DMCS's own share is the samples with package dmcs on the stack
	// and neither mpi nor the handlers below it (see docs/dmcs.md): CPU
	// samples leave out the time a loaded machine keeps the rank waiting.
	if path := os.Getenv("DMCSPROG_PROFILE"); path != "" && d.Rank() == 0 {
		f, err := os.Create(path)
		check(err, "profile")
		runtime.SetCPUProfileRate(1000) // 1 ms samples: DMCS's share is small
		check(pprof.StartCPUProfile(f), "profile")
		defer f.Close()
		defer pprof.StopCPUProfile()
	}
	t0 := time.Now()
	x := uint64(d.Rank()*7919 + 1)
	for i := 0; i < n; i++ {
		for k := 0; k < work; k++ { // the item's computation
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
		}
		bin := int(x % uint64(binsPer*d.Size()))
		check(d.PutOpAsync(bin/binsPer, ptr.Add(8*(bin%binsPer)), one, dmcs.SumInt64, &c), "PutOpAsync")
		if i%32 == 31 {
			_, err := d.Poll()
			check(err, "Poll")
		}
	}
	check(d.WaitCounter(&c, int64(n)), "WaitCounter")
	check(c.Err(), "PutOpAsync")
	check(d.Barrier(), "Barrier")
	total := time.Since(t0)
	own, mpiT, _ := d.Times()
	var local int64
	for b := 0; b < binsPer; b++ {
		local += int64(binary.LittleEndian.Uint64(bins[8*b:]))
	}
	sum := make([]int64, 1)
	check(mpi.Allreduce(mpi.World(), []int64{local}, sum, mpi.Sum), "Allreduce")
	if sum[0] != int64(n*d.Size()) {
		log.Fatalf("rank %d: histogram holds %d items, want %d", d.Rank(), sum[0], n*d.Size())
	}
	shares := []float64{100 * own.Seconds() / total.Seconds(), 100 * mpiT.Seconds() / total.Seconds()}
	worst := make([]float64, 2)
	check(mpi.Allreduce(mpi.World(), shares, worst, mpi.Max), "Allreduce")
	if d.Rank() == 0 && os.Getenv("DMCSPROG_PROFILE") != "" {
		fmt.Printf("app: %d items x %d ranks in %v\n", n, d.Size(), total.Round(time.Millisecond))
	} else if d.Rank() == 0 {
		fmt.Printf("app: %d items x %d ranks in %v; rank 0: DMCS own %v, MPI %v; largest shares: DMCS %.2f%%, MPI %.2f%%\n",
			n, d.Size(), total.Round(time.Millisecond), own.Round(time.Microsecond), mpiT.Round(time.Microsecond), worst[0], worst[1])
	}
	check(d.Close(), "Close")
}

// hashApp is the second application: every rank computes n items (work
// rounds of arithmetic each) and adds each into a hash table spread over
// the ranks by key, with a 2-argument RSR to the key's owner ("rsr"),
// polling every 32 items; or, for the comparison, into a table of its own
// with no communication at all ("local"). It checks the tables' total and
// prints the time of the run (the slowest rank's) and the CPU time of all
// ranks, so that the two variants' difference is what DMCS costs the
// application.
func hashApp(d *dmcs.DMCS, n, work int, variant string) {
	table := map[uint64]uint64{}
	var mu sync.Mutex // the poll thread's handlers share the table
	insert := d.Register(func(_ *dmcs.DMCS, _ int, args []uint64, _ []byte) {
		mu.Lock()
		table[args[0]] += args[1]
		mu.Unlock()
	})
	check(d.Barrier(), "Barrier")
	t0, c0 := time.Now(), cpuTime()
	x := uint64(d.Rank()*7919 + 1)
	size := uint64(d.Size())
	for i := 0; i < n; i++ {
		for k := 0; k < work; k++ { // the item's computation
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
		}
		key := x % 4096
		switch variant {
		case "rsr":
			check(d.RSR(int(key%size), insert, key, 1), "RSR")
			if i%32 == 31 {
				_, err := d.Poll()
				check(err, "Poll")
			}
		case "local":
			mu.Lock()
			table[key]++
			mu.Unlock()
		default:
			log.Fatalf("dmcsprog: app variant %q: want rsr or local", variant)
		}
	}
	check(d.Close(), "Close") // returns once every RSR has been served
	el, cpu := time.Since(t0).Seconds(), (cpuTime() - c0).Seconds()
	var local int64
	for _, v := range table {
		local += int64(v)
	}
	sum := make([]int64, 1)
	check(mpi.Allreduce(mpi.World(), []int64{local}, sum, mpi.Sum), "Allreduce")
	if sum[0] != int64(n*d.Size()) {
		log.Fatalf("rank %d: hash table holds %d items, want %d", d.Rank(), sum[0], n*d.Size())
	}
	worst := make([]float64, 1)
	check(mpi.Allreduce(mpi.World(), []float64{el}, worst, mpi.Max), "Allreduce")
	cpus := make([]float64, 1)
	check(mpi.Allreduce(mpi.World(), []float64{cpu}, cpus, mpi.Sum), "Allreduce")
	if d.Rank() == 0 {
		fmt.Printf("hashapp %s: %d items x %d ranks, W=%d: %.6f s, CPU %.6f s\n", variant, n, d.Size(), work, worst[0], cpus[0])
	}
}

// cpuTime is the CPU time this process has used (every thread, user and
// system): on a loaded machine it measures work where the wall clock
// measures the scheduler.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
