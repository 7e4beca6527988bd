package main

import (
	"math"
	"slices"

	"github.com/adimpi/adimpi/datatype"
	"github.com/adimpi/adimpi/mpi"
)

// Tags of the benchmarks' messages.
const (
	tagPing = 1 // pingpong payload
	tagCtl  = 2 // iteration count chosen by rank 0
	tagBW   = 3 // bw payload
	tagAck  = 4 // bw window acknowledgement
	tagData = 5 // anysource payload
	tagGo   = 6 // anysource start signal
)

// shareIters turns rank 0's per-iteration estimate into an iteration count
// and sends it to rank 1 (there are no collectives yet), so both loop alike.
func shareIters(cfg *config, c *mpi.Comm, per float64) int {
	buf := []int64{0}
	if c.Rank() == 0 {
		buf[0] = int64(autoIters(cfg, per))
		check(mpi.Send(c, buf, 1, tagCtl), "send iteration count")
	} else {
		_, err := mpi.Recv(c, buf, 0, tagCtl)
		check(err, "receive iteration count")
	}
	return int(buf[0])
}

// pingWarmup is the number of untimed round trips before a size's timing.
func pingWarmup(n int) int {
	switch {
	case n <= 8<<10:
		return 1000
	case n <= 64<<10:
		return 200
	case n <= 1<<20:
		return 20
	default:
		return 4
	}
}

// pingpong measures one-way latency (round trip / 2) between ranks 0 and 1
// with blocking Send and Recv; other ranks sit it out.
func pingpong(cfg *config, c *mpi.Comm) []row {
	rank := c.Rank()
	if rank > 1 {
		return nil
	}
	var rows []row
	jobWarmup(c)
	for _, n := range sizes(cfg, true) {
		sbuf, rbuf := make([]byte, n), make([]byte, n)
		fill(sbuf, n)
		round := func(iters int) {
			for i := 0; i < iters; i++ {
				roundTrip(c, sbuf, rbuf)
			}
		}
		if cfg.checkBuf {
			pingCheck(c, sbuf, rbuf, n)
		}
		warm := pingWarmup(n)
		round(1)
		t0 := mpi.Wtime()
		round(warm - 1)
		iters := shareIters(cfg, c, (mpi.Wtime()-t0)/float64(warm-1))
		best := math.Inf(1)
		for r := 0; r < cfg.reps; r++ {
			t0 := mpi.Wtime()
			round(iters)
			best = min(best, mpi.Wtime()-t0)
		}
		rows = append(rows, row{"pingpong", mpi.DeviceName(), c.Size(), n, best / float64(iters) / 2 * 1e6, "us"})
		if cfg.dist {
			rows = append(rows, pingDist(c, sbuf, rbuf, iters)...)
		}
	}
	return rows
}

// jobWarmupSeconds is how long ranks 0 and 1 exchange untimed round trips
// before the first size: a process's first milliseconds pay for its start
// (Go's runtime monitor wakes every few tens of µs then), which would
// otherwise land on the smallest size alone. bench/c/mpibench.c does the same.
const jobWarmupSeconds = 0.03

// jobWarmup has rank 0 send one-byte round trips to rank 1 for
// jobWarmupSeconds; the byte says whether another follows.
func jobWarmup(c *mpi.Comm) {
	b := []byte{1}
	if c.Rank() == 0 {
		for t0 := mpi.Wtime(); b[0] == 1; {
			if mpi.Wtime()-t0 >= jobWarmupSeconds {
				b[0] = 0
			}
			check(mpi.Send(c, b, 1, tagPing), "pingpong warm-up send")
			_, err := mpi.Recv(c, b[:1], 1, tagPing)
			check(err, "pingpong warm-up recv")
		}
		return
	}
	for b[0] == 1 {
		_, err := mpi.Recv(c, b, 0, tagPing)
		check(err, "pingpong warm-up recv")
		check(mpi.Send(c, b, 0, tagPing), "pingpong warm-up send")
	}
}

// pingCheck sends the pattern from rank 0 to rank 1 and back and checks it
// arrived whole both ways.
func pingCheck(c *mpi.Comm, sbuf, rbuf []byte, n int) {
	clear(rbuf)
	if c.Rank() == 0 {
		check(mpi.Send(c, sbuf, 1, tagPing), "pingpong check send")
		st, err := mpi.Recv(c, rbuf, 1, tagPing)
		check(err, "pingpong check recv")
		if st.Bytes() != n {
			fail("pingpong: echo of size %d brought %d bytes", n, st.Bytes())
		}
		check(verify(rbuf, n), "pingpong: rank 0 got back wrong data")
		return
	}
	st, err := mpi.Recv(c, rbuf, 0, tagPing)
	check(err, "pingpong check recv")
	if st.Bytes() != n {
		fail("pingpong: message of size %d brought %d bytes", n, st.Bytes())
	}
	check(verify(rbuf, n), "pingpong: rank 1 got wrong data")
	check(mpi.Send(c, rbuf, 0, tagPing), "pingpong check send")
}

// bwWarmup is the number of untimed windows before a size's timing.
func bwWarmup(n int) int {
	switch {
	case n <= 64<<10:
		return 20
	case n <= 1<<20:
		return 4
	default:
		return 2
	}
}

// bandwidth measures streaming bandwidth like osu_bw: rank 0 starts a window
// of Isends, rank 1 a window of Irecvs into one buffer, both Waitall, and rank
// 1 acknowledges the window with 4 bytes. Like the C twin's MPI_Request and
// MPI_Status arrays, the requests and statuses are arrays the program owns
// (IsendIn, IrecvIn, WaitallInto).
func bandwidth(cfg *config, c *mpi.Comm) []row {
	rank := c.Rank()
	if rank > 1 {
		return nil
	}
	var rows []row
	// The requests and statuses are the caller's arrays, as in the C
	// twin: nothing is allocated per message.
	own := make([]mpi.Request, cfg.window)
	reqs := make([]*mpi.Request, cfg.window)
	for w := range own {
		reqs[w] = &own[w]
	}
	sts := make([]mpi.Status, cfg.window)
	ack := make([]byte, 4)
	for _, n := range sizes(cfg, false) {
		buf := make([]byte, n)
		if rank == 0 {
			fill(buf, n)
		}
		windows := func(count int) {
			for i := 0; i < count; i++ {
				var err error
				if rank == 0 {
					for w := range reqs {
						check(mpi.IsendIn(reqs[w], c, buf, 1, tagBW), "bw isend")
					}
					check(mpi.WaitallInto(reqs, nil), "bw waitall")
					_, err = mpi.Recv(c, ack, 1, tagAck)
					check(err, "bw ack recv")
				} else {
					for w := range reqs {
						check(mpi.IrecvIn(reqs[w], c, buf, 0, tagBW), "bw irecv")
					}
					check(mpi.WaitallInto(reqs, sts), "bw waitall")
					for _, st := range sts {
						if st.Bytes() != n {
							fail("bw: message of size %d brought %d bytes", n, st.Bytes())
						}
					}
					check(mpi.Send(c, ack, 0, tagAck), "bw ack send")
				}
			}
		}
		bench, perWindow := "bw", cfg.window
		if cfg.touch {
			// One message per window: a send buffer may not change while in flight.
			b, want := mpi.Typed(buf, n, datatype.Byte), patternSum(n, n, n, n)
			windows = func(count int) { touchLoop(c, b, buf, n, n, n, want, count, tagBW) }
			bench, perWindow = "bw_touch", 1
		}
		warm := bwWarmup(n)
		windows(1)
		if rank == 1 && cfg.checkBuf {
			check(verify(buf, n), "bw: rank 1 got wrong data")
		}
		t0 := mpi.Wtime()
		windows(warm - 1)
		iters := shareIters(cfg, c, (mpi.Wtime()-t0)/float64(warm-1))
		best := math.Inf(1)
		for r := 0; r < cfg.reps; r++ {
			t0 := mpi.Wtime()
			windows(iters)
			best = min(best, mpi.Wtime()-t0)
		}
		mbps := float64(n) * float64(perWindow) * float64(iters) / best / 1e6
		rows = append(rows, row{bench, mpi.DeviceName(), c.Size(), n, mbps, "MB/s"})
	}
	return rows
}

// roundTrip is one ping-pong between ranks 0 and 1 of c: rank 0 sends sbuf
// and receives into rbuf, rank 1 the other way round.
func roundTrip(c *mpi.Comm, sbuf, rbuf []byte) {
	if c.Rank() == 0 {
		check(mpi.Send(c, sbuf, 1, tagPing), "pingpong send")
		_, err := mpi.Recv(c, rbuf, 1, tagPing)
		check(err, "pingpong recv")
		return
	}
	_, err := mpi.Recv(c, rbuf, 0, tagPing)
	check(err, "pingpong recv")
	check(mpi.Send(c, sbuf, 0, tagPing), "pingpong send")
}

// pingDist times each of iters more round trips on rank 0 and returns the
// one-way latency's mean and percentiles (µs) as rows pingpong_mean,
// pingpong_p50, pingpong_p90 and pingpong_p99 (rank 1: none).
func pingDist(c *mpi.Comm, sbuf, rbuf []byte, iters int) []row {
	n := len(sbuf)
	lat := make([]float64, iters)
	for i := range lat {
		t0 := mpi.Wtime()
		roundTrip(c, sbuf, rbuf)
		lat[i] = (mpi.Wtime() - t0) / 2 * 1e6
	}
	if c.Rank() != 0 {
		return nil
	}
	sum := 0.0
	for _, v := range lat {
		sum += v
	}
	slices.Sort(lat)
	at := func(q float64) float64 { return lat[min(len(lat)-1, int(q*float64(len(lat))))] }
	dev := mpi.DeviceName()
	return []row{
		{"pingpong_mean", dev, c.Size(), n, sum / float64(len(lat)), "us"},
		{"pingpong_p50", dev, c.Size(), n, at(0.5), "us"},
		{"pingpong_p90", dev, c.Size(), n, at(0.9), "us"},
		{"pingpong_p99", dev, c.Size(), n, at(0.99), "us"},
	}
}
