// Command example is a small program on the FM API alone (no MPI): every
// rank sends its right neighbour a message of 10000 int32 values in pieces,
// and the receiving handler scatters each packet straight into an array,
// keeping its place in the stream's Ctx. Rank 0 then sends one
// multidestination message to every other rank.
//
//	go run ./cmd/mpirun -np 4 ./devices/fm/example
package main

import (
	"encoding/binary"
	"fmt"
	"os"

	"github.com/adimpi/adimpi/devices/fm"
)

const (
	hArray = 1 // handler id: an array of int32
	hHello = 2 // handler id: a greeting for everyone
	n      = 10000
)

func main() {
	e, err := fm.Open(fm.Config{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	rank, size := e.Rank(), e.Size()
	var got []int32
	done, hellos := false, 0
	// The array handler runs once per packet; it decodes whole values and
	// keeps a partial value's bytes for the next packet.
	type place struct {
		part []byte
	}
	e.SetHandler(hArray, func(e *fm.Endpoint, s *fm.Stream) {
		pl, _ := s.Ctx.(*place)
		if pl == nil {
			pl = &place{}
			s.Ctx = pl
		}
		var buf [4]byte
		for s.Avail() > 0 {
			k := e.Receive(s, buf[len(pl.part):])
			pl.part = append(pl.part, buf[len(pl.part):len(pl.part)+k]...)
			if len(pl.part) == 4 {
				got = append(got, int32(binary.LittleEndian.Uint32(pl.part)))
				pl.part = pl.part[:0]
			}
		}
		if s.Last() {
			done = true
		}
	})
	e.SetHandler(hHello, func(e *fm.Endpoint, s *fm.Stream) {
		b := make([]byte, s.Avail())
		e.Receive(s, b)
		fmt.Printf("rank %d: %q from rank %d\n", rank, b, s.Source())
		hellos++
	})

	right := (rank + 1) % size
	s, err := e.BeginMessage(right, 4*n, hArray)
	check(err)
	var b [4]byte
	for i := 0; i < n; i++ { // one piece per value: FM gathers them into packets
		binary.LittleEndian.PutUint32(b[:], uint32(rank*n+i))
		check(e.SendPiece(s, b[:]))
	}
	check(e.EndMessage(s))
	check(e.Poll(func() bool { return done }))
	left := (rank + size - 1) % size
	for i, v := range got {
		if v != int32(left*n+i) {
			fmt.Fprintf(os.Stderr, "rank %d: value %d is %d, want %d\n", rank, i, v, left*n+i)
			os.Exit(1)
		}
	}
	if rank == 0 && size > 1 {
		var dests []int
		for r := 1; r < size; r++ {
			dests = append(dests, r)
		}
		msg := []byte("hello from a multidestination stream")
		s, err := e.BeginMessageMulti(dests, len(msg), hHello)
		check(err)
		check(e.SendPiece(s, msg))
		check(e.EndMessage(s))
	} else if rank != 0 {
		check(e.Poll(func() bool { return hellos == 1 }))
	}
	if rank == 0 {
		fmt.Printf("%d ranks: every array of %d values arrived intact (packet %d bytes)\n", size, n, e.Packet())
	}
	check(e.Close())
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
