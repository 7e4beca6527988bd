package main

// The overlap subcommand: how much of a message exchange hides behind a
// computation (the overlap study of "Asynchronous Communications in MPI -
// the BIP/Myrinet Approach", Figs. 3–9).
//
// Ranks 0 and 1 exchange a message of m bytes (both send, both receive) for
// each m in overlapSizes, and measure, per iteration and as the largest over
// the two ranks of the best of --reps runs:
//
//	t_comm  the exchange alone, blocking: Sendrecv
//	t_comp  the computation alone: a calibrated busy loop of about C
//	t_ovl   Irecv + Isend, the computation, then Waitall
//
// and report overlap = (t_comm + t_comp − t_ovl) / t_comm clamped to [0, 1]:
// the share of the communication time hidden behind the computation. C is
// fixed (500 µs by default), longer than a 1 MiB exchange takes on netvm,
// so every size can in principle be hidden entirely; the same C is
// used by bench/c/overlap.c, which makes the libraries comparable.
//
// The busy loop is a fixed amount of work (rounds of an integer recurrence,
// calibrated once to C), not a wall-clock wait: if anything else — a progress
// goroutine, the peer rank — takes the core away, the computation gets longer
// and t_ovl shows it.
//
// Variants (positional words after "overlap"; default both):
//
//	plain   the computation does not call MPI         → overlap_plain
//	iprobe  the "overlap trick": every ~10 µs of work the loop calls
//	        Iprobe(world, AnySource, AnyTag), which drives the device
//	                                                  → overlap_iprobe
//
// Run under mpirun -async-progress (or ADIMPI_ASYNC_PROGRESS=1) the device
// column reads netvm+async and the plain variant is reported as
// overlap_async (iprobe as overlap_async_iprobe). Further rows: overlap_tcomm,
// overlap_tcomp and overlap_tovl_<variant> in µs, and overlap_latency, the
// one-way latency of an 8 B blocking ping-pong in µs, from which
// summarize-overlap derives latency_async_ratio (async on / off).
//
// Other words: compute=DURATION (C, default 500us) and poll=DURATION (the
// Iprobe interval, default 10us). The usual flags --csv, --reps, --iters,
// --min-time, --min-size, --max-size and --check apply.

import (
	"fmt"
	"math"
	"os"
	"strings"
	"time"

	"github.com/adimpi/adimpi/mpi"
)

// Tags of the overlap benchmark's messages.
const (
	tagOverlap = 20 // exchange payload
	tagOvlPing = 21 // latency ping-pong
)

// overlapSizes are the message sizes of the study.
var overlapSizes = []int{0, 1 << 10, 4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20}

// overlapOpts are the settings given as words after "overlap".
type overlapOpts struct {
	variants []string      // "plain", "iprobe"
	compute  time.Duration // C
	poll     time.Duration // Iprobe interval of the iprobe variant
}

// parseOverlapArgs reads the words after "overlap".
func parseOverlapArgs(args []string) (overlapOpts, error) {
	o := overlapOpts{compute: 500 * time.Microsecond, poll: 10 * time.Microsecond}
	for _, a := range args {
		key, val, isKV := strings.Cut(a, "=")
		switch {
		case !isKV && (a == "plain" || a == "iprobe"):
			o.variants = append(o.variants, a)
		case isKV && (key == "compute" || key == "poll"):
			d, err := time.ParseDuration(val)
			if err != nil || d <= 0 {
				return o, fmt.Errorf("%s: want a positive duration such as 500us", a)
			}
			if key == "compute" {
				o.compute = d
			} else {
				o.poll = d
			}
		default:
			return o, fmt.Errorf("unknown word %q (want plain, iprobe, compute=DURATION or poll=DURATION)", a)
		}
	}
	if len(o.variants) == 0 {
		o.variants = []string{"plain", "iprobe"}
	}
	return o, nil
}

// spinSink keeps the busy loop's result alive so the compiler cannot drop it.
var spinSink uint64

// spinWork runs n rounds of a 64-bit linear congruential recurrence: a chain
// of dependent multiply-adds, about a nanosecond each, touching no memory.
func spinWork(n int) {
	x := spinSink | 1
	for i := 0; i < n; i++ {
		x = x*6364136223846793005 + 1442695040888963407
	}
	spinSink = x
}

// spinRate measures the busy loop's rounds per second, the best of many
// short tries (about 0.25 ms each) so that a descheduling does not spoil it.
func spinRate() float64 {
	const rounds = 1 << 18
	spinWork(1 << 22) // warm up the clock frequency
	best := 0.0
	for range 20 {
		t0 := time.Now()
		spinWork(rounds)
		if dt := time.Since(t0).Seconds(); dt > 0 {
			best = max(best, rounds/dt)
		}
	}
	return best
}

// computation is the calibrated busy loop of the study.
type computation struct {
	rounds int       // rounds for C
	chunk  int       // rounds between two Iprobes (iprobe variant)
	comm   *mpi.Comm // the communicator Iprobe looks at
}

// run does the work; with probe, it calls Iprobe every chunk rounds.
func (w *computation) run(probe bool) {
	if !probe {
		spinWork(w.rounds)
		return
	}
	for done := 0; done < w.rounds; done += w.chunk {
		spinWork(min(w.chunk, w.rounds-done))
		_, _, err := mpi.Iprobe(w.comm, mpi.AnySource, mpi.AnyTag)
		check(err, "overlap: iprobe")
	}
}

// ovlTime runs iters calls of fn after a barrier and returns, on both ranks,
// the largest over the ranks of the average seconds per call.
func ovlTime(c *mpi.Comm, iters int, fn func()) float64 {
	check(mpi.Barrier(c), "overlap: barrier")
	t0 := mpi.Wtime()
	for i := 0; i < iters; i++ {
		fn()
	}
	per := []float64{(mpi.Wtime() - t0) / float64(iters)}
	out := []float64{0}
	check(mpi.Allreduce(c, per, out, mpi.Max), "overlap: allreduce of the times")
	return out[0]
}

// ovlIters estimates the time per call of fn from a few untimed calls and
// returns an iteration count enough for --min-time (or --iters). Every rank
// gets the same count, since ovlTime hands them the same estimate.
func ovlIters(cfg *config, c *mpi.Comm, warm int, fn func()) int {
	ovlTime(c, 1, fn)
	return autoIters(cfg, ovlTime(c, warm, fn))
}

// ovlBest times several functions, interleaved: each of --reps rounds runs
// every function its iteration count, and each function's best round is
// returned. Interleaving exposes t_comm, t_comp and t_ovl to the same
// background load (a shared machine's load varies by the second).
func ovlBest(cfg *config, c *mpi.Comm, warm int, fns ...func()) []float64 {
	iters := make([]int, len(fns))
	best := make([]float64, len(fns))
	for i, fn := range fns {
		iters[i] = ovlIters(cfg, c, warm, fn)
		best[i] = math.Inf(1)
	}
	for range cfg.reps {
		for i, fn := range fns {
			best[i] = min(best[i], ovlTime(c, iters[i], fn))
		}
	}
	return best
}

// overlapRatio is the hidden share of the communication time, in [0, 1].
func overlapRatio(tcomm, tcomp, tovl float64) float64 {
	if tcomm <= 0 {
		return 0
	}
	return min(max((tcomm+tcomp-tovl)/tcomm, 0), 1)
}

// overlapBench runs the study on the two ranks of c and returns the rows
// (which rank 0 prints).
func overlapBench(cfg *config, c *mpi.Comm, o overlapOpts) []row {
	rank := c.Rank()
	peer := 1 - rank
	device := mpi.DeviceName()
	prefix := "overlap_"
	if mpi.AsyncProgress() {
		device += "+async"
		prefix = "overlap_async_"
	}
	name := func(variant string) string {
		if prefix == "overlap_async_" && variant == "plain" {
			return "overlap_async"
		}
		return prefix + variant
	}

	// Rank 0's calibration is everyone's, so the ranks do equal work.
	rate := []float64{spinRate()}
	check(mpi.Bcast(c, rate, 0), "overlap: bcast of the calibration")
	w := &computation{
		rounds: max(1, int(rate[0]*o.compute.Seconds())),
		chunk:  max(1, int(rate[0]*o.poll.Seconds())),
		comm:   c,
	}

	var rows []row
	add := func(bench string, size int, v float64, unit string) {
		rows = append(rows, row{bench, device, c.Size(), size, v, unit})
	}
	add("overlap_latency", 8, ovlLatency(cfg, c)*1e6, "us")

	reqs := make([]*mpi.Request, 2)
	for _, n := range overlapSizes {
		if n < cfg.minSize || n > cfg.maxSize {
			continue
		}
		sbuf, rbuf := make([]byte, n), make([]byte, n)
		fill(sbuf, n)
		blocking := func() {
			_, err := mpi.Sendrecv(c, sbuf, peer, tagOverlap, rbuf, peer, tagOverlap)
			check(err, "overlap: sendrecv")
		}
		overlapped := func(probe bool) []mpi.Status {
			var err error
			reqs[0], err = mpi.Irecv(c, rbuf, peer, tagOverlap)
			check(err, "overlap: irecv")
			reqs[1], err = mpi.Isend(c, sbuf, peer, tagOverlap)
			check(err, "overlap: isend")
			w.run(probe)
			sts, err := mpi.Waitall(reqs)
			check(err, "overlap: waitall")
			return sts
		}
		if cfg.checkBuf {
			for _, probe := range []bool{false, true} {
				clear(rbuf)
				if got := overlapped(probe)[0].Bytes(); got != n {
					fail("overlap: message of size %d brought %d bytes", n, got)
				}
				check(verify(rbuf, n), "overlap: wrong data after Irecv")
			}
		}
		warm := 20
		if n >= 256<<10 {
			warm = 5
		}
		fns := []func(){blocking, func() { w.run(false) }}
		for _, v := range o.variants {
			probe := v == "iprobe"
			fns = append(fns, func() { overlapped(probe) })
		}
		t := ovlBest(cfg, c, warm, fns...)
		tcomm, tcomp := t[0], t[1]
		add("overlap_tcomm", n, tcomm*1e6, "us")
		add("overlap_tcomp", n, tcomp*1e6, "us")
		for i, v := range o.variants {
			tovl := t[2+i]
			add("overlap_tovl_"+strings.TrimPrefix(name(v), "overlap_"), n, tovl*1e6, "us")
			add(name(v), n, overlapRatio(tcomm, tcomp, tovl), "x")
		}
	}
	return rows
}

// ovlLatency is the one-way latency, in seconds, of an 8 B blocking
// ping-pong between ranks 0 and 1 (round trip / 2, best of --reps).
func ovlLatency(cfg *config, c *mpi.Comm) float64 {
	rank := c.Rank()
	buf := make([]byte, 8)
	round := func() {
		if rank == 0 {
			check(mpi.Send(c, buf, 1, tagOvlPing), "overlap: ping send")
			_, err := mpi.Recv(c, buf, 1, tagOvlPing)
			check(err, "overlap: ping recv")
		} else if rank == 1 {
			_, err := mpi.Recv(c, buf, 0, tagOvlPing)
			check(err, "overlap: ping recv")
			check(mpi.Send(c, buf, 0, tagOvlPing), "overlap: ping send")
		}
	}
	return ovlBest(cfg, c, 1000, round)[0] / 2
}

// runOverlap is the overlap subcommand: it starts MPI (with async progress if
// mpirun -async-progress asked for it), runs the study and prints on rank 0.
func runOverlap(cfg *config, args []string) {
	o, err := parseOverlapArgs(args)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mpibench overlap:", err)
		os.Exit(2)
	}
	if err := mpi.Init(); err != nil {
		fmt.Fprintln(os.Stderr, "mpibench:", err)
		os.Exit(1)
	}
	world := mpi.World()
	if world.Size() != 2 {
		fail("overlap needs exactly 2 ranks (run it under mpirun -np 2)")
	}
	rows := overlapBench(cfg, world, o)
	if world.Rank() == 0 {
		printRows(os.Stdout, cfg, rows)
	}
	if err := mpi.Finalize(); err != nil {
		fmt.Fprintln(os.Stderr, "mpibench:", err)
		os.Exit(1)
	}
}
