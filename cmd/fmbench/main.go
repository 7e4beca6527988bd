// Command fmbench measures the raw FM API between ranks 0 and 1, with no
// MPI above it: one-way latency of a ping-pong (BeginMessage, SendPiece,
// EndMessage; the handler Receives into a buffer) and streaming bandwidth
// (rank 1 returns a 4-byte acknowledgement per window of messages). Its
// rows match mpibench's, so fm's MPI latency can be set against raw FM:
//
//	go run ./cmd/mpirun -np 2 ./cmd/fmbench [-packet N] [-slots N] [-csv]
//
// With -mpi it measures instead MPI ping-pong latency over the fm device
// at the sizes where the 32-byte MPI header pushes a message into one more
// packet (payload-32 ± 1, 2×payload-32 ± 1), rows "pingpong-mpi":
//
//	go run ./cmd/mpirun -np 2 -device fm ./cmd/fmbench -mpi
package main

import (
	"flag"
	"fmt"
	"math"
	"os"
	"time"

	"github.com/adimpi/adimpi/devices/fm"
	"github.com/adimpi/adimpi/mpi"
)

const (
	hPing = 1
	hAck  = 2
)

func main() {
	packet := flag.Int("packet", fm.DefaultPacket, "packet size in bytes")
	slots := flag.Int("slots", fm.DefaultSlots, "packets per receive region")
	csv := flag.Bool("csv", false, "print CSV rows bench,device,np,size,value,unit")
	reps := flag.Int("reps", 3, "timed repetitions (as mpibench's default); the best is reported")
	iters := flag.Int("iters", 0, "ping-pong round trips per repetition (0: enough for tens of milliseconds, as mpibench)")
	mpiMode := flag.Bool("mpi", false, "measure MPI over the fm device at the packet boundaries")
	flag.Parse()
	if *mpiMode {
		mpiBoundaries(*packet, *reps, *iters, *csv)
		return
	}
	e, err := fm.Open(fm.Config{Packet: *packet, Slots: *slots})
	check(err)
	rank := e.Rank()
	if e.Size() < 2 {
		fmt.Fprintln(os.Stderr, "fmbench: run with at least 2 ranks")
		os.Exit(2)
	}
	pl := e.Payload()
	rbuf := make([]byte, 4<<20)
	arrived, acks := 0, 0
	e.SetHandler(hPing, func(e *fm.Endpoint, s *fm.Stream) {
		e.Receive(s, rbuf[s.Taken():])
		if s.Last() {
			arrived++
		}
	})
	e.SetHandler(hAck, func(e *fm.Endpoint, s *fm.Stream) { acks++ })
	send := func(dest, h int, b []byte) {
		s, err := e.BeginMessage(dest, len(b), uint16(h))
		check(err)
		check(e.SendPiece(s, b))
		check(e.EndMessage(s))
	}
	print := func(bench string, n int, v float64, unit string) {
		if rank != 0 {
			return
		}
		if *csv {
			fmt.Printf("%s,fm-raw,2,%d,%.4f,%s\n", bench, n, v, unit)
		} else {
			fmt.Printf("%-10s %9d %12.3f %s\n", bench, n, v, unit)
		}
	}
	if rank == 0 && *csv {
		fmt.Println("bench,device,np,size,value,unit")
	}
	sizes := []int{0, 8, 64, 512, pl - 32, pl, pl + 1, 2 * pl, 2*pl + 1, 4096, 16384, 65536}
	if rank <= 1 {
		peer := 1 - rank
		for _, n := range sizes {
			sbuf := make([]byte, n)
			round := func(iters int) {
				for i := 0; i < iters; i++ {
					if rank == 0 {
						send(peer, hPing, sbuf)
						want := arrived + 1
						check(e.Poll(func() bool { return arrived >= want }, peer))
					} else {
						want := arrived + 1
						check(e.Poll(func() bool { return arrived >= want }, peer))
						send(peer, hPing, sbuf)
					}
				}
			}
			round(1000) // as mpibench pingpong warms up small sizes: the first size must not pay for a cold start
			iters := pingIters(n, *iters)
			best := math.Inf(1)
			for r := 0; r < *reps; r++ {
				t0 := time.Now()
				round(iters)
				best = min(best, time.Since(t0).Seconds())
			}
			print("pingpong", n, best/float64(iters)/2*1e6, "us")
		}
		const window = 64
		for _, n := range []int{1024, 16384, 65536, 1 << 20} {
			sbuf := make([]byte, n)
			windows := func(count int) {
				for i := 0; i < count; i++ {
					if rank == 0 {
						for w := 0; w < window; w++ {
							send(peer, hPing, sbuf)
						}
						want := acks + 1
						check(e.Poll(func() bool { return acks >= want }, peer))
					} else {
						want := arrived + window
						check(e.Poll(func() bool { return arrived >= want }, peer))
						send(peer, hAck, make([]byte, 4))
					}
				}
			}
			windows(2)
			count := max(2, (64<<20)/(n*window))
			best := math.Inf(1)
			for r := 0; r < *reps; r++ {
				t0 := time.Now()
				windows(count)
				best = min(best, time.Since(t0).Seconds())
			}
			print("bw", n, float64(n)*window*float64(count)/best/1e6, "MB/s")
		}
	}
	check(e.Close())
}

// mpiBoundaries is the MPI ping-pong at the sizes around the packet
// boundaries that the MPI header moves (run under -device fm with the same
// packet size).
func mpiBoundaries(packet, reps, fixed int, csv bool) {
	check(mpi.Init())
	w := mpi.World()
	rank := w.Rank()
	pl := packet - fm.HeaderSize - 32 // payload after the MPI header
	if rank == 0 && csv {
		fmt.Println("bench,device,np,size,value,unit")
	}
	if rank <= 1 && w.Size() >= 2 {
		peer := 1 - rank
		for _, n := range []int{0, pl - 1, pl, pl + 1, pl + packet - fm.HeaderSize, pl + packet - fm.HeaderSize + 1} {
			sbuf, rbuf := make([]byte, n), make([]byte, n)
			round := func(iters int) {
				for i := 0; i < iters; i++ {
					if rank == 0 {
						check(mpi.Send(w, sbuf, peer, 1))
						_, err := mpi.Recv(w, rbuf, peer, 1)
						check(err)
					} else {
						_, err := mpi.Recv(w, rbuf, peer, 1)
						check(err)
						check(mpi.Send(w, sbuf, peer, 1))
					}
				}
			}
			round(1000) // as mpibench pingpong warms up small sizes: the first size must not pay for a cold start
			iters := pingIters(n, fixed)
			best := math.Inf(1)
			for r := 0; r < reps; r++ {
				t0 := time.Now()
				round(iters)
				best = min(best, time.Since(t0).Seconds())
			}
			v := best / float64(iters) / 2 * 1e6
			if rank == 0 && csv {
				fmt.Printf("pingpong-mpi,%s,2,%d,%.4f,us\n", mpi.DeviceName(), n, v)
			} else if rank == 0 {
				fmt.Printf("%-12s %9d %12.3f us (%s, %d packets)\n", "pingpong-mpi", n, v, mpi.DeviceName(), (n+32+packet-fm.HeaderSize-1)/(packet-fm.HeaderSize))
			}
		}
	}
	check(mpi.Finalize())
}

// pingIters is the round trips of one timed repetition at size n: enough
// for tens of milliseconds, as mpibench pingpong times each repetition
// (-min-time 50ms), so that raw FM and MPI are timed alike (the best of
// short repetitions is systematically lower). Fixed per size (or fixed by
// -iters), so both ranks agree without a message.
func pingIters(n, fixed int) int {
	switch {
	case fixed > 0:
		return fixed
	case n <= 512:
		return 150000
	case n <= 4096:
		return 40000
	default:
		return 5000
	}
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "fmbench:", err)
		os.Exit(1)
	}
}
