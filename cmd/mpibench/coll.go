package main

import (
	"fmt"
	"math"
	"os"

	"github.com/adimpi/adimpi/mpi"
)

// collCase is one collective benchmark: a name for the CSV, the size column
// (bytes per call; for Alltoall bytes per pair of ranks), how many untimed
// calls precede the timing, and the call itself. check runs the collective
// once on fresh data and reports whether every rank got the right result.
type collCase struct {
	bench  string
	size   int
	warmup int
	call   func() error
	check  func() error
}

// collCases builds the collectives that mpibench coll times, on c; large
// is the size in bytes of the large Allreduce (--allreduce-large).
func collCases(c *mpi.Comm, large int) []collCase {
	rank, np := c.Rank(), c.Size()
	var cases []collCase

	cases = append(cases, collCase{
		bench: "coll_barrier", size: 0, warmup: 200,
		call:  func() error { return mpi.Barrier(c) },
		check: func() error { return mpi.Barrier(c) },
	})

	sizes := []int{8, 1 << 20, large} // 1 MiB: the figure issue 25 compares
	if large == 1<<20 {
		sizes = sizes[:2]
	}
	for _, bytes := range sizes {
		n := bytes / 8
		send, recv := make([]float64, n), make([]float64, n)
		// Element i of rank r is (i mod 13) + r: the sums stay exact
		// integers, and a dropped or repeated contribution shows.
		for i := range send {
			send[i] = float64(i%13 + rank)
		}
		warm := 200
		if bytes > 64<<10 {
			warm = 3
		}
		cases = append(cases, collCase{
			bench: "coll_allreduce", size: bytes, warmup: warm,
			call: func() error { return mpi.Allreduce(c, send, recv, mpi.Sum) },
			check: func() error {
				clear(recv)
				if err := mpi.Allreduce(c, send, recv, mpi.Sum); err != nil {
					return err
				}
				for i, v := range recv {
					if want := float64(np*(i%13) + np*(np-1)/2); v != want {
						return fmt.Errorf("allreduce %d B: element %d is %g, want %g", bytes, i, v, want)
					}
				}
				return nil
			},
		})
	}

	cases = append(cases, bcastCase(c, "coll_bcast", 1<<20, 10))

	{
		const block = 64 << 10
		send, recv := make([]byte, np*block), make([]byte, np*block)
		// The block from rank s to rank d carries byte s*31 + d*7 + i.
		pattern := func(s, d, i int) byte { return byte(s*31 + d*7 + i) }
		for d := 0; d < np; d++ {
			for i := 0; i < block; i++ {
				send[d*block+i] = pattern(rank, d, i)
			}
		}
		cases = append(cases, collCase{
			bench: "coll_alltoall", size: block, warmup: 10,
			call: func() error { return mpi.Alltoall(c, send, recv) },
			check: func() error {
				clear(recv)
				if err := mpi.Alltoall(c, send, recv); err != nil {
					return err
				}
				for s := 0; s < np; s++ {
					for i := 0; i < block; i++ {
						if got, want := recv[s*block+i], pattern(s, rank, i); got != want {
							return fmt.Errorf("alltoall: byte %d of the block from rank %d is %#x, want %#x", i, s, got, want)
						}
					}
				}
				return nil
			},
		})
	}
	return cases
}

// collTime runs iters calls of cc after a barrier and returns, on rank 0,
// the largest over the ranks of the average seconds per call (other ranks
// get 0).
func collTime(c *mpi.Comm, cc collCase, iters int) float64 {
	check(mpi.Barrier(c), cc.bench+": barrier")
	t0 := mpi.Wtime()
	for i := 0; i < iters; i++ {
		check(cc.call(), cc.bench)
	}
	per := []float64{(mpi.Wtime() - t0) / float64(iters)}
	maxPer := []float64{0}
	check(mpi.Reduce(c, per, maxPer, mpi.Max, 0), cc.bench+": reduce of the times")
	return maxPer[0]
}

// collBench times the collectives of collCases in the manner of the OSU
// collective benchmarks: one checked call (unless --check=false), one timed
// call that bounds the warm-up, warm-up calls that give rank 0 an estimate
// of the time per call, from which it picks an iteration count (enough for
// --min-time, unless --iters is set) and broadcasts it; then --reps timed runs of
// that many calls, each starting after a barrier and measured as the largest
// over the ranks of the average time per call. The best run is reported, in µs.
func collBench(cfg *config, c *mpi.Comm, cases []collCase) []row {
	var rows []row
	for _, cc := range cases {
		if cfg.checkBuf {
			if err := cc.check(); err != nil {
				fail("%s: wrong result: %v", cc.bench, err)
			}
		}
		// One timed call sizes the warm-up: at most cc.warmup calls, and
		// no more than fill --min-time (oversubscribed runs can take
		// many milliseconds per call).
		first := collTime(c, cc, 1)
		n := []int64{0}
		if c.Rank() == 0 {
			n[0] = int64(min(cc.warmup, int(cfg.minTime.Seconds()/max(first, 1e-9))+1))
		}
		check(mpi.Bcast(c, n, 0), cc.bench+": bcast of the warm-up count")
		est := collTime(c, cc, int(n[0]))
		if c.Rank() == 0 {
			n[0] = int64(autoIters(cfg, est))
		}
		check(mpi.Bcast(c, n, 0), cc.bench+": bcast of the iteration count")
		best := math.Inf(1)
		for r := 0; r < cfg.reps; r++ {
			best = min(best, collTime(c, cc, int(n[0])))
		}
		if c.Rank() == 0 {
			rows = append(rows, row{cc.bench, mpi.DeviceName(), c.Size(), cc.size, best * 1e6, "us"})
		}
	}
	return rows
}

// bcastCases is the bcast subcommand's sweep: Bcast from rank 0 of
// --min-size (at least 8) to --max-size bytes, every power of 8 between,
// each checked like coll's. Run with ADIMPI_NATIVE_COLL=off to time the
// core's point-to-point algorithms instead of a device's own (fm's
// multidestination streams, netvm's boards).
func bcastCases(cfg *config, c *mpi.Comm) []collCase {
	var cases []collCase
	for n := 8; n <= cfg.maxSize; n *= 8 {
		if n < cfg.minSize {
			continue
		}
		cases = append(cases, bcastCase(c, "bcast", n, 100))
	}
	return cases
}

// bcastCase is a Bcast of n bytes from rank 0, checked against fill's
// pattern on every rank.
func bcastCase(c *mpi.Comm, bench string, n, warmup int) collCase {
	buf := make([]byte, n)
	return collCase{
		bench: bench, size: n, warmup: warmup,
		call: func() error { return mpi.Bcast(c, buf, 0) },
		check: func() error {
			if c.Rank() == 0 {
				fill(buf, n)
			} else {
				clear(buf)
			}
			if err := mpi.Bcast(c, buf, 0); err != nil {
				return err
			}
			return verify(buf, n)
		},
	}
}

// runColl is the coll subcommand (or, with sweep, the bcast one): it starts
// MPI, times the collectives on the world communicator (or, with --comm
// dup, on a duplicate of it) and prints the rows on rank 0.
func runColl(cfg *config, sweep bool) {
	if err := mpi.Init(); err != nil {
		fmt.Fprintln(os.Stderr, "mpibench:", err)
		os.Exit(1)
	}
	world := mpi.World()
	c := world
	switch cfg.comm {
	case "world":
	case "dup":
		var err error
		if c, err = world.Dup(); err != nil {
			fmt.Fprintln(os.Stderr, "mpibench:", err)
			os.Exit(1)
		}
	default:
		fmt.Fprintf(os.Stderr, "mpibench: --comm %q: want world or dup\n", cfg.comm)
		os.Exit(2)
	}
	cases := collCases(c, cfg.allreduceLarge)
	if sweep {
		cases = bcastCases(cfg, c)
	}
	rows := collBench(cfg, c, cases)
	if cfg.comm == "dup" {
		// Rows of their own beside the world's in one results file
		// (mpibench compare runs both).
		for i := range rows {
			rows[i].bench += "_dup"
		}
	}
	if world.Rank() == 0 {
		printRows(os.Stdout, cfg, rows)
	}
	if err := mpi.Finalize(); err != nil {
		fmt.Fprintln(os.Stderr, "mpibench:", err)
		os.Exit(1)
	}
}
