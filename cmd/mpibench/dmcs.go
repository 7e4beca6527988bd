package main

import (
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/adimpi/adimpi/dmcs"
	"github.com/adimpi/adimpi/mpi"
)

// dmcsSizes are the payload sizes of the dmcs subcommand.
var dmcsSizes = []int{0, 8, 64, 512, 1 << 10, 4 << 10, 8 << 10}

// dmcsBench is the dmcs subcommand: remote service requests from rank 0
// to rank 1, which serves them (by Poll, or with --dmcs-thread by its poll
// thread), for each payload size, over shared-memory rings (rows
// dmcs_shm_*) and over MPI messages (Options.NoShm, rows dmcs_p2p_*),
// with an MPI ping-pong of the same payload beside them (mpi_rtt). The
// patterns take turns within each of --reps rounds, and each row is the
// median over the rounds. Rows (dmcs_thread_* with the poll thread):
//
//	dmcs_*_rtt   µs per round trip: an RSR and its acknowledgement (RSRPayloadAsync, WaitCounter)
//	dmcs_*_call  µs per RSR call, in batches of 64 sent back to back
//	dmcs_*_rate  Mreq/s: a batch of 64 RSRs from the first call until the last one's acknowledgement
//	mpi_rtt      µs per Send/Recv ping-pong of the payload
//	dmcs_put_win, dmcs_get_win, dmcs_putop_win
//	             µs per synchronous Put, Get, PutOp (SumInt64) of heap memory (Options.Heap):
//	             RMA on the window, rank 1 not involved
//	dmcs_put_req, dmcs_get_req, dmcs_putop_req
//	             the same on exposed memory: requests rank 1 serves (shared-memory rings)
func dmcsBench(cfg *config, thread bool) []row {
	w := mpi.World()
	me, dev := w.Rank(), mpi.DeviceName()
	type inst struct {
		name        string
		d           *dmcs.DMCS
		ping        int
		stop        int
		heapP, reqP dmcs.Ptr
	}
	var stopped atomic.Int32
	stopCh := make(chan struct{}, 4)
	var insts []*inst
	for _, noShm := range []bool{false, true} {
		opts := dmcs.Options{PollThread: thread, NoShm: noShm, Spin: cfg.dmcsSpin}
		if !noShm {
			opts.Heap = 64 << 10
		}
		d, err := dmcs.Init(opts)
		check(err, "dmcs.Init")
		in := &inst{name: "shm", d: d}
		if !noShm {
			// The same Ptrs on both ranks: memory in the heap window,
			// and exposed Go memory that requests reach.
			in.heapP, _, err = d.HeapAlloc(dmcsSizes[len(dmcsSizes)-1])
			check(err, "HeapAlloc")
			in.reqP = d.Expose(make([]byte, dmcsSizes[len(dmcsSizes)-1]))
		}
		if noShm {
			in.name = "p2p"
		}
		in.ping = d.Register(func(*dmcs.DMCS, int, []uint64, []byte) {})
		in.stop = d.Register(func(*dmcs.DMCS, int, []uint64, []byte) {
			stopped.Add(1)
			stopCh <- struct{}{}
		})
		insts = append(insts, in)
	}
	iters := cfg.iters
	if iters == 0 {
		iters = 2000
	}
	const batch = 64
	batches := max(iters/batch, 4)
	prefix := "dmcs_"
	if thread {
		prefix = "dmcs_thread_"
	}
	// samples[bench][size] collects one value per round.
	samples := map[string]map[int][]float64{}
	add := func(bench string, size int, v float64) {
		if samples[bench] == nil {
			samples[bench] = map[int][]float64{}
		}
		samples[bench][size] = append(samples[bench][size], v)
	}
	payload := make([]byte, dmcsSizes[len(dmcsSizes)-1])
	fill(payload, 1)
	raw := make([]byte, len(payload))
	want := int32(0)
	for round := 0; round < cfg.reps; round++ {
		for _, size := range dmcsSizes {
			p := payload[:size]
			for _, in := range insts {
				d := in.d
				check(mpi.Barrier(w), "MPI_Barrier")
				want++
				if me == 0 {
					var c dmcs.Counter
					t0 := time.Now()
					for i := 0; i < iters; i++ {
						check(d.RSRPayloadAsync(1, in.ping, p, &c), "RSR")
						check(d.WaitCounter(&c, int64(i+1)), "WaitCounter")
					}
					add(prefix+in.name+"_rtt", size, us(time.Since(t0))/float64(iters))
					var call, total time.Duration
					for b := 0; b < batches; b++ {
						var bc dmcs.Counter
						k := int64(1)
						t0 := time.Now()
						for i := 0; i < batch-1; i++ {
							if d.Copies(1, size) {
								check(d.RSRPayload(1, in.ping, p), "RSR")
							} else {
								check(d.RSRPayloadAsync(1, in.ping, p, &bc), "RSR")
								k++
							}
						}
						check(d.RSRPayloadAsync(1, in.ping, p, &bc), "RSR")
						call += time.Since(t0)
						check(d.WaitCounter(&bc, k), "WaitCounter")
						total += time.Since(t0)
					}
					add(prefix+in.name+"_call", size, us(call)/float64(batches*batch))
					add(prefix+in.name+"_rate", size, float64(batches*batch)/us(total))
					if in.name == "shm" && size >= 8 {
						// Put, Get and PutOp, through the heap window
						// and as requests.
						for _, via := range []struct {
							name string
							p    dmcs.Ptr
						}{{"win", in.heapP}, {"req", in.reqP}} {
							t0 := time.Now()
							for i := 0; i < iters; i++ {
								check(d.Put(1, via.p, p), "Put")
							}
							add(prefix+"put_"+via.name, size, us(time.Since(t0))/float64(iters))
							t0 = time.Now()
							for i := 0; i < iters; i++ {
								check(d.Get(1, via.p, raw[:size]), "Get")
							}
							add(prefix+"get_"+via.name, size, us(time.Since(t0))/float64(iters))
							t0 = time.Now()
							for i := 0; i < iters; i++ {
								check(d.PutOp(1, via.p, p, dmcs.SumInt64), "PutOp")
							}
							add(prefix+"putop_"+via.name, size, us(time.Since(t0))/float64(iters))
						}
					}
					check(d.RSR(1, in.stop), "RSR")
				} else if me == 1 {
					for stopped.Load() < want {
						if thread {
							<-stopCh
							continue
						}
						_, err := d.Poll()
						check(err, "Poll")
					}
					if !thread {
						select {
						case <-stopCh:
						default:
						}
					}
				}
				// Everything of the round is served before the next.
				check(d.Barrier(), "dmcs Barrier")
			}
			check(mpi.Barrier(w), "MPI_Barrier")
			if me <= 1 {
				t0 := time.Now()
				for i := 0; i < iters; i++ {
					if me == 0 {
						check(mpi.Send(w, p, 1, 5), "MPI_Send")
						_, err := mpi.Recv(w, raw[:size], 1, 5)
						check(err, "MPI_Recv")
					} else {
						_, err := mpi.Recv(w, raw[:size], 0, 5)
						check(err, "MPI_Recv")
						check(mpi.Send(w, raw[:size], 0, 5), "MPI_Send")
					}
				}
				add("mpi_rtt", size, us(time.Since(t0))/float64(iters))
			}
		}
	}
	for _, in := range insts {
		check(in.d.Close(), "dmcs Close")
	}
	if me != 0 {
		return nil
	}
	var rows []row
	for _, bench := range dmcsRows(prefix) {
		unit := "us"
		if strings.HasSuffix(bench, "_rate") {
			unit = "Mreq/s"
		}
		for _, size := range dmcsSizes {
			if len(samples[bench][size]) == 0 {
				continue // Put, Get and PutOp of whole words only
			}
			rows = append(rows, row{bench: bench, device: dev, np: w.Size(), size: size, value: median(samples[bench][size]), unit: unit})
		}
	}
	return rows
}

// dmcsRows are the rows of the dmcs subcommand, in order.
func dmcsRows(prefix string) []string {
	return []string{prefix + "shm_rtt", prefix + "p2p_rtt", "mpi_rtt", prefix + "shm_call", prefix + "p2p_call",
		prefix + "shm_rate", prefix + "p2p_rate", prefix + "put_win", prefix + "put_req", prefix + "get_win",
		prefix + "get_req", prefix + "putop_win", prefix + "putop_req"}
}

// batch is the number of RSRs of a dmcs_*_call and _rate batch.
const batch = 64

// us is d in microseconds.
func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

// runDMCS starts MPI with thread support, runs the dmcs subcommand and
// prints on rank 0.
func runDMCS(cfg *config, thread bool) {
	if _, err := mpi.InitThread(mpi.ThreadMultiple); err != nil {
		fmt.Fprintln(os.Stderr, "mpibench:", err)
		os.Exit(1)
	}
	if mpi.World().Size() < 2 {
		fail("dmcs needs at least 2 ranks (run it under mpirun -np 2)")
	}
	rows := dmcsBench(cfg, thread)
	if mpi.World().Rank() == 0 {
		printRows(os.Stdout, cfg, rows)
	}
	if err := mpi.Finalize(); err != nil {
		fmt.Fprintln(os.Stderr, "mpibench:", err)
		os.Exit(1)
	}
}
