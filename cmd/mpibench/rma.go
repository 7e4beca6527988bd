package main

import (
	"math"

	"github.com/adimpi/adimpi/mpi"
)

// rmaBench is the rma subcommand: one-sided communication from rank 0 to
// rank 1 in a passive-target epoch (rank 1 waits in a barrier meanwhile,
// as the target of a lock does in most programs), then every rank at once
// on rank 0. Rows:
//
//	rma_put_lat, rma_get_lat  µs per Put (Get) of size bytes followed by Flush
//	rma_put_bw, rma_get_bw    MB/s of --window Puts (Gets) followed by one Flush
//	rma_acc_rate              Mops/s of 8-byte Accumulates (Sum, int64), --window per Flush
//	rma_fop_rate              Mops/s of FetchAndOp (Sum, int64) on rank 0 by every rank at once (np = all)
//	rma_halo                  µs per step of a fence-based halo exchange: 1 KiB Put to each ring neighbour, Fence
//
// The window is allocated (WinAllocate: memory the ranks of a host map),
// or with --win-create the program's memory (WinCreate; rows
// rma_create_*). bench/c/mpibench.c runs the same pattern for MPICH and
// Open MPI.
func rmaBench(cfg *config, c *mpi.Comm) []row {
	rank, np := c.Rank(), c.Size()
	dev := mpi.DeviceName()
	maxN := max(cfg.maxSize, 2<<10)
	var w *mpi.Win
	var err error
	pre := "rma_"
	if cfg.winCreate {
		pre = "rma_create_"
		w, err = mpi.WinCreate(c, make([]byte, maxN), nil)
	} else {
		w, _, err = mpi.WinAllocate[byte](c, maxN, nil)
	}
	check(err, "window")
	var rows []row
	if rank == 0 {
		check(w.Lock(mpi.LockShared, 1, 0), "MPI_Win_lock")
		buf := make([]byte, maxN)
		fill(buf, maxN)
		for _, n := range sizes(cfg, false) {
			if n < 8 {
				continue
			}
			b := buf[:n]
			if n <= 64<<10 {
				put := func(iters int) {
					for range iters {
						check(mpi.Put(w, b, 1, 0), "MPI_Put")
						check(w.Flush(1), "MPI_Win_flush")
					}
				}
				get := func(iters int) {
					for range iters {
						check(mpi.Get(w, b, 1, 0), "MPI_Get")
						check(w.Flush(1), "MPI_Win_flush")
					}
				}
				rows = append(rows, row{pre + "put_lat", dev, 2, n, 1e6 * timePer(cfg, put, rmaWarmup), "us"})
				rows = append(rows, row{pre + "get_lat", dev, 2, n, 1e6 * timePer(cfg, get, rmaWarmup), "us"})
			}
			if n >= 4<<10 {
				win := cfg.window
				put := func(iters int) {
					for range iters {
						for range win {
							check(mpi.Put(w, b, 1, 0), "MPI_Put")
						}
						check(w.Flush(1), "MPI_Win_flush")
					}
				}
				get := func(iters int) {
					for range iters {
						for range win {
							check(mpi.Get(w, b, 1, 0), "MPI_Get")
						}
						check(w.Flush(1), "MPI_Win_flush")
					}
				}
				warm := 2
				rows = append(rows, row{pre + "put_bw", dev, 2, n, float64(n*win) / timePer(cfg, put, warm) / 1e6, "MB/s"})
				rows = append(rows, row{pre + "get_bw", dev, 2, n, float64(n*win) / timePer(cfg, get, warm) / 1e6, "MB/s"})
			}
		}
		one := []int64{1}
		acc := func(iters int) {
			for range iters {
				for range cfg.window {
					check(mpi.Accumulate(w, one, 1, 0, mpi.Sum), "MPI_Accumulate")
				}
				check(w.Flush(1), "MPI_Win_flush")
			}
		}
		rows = append(rows, row{pre + "acc_rate", dev, 2, 8, float64(cfg.window) / timePer(cfg, acc, 20) / 1e6, "Mops/s"})
		check(w.Unlock(1), "MPI_Win_unlock")
	}
	check(mpi.Barrier(c), "barrier")
	// Every rank at once: FetchAndOp on one counter of rank 0.
	ops := max(100, cfg.msgs)
	check(w.LockAll(0), "MPI_Win_lock_all")
	best := math.Inf(1)
	for range cfg.reps {
		// From the first rank's start to the last rank's end: ranks that
		// outnumber the cores take turns, and each one's own time would
		// leave the others' out.
		check(mpi.Barrier(c), "barrier")
		t0 := mpi.Wtime()
		for range ops {
			_, err := mpi.FetchAndOp(w, int64(1), 0, 0, mpi.Sum)
			check(err, "MPI_Fetch_and_op")
		}
		check(mpi.Barrier(c), "barrier")
		took := []float64{mpi.Wtime() - t0}
		all := []float64{0}
		check(mpi.Allreduce(c, took, all, mpi.Max), "allreduce")
		best = min(best, all[0])
	}
	check(w.UnlockAll(), "MPI_Win_unlock_all")
	rows = append(rows, row{pre + "fop_rate", dev, np, 8, float64(ops*np) / best / 1e6, "Mops/s"})
	// A fence-based halo exchange: every rank puts haloBytes into each
	// neighbour's window (a ring), then fences.
	const haloBytes = 1 << 10
	edge := make([]byte, haloBytes)
	left, right := (rank+np-1)%np, (rank+1)%np
	halo := func(iters int) {
		for range iters {
			check(mpi.Put(w, edge, left, haloBytes), "MPI_Put")
			check(mpi.Put(w, edge, right, 0), "MPI_Put")
			check(w.Fence(0), "MPI_Win_fence")
		}
	}
	check(w.Fence(0), "MPI_Win_fence")
	halo(20)
	iters := []int64{int64(autoIters(cfg, 0))}
	if cfg.iters == 0 {
		t0 := mpi.Wtime()
		halo(20)
		iters[0] = int64(autoIters(cfg, (mpi.Wtime()-t0)/20))
	}
	check(mpi.Bcast(c, iters, 0), "bcast") // every rank fences alike
	best = math.Inf(1)
	for range cfg.reps {
		t0 := mpi.Wtime()
		halo(int(iters[0]))
		best = min(best, (mpi.Wtime()-t0)/float64(iters[0]))
	}
	check(w.Fence(mpi.ModeNoSucceed), "MPI_Win_fence")
	rows = append(rows, row{pre + "halo", dev, np, haloBytes, 1e6 * best, "us"})
	check(w.Free(), "MPI_Win_free")
	return rows
}

// rmaWarmup is the number of untimed latency iterations before the
// iteration count is chosen: few, since a passive target's progress may
// make one take milliseconds on some MPIs.
const rmaWarmup = 50

// timePer runs f up to warm times untimed (stopping once that has taken
// cfg.minTime: an iteration may take milliseconds where a target's
// progress is slow), sizes the iteration count to cfg.minTime from it,
// and returns the best time per iteration over cfg.reps runs.
func timePer(cfg *config, f func(iters int), warm int) float64 {
	t0 := mpi.Wtime()
	done := 0
	for done < warm {
		f(1)
		done++
		if mpi.Wtime()-t0 >= cfg.minTime.Seconds() {
			break
		}
	}
	iters := autoIters(cfg, (mpi.Wtime()-t0)/float64(done))
	// Each run goes in chunks of iters/64 and stops once it has taken 4 ×
	// minTime: where iterations take 1 µs or 30 ms at the scheduler's
	// whim, a count sized from a fast warm-up would run for minutes.
	chunk := max(1, iters/64)
	best := math.Inf(1)
	for range cfg.reps {
		t0 := mpi.Wtime()
		took, done := 0.0, 0
		for done < iters {
			k := min(chunk, iters-done)
			f(k)
			done += k
			took = mpi.Wtime() - t0
			if cfg.iters == 0 && took >= 4*cfg.minTime.Seconds() {
				break
			}
		}
		best = min(best, took/float64(done))
	}
	return best
}
