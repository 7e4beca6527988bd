// Command viabench measures one device configuration between ranks 0 and 1
// (run it under mpirun -np 2; with more ranks the others only wait, so
// that every NIC has more VIs and work queues): 8-byte ping-pong latency and 1 MiB streaming
// bandwidth, best of -reps repetitions, and prints one line with the
// device's counters summed over both ranks (for via: TLB hits and misses,
// kernel crossings, descriptors fetched by DMA, engine sleeps).
//
//	mpirun -np 2 -device via -device-opt at=at3 -device-opt tlbsize=16 viabench
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/adimpi/adimpi/mpi"
)

func check(err error, what string) {
	if err != nil {
		fmt.Fprintf(os.Stderr, "viabench: %s: %v\n", what, err)
		os.Exit(1)
	}
}

func main() {
	reps := flag.Int("reps", 5, "repetitions; the best is reported")
	lat := flag.Duration("lat-time", 50*time.Millisecond, "time per latency repetition")
	bwSize := flag.Int("bw-size", 1<<20, "bandwidth message size in bytes")
	bwMsgs := flag.Int("bw-msgs", 32, "messages per bandwidth repetition (window of 8)")
	label := flag.String("label", "", "configuration name printed with the results")
	flag.Parse()
	check(mpi.Init(), "MPI_Init")
	w := mpi.World()
	rank := w.Rank()
	if w.Size() < 2 {
		check(fmt.Errorf("run with -np 2 or more"), "size")
	}
	if rank >= 2 { // more ranks only add VIs (and work queues) to every NIC
		check(mpi.Finalize(), "MPI_Finalize")
		return
	}
	peer := 1 - rank
	sync := func() {
		b := make([]byte, 1)
		if rank == 0 {
			check(mpi.Send(w, b, 1, 5), "sync")
			_, err := mpi.Recv(w, b, 1, 5)
			check(err, "sync")
		} else {
			_, err := mpi.Recv(w, b, 0, 5)
			check(err, "sync")
			check(mpi.Send(w, b, 0, 5), "sync")
		}
	}
	small := make([]byte, 8)
	best := time.Duration(1 << 62)
	for r := 0; r < *reps; r++ {
		sync()
		n := 0
		start := time.Now()
		for {
			// rank 0 decides when to stop and tells rank 1 in the first byte
			if rank == 0 {
				small[0] = 0
				if time.Since(start) > *lat {
					small[0] = 1
				}
				check(mpi.Send(w, small, peer, 1), "send")
				_, err := mpi.Recv(w, small, peer, 1)
				check(err, "recv")
			} else {
				_, err := mpi.Recv(w, small, peer, 1)
				check(err, "recv")
				check(mpi.Send(w, small, peer, 1), "send")
			}
			n++
			if small[0] == 1 {
				break
			}
		}
		if d := time.Since(start) / time.Duration(2*n); d < best {
			best = d
		}
	}
	big := make([]byte, *bwSize)
	ack := make([]byte, 1)
	bestBW := 0.0
	for r := 0; r < *reps; r++ {
		sync()
		start := time.Now()
		for m := 0; m < *bwMsgs; m += 8 {
			reqs := make([]*mpi.Request, 0, 8)
			for k := 0; k < 8 && m+k < *bwMsgs; k++ {
				var q *mpi.Request
				var err error
				if rank == 0 {
					q, err = mpi.Isend(w, big, peer, 2)
				} else {
					q, err = mpi.Irecv(w, big, peer, 2)
				}
				check(err, "isend/irecv")
				reqs = append(reqs, q)
			}
			_, err := mpi.Waitall(reqs)
			check(err, "waitall")
		}
		if rank == 1 {
			check(mpi.Send(w, ack, 0, 3), "ack")
		} else {
			_, err := mpi.Recv(w, ack, 1, 3)
			check(err, "ack")
			if bw := float64(*bwSize**bwMsgs) / time.Since(start).Seconds() / 1e6; bw > bestBW {
				bestBW = bw
			}
		}
	}
	keys := []string{"tlb_hits", "tlb_misses", "nic_kernel_crossings", "nic_desc_fetches", "nic_sleeps", "credit_messages",
		"host_post_ns", "nic_posts", "nic_recv_posts", "nic_exec_ns", "nic_executed", "cq_done_ns", "cq_done_calls"}
	c := mpi.Counters()
	mine := make([]int64, len(keys))
	for i, k := range keys {
		mine[i] = c[k]
	}
	theirs := make([]int64, len(keys))
	if rank == 1 {
		check(mpi.Send(w, mine, 0, 4), "counters")
	} else {
		_, err := mpi.Recv(w, theirs, 1, 4)
		check(err, "counters")
		fmt.Printf("%-46s np=%-2d lat8B %8.2f us  bw1MiB %8.1f MB/s", *label, w.Size(), float64(best.Nanoseconds())/1e3, bestBW)
		sum := map[string]int64{}
		for i, k := range keys {
			sum[k] = mine[i] + theirs[i]
		}
		for _, k := range keys[:6] {
			fmt.Printf("  %s=%d", k, sum[k])
		}
		per := func(a, b string) float64 {
			if sum[b] == 0 {
				return 0
			}
			return float64(sum[a]) / float64(sum[b])
		}
		fmt.Printf("  post=%.0fns nic=%.0fns/desc cqcheck=%.0fns", float64(sum["host_post_ns"])/float64(max(1, sum["nic_posts"]+sum["nic_recv_posts"])),
			per("nic_exec_ns", "nic_executed"), per("cq_done_ns", "cq_done_calls"))
		if h, m := mine[0]+theirs[0], mine[1]+theirs[1]; h+m > 0 {
			fmt.Printf("  tlb_hit_rate=%.4f", float64(h)/float64(h+m))
		}
		fmt.Println()
	}
	check(mpi.Finalize(), "MPI_Finalize")
}
