package main

import (
	"fmt"
	"math"
	"slices"

	"github.com/adimpi/adimpi/mpi"
)

// tagRate is the rate benchmark's payload tag (its acknowledgements use tagAck).
const tagRate = 8

// ratePattern names who sends to whom in the rate benchmark.
type ratePattern string

// The patterns: pairs (osu_mbw_mr: rank i < np/2 sends to i+np/2), fanin
// (every rank sends to rank 0, which receives a window from each in turn)
// and ring (rank i sends to i+1 and receives from i-1).
const (
	ratePairs ratePattern = "pairs"
	rateFanin ratePattern = "fanin"
	rateRing  ratePattern = "ring"
)

// rateRoles are one rank's peers in a pattern: whom it sends windows to and
// whom it receives windows from.
type rateRoles struct {
	to, from []int
}

// roles is rank's part in pattern p of np ranks.
func (p ratePattern) roles(rank, np int) (rateRoles, error) {
	var r rateRoles
	switch p {
	case ratePairs:
		if np%2 != 0 {
			return r, fmt.Errorf("rate --pattern pairs needs an even number of ranks, not %d", np)
		}
		if half := np / 2; rank < half {
			r.to = []int{rank + half}
		} else {
			r.from = []int{rank - half}
		}
	case rateFanin:
		if rank == 0 {
			for s := 1; s < np; s++ {
				r.from = append(r.from, s)
			}
		} else {
			r.to = []int{0}
		}
	case rateRing:
		r.to, r.from = []int{(rank + 1) % np}, []int{(rank - 1 + np) % np}
	default:
		return r, fmt.Errorf("unknown rate pattern %q (pairs, fanin, ring)", p)
	}
	return r, nil
}

// rateBench is the message rate in the manner of osu_mbw_mr: every sender
// of the pattern starts windows of --window Isends of one size to its
// receiver, which posts as many Irecvs, both Waitall, and the receiver
// acknowledges each window with 4 bytes. It reports the job's aggregate
// rate, in MB/s (rows rate_PATTERN) and in millions of messages per second
// (rows rate_PATTERN_mmps), and, on a device that predicts senders (netvm's
// predict option), the hit ratio of the prediction over the timed windows,
// summed over the ranks (rows rate_PATTERN_predict_hits, a ratio in [0, 1]).
// Requests and statuses are the program's arrays, as in the C twin.
func rateBench(cfg *config, c *mpi.Comm, pattern ratePattern) []row {
	rank, np := c.Rank(), c.Size()
	roles, err := pattern.roles(rank, np)
	if err != nil {
		fail("%v", err)
	}
	win := cfg.window
	nreq := win * (len(roles.to) + len(roles.from))
	own := make([]mpi.Request, nreq)
	reqs := make([]*mpi.Request, nreq)
	for i := range own {
		reqs[i] = &own[i]
	}
	ack := make([]byte, 4)
	ackReqs := make([]mpi.Request, len(roles.to)+len(roles.from))
	ackPtrs := make([]*mpi.Request, len(ackReqs))
	for i := range ackReqs {
		ackPtrs[i] = &ackReqs[i]
	}
	senders := 0
	if len(roles.to) > 0 {
		senders = 1 // this rank sends; the job's message count sums the senders' windows
	}
	nsend := make([]int64, 1)
	check(mpi.Allreduce(c, []int64{int64(senders)}, nsend, mpi.Sum), "rate: count senders")
	name := "rate_" + string(pattern)
	var rows []row
	for _, n := range sizes(cfg, false) {
		sbuf, rbuf := make([]byte, n), make([]byte, n*max(len(roles.from), 1))
		fill(sbuf, n)
		// windows runs count windows; with ph non-nil it also times each
		// window's three phases on this rank into ph[0..2][i]: starting
		// the window's Irecvs and Isends, their Waitall, the
		// acknowledgement.
		windows := func(count int, ph *[3][]float64) {
			for i := 0; i < count; i++ {
				var t0 float64
				if ph != nil {
					t0 = mpi.Wtime()
				}
				k := 0
				for j, src := range roles.from {
					b := rbuf[j*n : (j+1)*n]
					for w := 0; w < win; w++ {
						check(mpi.IrecvIn(reqs[k], c, b, src, tagRate), "rate irecv")
						k++
					}
				}
				for _, dst := range roles.to {
					for w := 0; w < win; w++ {
						check(mpi.IsendIn(reqs[k], c, sbuf, dst, tagRate), "rate isend")
						k++
					}
				}
				var t1, t2 float64
				if ph != nil {
					t1 = mpi.Wtime()
				}
				check(mpi.WaitallInto(reqs, nil), "rate waitall")
				if ph != nil {
					t2 = mpi.Wtime()
				}
				// The acknowledgements: receivers send, senders receive.
				a := 0
				for _, dst := range roles.to {
					check(mpi.IrecvIn(ackPtrs[a], c, ack, dst, tagAck), "rate ack irecv")
					a++
				}
				for _, src := range roles.from {
					check(mpi.IsendIn(ackPtrs[a], c, ack, src, tagAck), "rate ack send")
					a++
				}
				check(mpi.WaitallInto(ackPtrs, nil), "rate ack waitall")
				if ph != nil {
					ph[0][i], ph[1][i], ph[2][i] = t1-t0, t2-t1, mpi.Wtime()-t2
				}
			}
		}
		windows(1, nil)
		for j := range roles.from {
			check(verify(rbuf[j*n:(j+1)*n], n), "rate: wrong data")
		}
		warm := bwWarmup(n)
		t0 := mpi.Wtime()
		windows(warm-1, nil)
		iters := shareItersAll(cfg, c, (mpi.Wtime()-t0)/float64(warm-1))
		hits0, msgs0 := predictCounters()
		best := math.Inf(1)
		for r := 0; r < cfg.reps; r++ {
			check(mpi.Barrier(c), "rate barrier")
			t0 := mpi.Wtime()
			windows(iters, nil)
			el, slowest := []float64{mpi.Wtime() - t0}, []float64{0}
			// The job's time is its slowest rank's.
			check(mpi.Allreduce(c, el, slowest, mpi.Max), "rate: time")
			best = min(best, slowest[0])
		}
		msgs := float64(nsend[0]) * float64(win) * float64(iters)
		rows = append(rows,
			row{name, mpi.DeviceName(), np, n, msgs * float64(n) / best / 1e6, "MB/s"},
			row{name + "_mmps", mpi.DeviceName(), np, n, msgs / best / 1e6, "Mmsg/s"})
		if cfg.phases {
			rows = append(rows, ratePhases(c, name, n, iters, windows)...)
		}
		hits1, msgs1 := predictCounters()
		pred := []int64{0, 0}
		check(mpi.Allreduce(c, []int64{hits1 - hits0, msgs1 - msgs0}, pred, mpi.Sum), "rate: predictor counters")
		if pred[1] > 0 {
			rows = append(rows, row{name + "_predict_hits", mpi.DeviceName(), np, n, float64(pred[0]) / float64(pred[1]), "ratio"})
		}
	}
	return rows
}

// predictCounters reads the device's prediction counters (zero on a
// device without them).
func predictCounters() (hits, msgs int64) {
	c := mpi.Counters()
	return c["predict_hits"], c["predict_messages"]
}

// shareItersAll is shareIters for every rank of c: rank 0's estimate, broadcast.
func shareItersAll(cfg *config, c *mpi.Comm, per float64) int {
	buf := []int64{0}
	if c.Rank() == 0 {
		buf[0] = int64(autoIters(cfg, per))
	}
	check(mpi.Bcast(c, buf, 0), "rate: share iterations")
	return int(buf[0])
}

// ratePhases runs one more repetition of iters windows with every window's
// phases timed (--phases) and returns, for every rank, the median of each
// phase in ns per window: rows PATTERN_start_rR (its Irecvs and Isends
// started), PATTERN_waitall_rR (their Waitall) and PATTERN_ack_rR (the
// acknowledgement). A rank whose phases add up to the window with little
// waiting in them is the one that sets the rate.
func ratePhases(c *mpi.Comm, name string, n, iters int, windows func(int, *[3][]float64)) []row {
	var ph [3][]float64
	for j := range ph {
		ph[j] = make([]float64, iters)
	}
	check(mpi.Barrier(c), "rate phases barrier")
	windows(iters, &ph)
	np, rank := c.Size(), c.Rank()
	mine := make([]float64, 3*np)
	for j := range ph {
		slices.Sort(ph[j])
		mine[3*rank+j] = ph[j][iters/2] * 1e9
	}
	all := make([]float64, 3*np)
	check(mpi.Allreduce(c, mine, all, mpi.Sum), "rate: phases")
	var rows []row
	for r := 0; r < np; r++ {
		for j, ph := range []string{"start", "waitall", "ack"} {
			rows = append(rows, row{fmt.Sprintf("%s_%s_r%d", name, ph, r), mpi.DeviceName(), np, n, all[3*r+j], "ns/window"})
		}
	}
	return rows
}
