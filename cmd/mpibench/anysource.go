package main

import (
	"math"

	"github.com/adimpi/adimpi/mpi"
)

// anysource is the thesis' ANY_SOURCE test: rank 0 receives M messages of
// 8 bytes from each of k senders (ranks 1..k), once with AnySource receives
// and once with specific-source receives taken round-robin over the senders.
// It reports the time per received message of both and their ratio. The np
// column is k+1, the ranks taking part; ranks above k sit idle.
func anysource(cfg *config, c *mpi.Comm) []row {
	np := c.Size()
	ks := make([]int, 0, np-1)
	if cfg.senders > 0 {
		if cfg.senders > np-1 {
			fail("anysource: --senders %d needs at least %d ranks", cfg.senders, cfg.senders+1)
		}
		ks = append(ks, cfg.senders)
	} else {
		for k := 1; k < np; k++ {
			ks = append(ks, k)
		}
	}
	var rows []row
	for _, k := range ks {
		if c.Rank() > k {
			continue
		}
		// One untimed run of each kind, then alternate the timed ones so
		// that neither kind profits from running later.
		anyRun(cfg, c, k, true)
		anyRun(cfg, c, k, false)
		bestAny, bestSpec := math.Inf(1), math.Inf(1)
		for r := 0; r < cfg.reps; r++ {
			bestAny = min(bestAny, anyRun(cfg, c, k, true))
			bestSpec = min(bestSpec, anyRun(cfg, c, k, false))
		}
		if c.Rank() == 0 {
			total := float64(k * cfg.msgs)
			a, s := bestAny/total*1e6, bestSpec/total*1e6
			dev := mpi.DeviceName()
			rows = append(rows,
				row{"anysource_any", dev, k + 1, 8, a, "us"},
				row{"anysource_specific", dev, k + 1, 8, s, "us"},
				row{"anysource_ratio", dev, k + 1, 8, a / s, "x"})
		}
	}
	return rows
}

// anyRun runs one round with k senders. Rank 0 starts the senders with a
// go message each and returns the seconds until it has received all k*M
// messages; it checks that each sender's messages arrive whole and in order.
func anyRun(cfg *config, c *mpi.Comm, k int, useAny bool) float64 {
	msg := []int64{0}
	if c.Rank() != 0 {
		_, err := mpi.Recv(c, msg, 0, tagGo)
		check(err, "anysource go recv")
		for i := 0; i < cfg.msgs; i++ {
			msg[0] = int64(i)
			check(mpi.Send(c, msg, 0, tagData), "anysource send")
		}
		return 0
	}
	next := make([]int64, k+1) // next sequence number expected from each sender
	t0 := mpi.Wtime()
	for s := 1; s <= k; s++ {
		check(mpi.Send(c, []int64{1}, s, tagGo), "anysource go send")
	}
	if useAny {
		for j := 0; j < k*cfg.msgs; j++ {
			st, err := mpi.Recv(c, msg, mpi.AnySource, tagData)
			check(err, "anysource recv ANY_SOURCE")
			if st.Source < 1 || st.Source > k || msg[0] != next[st.Source] {
				fail("anysource: ANY_SOURCE receive %d got %d from rank %d (want rank 1..%d, its message %d)", j, msg[0], st.Source, k, next[max(0, min(st.Source, k))])
			}
			next[st.Source]++
		}
	} else {
		for i := 0; i < cfg.msgs; i++ {
			for s := 1; s <= k; s++ {
				_, err := mpi.Recv(c, msg, s, tagData)
				check(err, "anysource recv specific")
				if msg[0] != int64(i) {
					fail("anysource: message %d from rank %d carried %d", i, s, msg[0])
				}
			}
		}
	}
	return mpi.Wtime() - t0
}
