// Command fmprog is the multi-process test program of package fm, run
// through mpirun by fm's tests:
//
//	fmprog flood   every rank floods every rank (itself included) with
//	               messages of many sizes through tiny regions (2 slots of
//	               128-byte packets), with blocking SendPiece; then one
//	               multidestination message from every rank to all others;
//	               then ranks 0 and 1 ping-pong, the replies piggybacking credits
//	fmprog multi   the adi device "fm" driven directly: IsendMulti of
//	               eager, above-threshold and strided buffers, received
//	               with ordinary Irecv (also with ANY_SOURCE)
//	fmprog rndv PATH every rank sends every other rank rendezvous
//	               messages (contiguous and strided on either side, several
//	               in flight per pair, sizes that wrap the bulk lane) with
//	               the device's rendezvous data going by PATH: bulk (the
//	               bulk lane), remote (remote writes and scatters) or
//	               packets; the counters must show that path was taken
//	fmprog multidie the last rank exits at once; rank 0's IsendMulti of a
//	               message larger than a region to everyone still reaches the
//	               living ranks and completes with ErrOther
//
// On success every rank exits 0 and rank 0 prints "ok <mode>".
package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/adimpi/adimpi/adi"
	"github.com/adimpi/adimpi/datatype"
	"github.com/adimpi/adimpi/devices/fm"
	"github.com/adimpi/adimpi/internal/pmi"
)

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "FAIL "+format+"\n", args...)
	os.Exit(1)
}

func check(err error, what string) {
	if err != nil {
		fail("%s: %v", what, err)
	}
}

func main() {
	if len(os.Args) < 2 {
		fail("usage: fmprog flood|multi|multidie|rndv PATH")
	}
	switch os.Args[1] {
	case "flood":
		flood()
	case "multi":
		multi()
	case "multidie":
		multiDie()
	case "rndv":
		if len(os.Args) != 3 {
			fail("usage: fmprog rndv bulk|remote|packets")
		}
		rndv(os.Args[2])
	default:
		fail("unknown mode %q", os.Args[1])
	}
}

// byteAt is byte i of message k from src to dst.
func byteAt(src, dst, k, i int) byte { return byte(src*31 + dst*7 + k*13 + i*5 + i>>8) }

func msgLen(k int) int { return []int{0, 1, 103, 104, 105, 208, 1000, 5000}[k%8] }

const rounds = 40

func flood() {
	e, err := fm.Open(fm.Config{Packet: 128, Slots: 2})
	check(err, "fm.Open")
	rank, size := e.Rank(), e.Size()
	next := make([]int, size) // next message index expected from each source
	type rx struct {
		k   int
		buf []byte
	}
	const hFlood, hMulti = 7, 8
	bad := ""
	e.SetHandler(hFlood, func(e *fm.Endpoint, s *fm.Stream) {
		st, _ := s.Ctx.(*rx)
		if st == nil {
			st = &rx{k: next[s.Source()]}
			next[s.Source()]++
			if msgLen(st.k) != s.Len() {
				bad = fmt.Sprintf("message %d from %d has length %d, want %d", st.k, s.Source(), s.Len(), msgLen(st.k))
			}
			s.Ctx = st
		}
		// Take the packet in odd-sized pieces.
		for s.Avail() > 0 {
			var piece [37]byte
			n := e.Receive(s, piece[:])
			st.buf = append(st.buf, piece[:n]...)
		}
		if s.Last() {
			for i, b := range st.buf {
				if b != byteAt(s.Source(), rank, st.k, i) {
					bad = fmt.Sprintf("message %d from %d: byte %d is %d, want %d", st.k, s.Source(), i, b, byteAt(s.Source(), rank, st.k, i))
					break
				}
			}
			if len(st.buf) != s.Len() {
				bad = fmt.Sprintf("message %d from %d: %d bytes arrived, want %d", st.k, s.Source(), len(st.buf), s.Len())
			}
		}
	})
	const hPong = 9
	pongs := 0
	e.SetHandler(hPong, func(e *fm.Endpoint, s *fm.Stream) { pongs++ })
	multis := 0
	e.SetHandler(hMulti, func(e *fm.Endpoint, s *fm.Stream) {
		var b [8]byte
		if e.Receive(s, b[:]) != 8 || binary.LittleEndian.Uint64(b[:]) != uint64(s.Source()) {
			bad = fmt.Sprintf("multidestination message from %d is wrong", s.Source())
		}
		multis++
	})
	// Everybody sends to everybody at once, in rounds: with 2 credits per
	// region every SendPiece soon waits, and waiting extracts.
	for k := 0; k < rounds; k++ {
		for j := 0; j < size; j++ {
			dst := (rank + j) % size
			n := msgLen(k)
			s, err := e.BeginMessage(dst, n, hFlood)
			check(err, "BeginMessage")
			buf := make([]byte, n)
			for i := range buf {
				buf[i] = byteAt(rank, dst, k, i)
			}
			for off := 0; off < n; off += 10 { // pieces of 10 bytes
				check(e.SendPiece(s, buf[off:min(off+10, n)]), "SendPiece")
			}
			check(e.EndMessage(s), "EndMessage")
		}
	}
	var others []int
	for r := 0; r < size; r++ {
		if r != rank {
			others = append(others, r)
		}
	}
	if len(others) > 0 {
		s, err := e.BeginMessageMulti(others, 8, hMulti)
		check(err, "BeginMessageMulti")
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], uint64(rank))
		check(e.SendPiece(s, b[:]), "SendPiece multi")
		check(e.EndMessage(s), "EndMessage multi")
	}
	check(e.Poll(func() bool {
		for _, n := range next {
			if n < rounds {
				return false
			}
		}
		return multis == size-1
	}), "waiting for the flood")
	if bad != "" {
		fail("rank %d: %s", rank, bad)
	}
	// A ping-pong between ranks 0 and 1: each reply goes out right after
	// the extraction that consumed the ping, so it carries the credit.
	pig := e.Stats.Piggybacked
	if size > 1 && rank <= 1 {
		expect := 0 // the first pong may have come during the flood's Poll
		for i := 0; i < 10; i++ {
			if (i%2 == 0) == (rank == 0) {
				s, err := e.BeginMessage(1-rank, 8, hPong)
				check(err, "BeginMessage pong")
				check(e.SendPiece(s, make([]byte, 8)), "SendPiece pong")
				check(e.EndMessage(s), "EndMessage pong")
			} else {
				expect++
				check(e.Poll(func() bool { return pongs >= expect }, 1-rank), "waiting for a pong")
			}
		}
		if e.Stats.Piggybacked-pig < 4 {
			fail("rank %d: %d credits piggybacked on 5 ping-pong replies, want ≥ 4 (%+v)", rank, e.Stats.Piggybacked-pig, e.Stats)
		}
	}
	st := e.Stats
	if size > 1 && (st.ExplicitReturns == 0 || st.CreditWaits == 0) {
		fail("rank %d: credits never returned explicitly or waited for: %+v", rank, st)
	}
	// Every packet sent to this rank came back as a credit eventually; drain
	// until the peers are done before leaving.
	check(e.Close(), "Close")
	if rank == 0 {
		fmt.Printf("ok flood np=%d %+v\n", size, st)
	}
}

// multi drives the fm adi device directly through IsendMulti.
func multi() {
	c, err := pmi.Connect()
	check(err, "pmi.Connect")
	f, ok := adi.Lookup("fm")
	if !ok {
		fail("device fm is not registered")
	}
	dev := f()
	rank, size := c.Rank(), c.Size()
	check(dev.Init(adi.Config{Rank: rank, Size: size, KVS: c, Options: map[string]string{"rndv": "4096"}}), "Init")
	ms, ok := dev.(adi.Multisender)
	if !ok {
		fail("fm is not an adi.Multisender")
	}
	vec, err := datatype.Vector(300, 16, 40, datatype.Byte) // 4800 packed bytes
	check(err, "Vector")
	check(vec.Commit(), "Commit")
	sizes := []int{0, 7, 1000, 4096, 4097, 50000}
	wait := func(reqs ...*adi.Request) { awaitAll(dev, rank, "requests", reqs) }
	var others []int
	for r := 0; r < size; r++ {
		if r != rank {
			others = append(others, r)
		}
	}
	for root := 0; root < size; root++ {
		for i, n := range sizes {
			tag := 100 + i
			if rank == root {
				b := make([]byte, n)
				for j := range b {
					b[j] = byte(root + j*3 + i)
				}
				r := &adi.Request{Op: adi.OpSend, Context: 4, Tag: tag, Buf: adi.Bytes(b)}
				check(ms.IsendMulti(r, others), "IsendMulti")
				wait(r)
				if r.Status.Err != nil || r.Status.Bytes != n {
					fail("rank %d: multidestination send of %d bytes: %+v", rank, n, r.Status)
				}
				continue
			}
			b := make([]byte, n)
			src := root
			if i%2 == 1 {
				src = adi.AnySource
			}
			r := &adi.Request{Op: adi.OpRecv, Context: 4, Peer: src, Tag: tag, Buf: adi.Bytes(b)}
			check(dev.Irecv(r), "Irecv")
			wait(r)
			if r.Status.Err != nil || r.Status.Bytes != n || r.Status.Source != root || r.Status.Tag != tag {
				fail("rank %d: receive %d bytes from %d: status %+v", rank, n, root, r.Status)
			}
			for j := range b {
				if b[j] != byte(root+j*3+i) {
					fail("rank %d: message of %d bytes from %d: byte %d wrong", rank, n, root, j)
				}
			}
		}
		// A strided send buffer: each destination gets the packed bytes,
		// received into a strided buffer of the same type.
		mem := make([]byte, vec.Span(1))
		if rank == root {
			for j := range mem {
				mem[j] = byte(j*7 + root)
			}
			r := &adi.Request{Op: adi.OpSend, Context: 4, Tag: 99, Buf: adi.Buffer{Mem: mem, Count: 1, Type: vec}}
			check(ms.IsendMulti(r, others), "IsendMulti vector")
			wait(r)
		} else {
			r := &adi.Request{Op: adi.OpRecv, Context: 4, Peer: root, Tag: 99, Buf: adi.Buffer{Mem: mem, Count: 1, Type: vec}}
			check(dev.Irecv(r), "Irecv vector")
			wait(r)
			if r.Status.Err != nil || r.Status.Bytes != 4800 {
				fail("rank %d: strided multidestination receive: %+v", rank, r.Status)
			}
			for j := range mem {
				want := byte(j*7 + root)
				if j%40 >= 16 || j >= 299*40+16 {
					want = 0 // gaps stay untouched
				}
				if mem[j] != want {
					fail("rank %d: strided receive from %d: byte %d is %d, want %d", rank, root, j, mem[j], want)
				}
			}
		}
	}
	cnt := dev.Counters()
	if size > 2 && cnt["multi_messages"] != int64(len(sizes)+1) {
		fail("rank %d: multi_messages = %d, want %d", rank, cnt["multi_messages"], len(sizes)+1)
	}
	// Quiesce: every rank's last receive is done; a PMI barrier is safe
	// because no send is outstanding.
	check(c.Barrier(), "Barrier")
	check(dev.Finalize(), "Finalize")
	check(c.Finalize(), "pmi Finalize")
	if rank == 0 {
		fmt.Printf("ok multi np=%d\n", size)
	}
}

func multiDie() {
	c, err := pmi.Connect()
	check(err, "pmi.Connect")
	f, _ := adi.Lookup("fm")
	dev := f()
	rank, size := c.Rank(), c.Size()
	check(dev.Init(adi.Config{Rank: rank, Size: size, KVS: c, Options: map[string]string{}}), "Init")
	check(c.Barrier(), "Barrier") // every rank has mapped every segment
	if rank == size-1 {
		os.Exit(0)
	}
	wait := func(r *adi.Request) {
		deadline := time.Now().Add(60 * time.Second)
		for !r.Done() {
			seq := dev.Seq()
			_, err := dev.Progress()
			check(err, "Progress")
			if time.Now().After(deadline) {
				fail("rank %d: request did not complete; counters %v", rank, dev.Counters())
			}
			if !r.Done() {
				dev.Sleep(seq, time.Millisecond)
			}
		}
	}
	const n = 1 << 20
	b := make([]byte, n)
	if rank == 0 {
		for j := range b {
			b[j] = byte(j * 5)
		}
		var others []int
		for r := 1; r < size; r++ {
			others = append(others, r)
		}
		r := &adi.Request{Op: adi.OpSend, Context: 4, Tag: 1, Buf: adi.Bytes(b)}
		check(dev.(adi.Multisender).IsendMulti(r, others), "IsendMulti")
		wait(r)
		if !errors.Is(r.Status.Err, adi.ErrOther) {
			fail("rank 0: multidestination send to a dead rank: status %+v, want ErrOther", r.Status)
		}
	} else {
		r := &adi.Request{Op: adi.OpRecv, Context: 4, Peer: 0, Tag: 1, Buf: adi.Bytes(b)}
		check(dev.Irecv(r), "Irecv")
		wait(r)
		if r.Status.Err != nil || r.Status.Bytes != n {
			fail("rank %d: receive: %+v", rank, r.Status)
		}
		for j := range b {
			if b[j] != byte(j*5) {
				fail("rank %d: byte %d wrong", rank, j)
			}
		}
	}
	fmt.Printf("ok multidie rank %d\n", rank)
	os.Exit(0)
}

// rndv exchanges rendezvous messages between every pair of ranks with the
// rendezvous data going by one path.
func rndv(path string) {
	opts := map[string]string{"rndv": "2048", "packet": "256", "slots": "8"}
	switch path {
	case "bulk": // 3 chunks of 960 bytes: messages wrap the lane
		opts["bulk"], opts["bslots"] = "960", "3"
	case "remote":
		opts["remote"], opts["minblock"] = "1", "16"
	case "packets":
		opts["bulk"] = "0"
	default:
		fail("rndv: unknown path %q", path)
	}
	c, err := pmi.Connect()
	check(err, "pmi.Connect")
	f, _ := adi.Lookup("fm")
	dev := f()
	rank, size := c.Rank(), c.Size()
	check(dev.Init(adi.Config{Rank: rank, Size: size, KVS: c, Options: opts}), "Init")
	vec, err := datatype.Vector(700, 24, 40, datatype.Byte) // 16800 packed bytes
	check(err, "Vector")
	check(vec.Commit(), "Commit")
	const n = 16800
	val := func(src, dst, k, j int) byte { return byte(src*29 + dst*11 + k*5 + j*3 + j>>7) }
	// Message k of a pair: k%2 says whether the sender's buffer is
	// strided, k/2%2 the receiver's.
	const msgs = 8
	buffer := func(strided bool, mem []byte) adi.Buffer {
		if strided {
			return adi.Buffer{Mem: mem, Count: 1, Type: vec}
		}
		return adi.Bytes(mem[:n])
	}
	var reqs []*adi.Request
	recvMem := map[[2]int][]byte{}
	for peer := 0; peer < size; peer++ {
		if peer == rank {
			continue
		}
		for k := 0; k < msgs; k++ {
			mem := make([]byte, vec.Span(1))
			recvMem[[2]int{peer, k}] = mem
			r := &adi.Request{Op: adi.OpRecv, Context: 4, Peer: peer, Tag: k, Buf: buffer(k/2%2 == 1, mem)}
			check(dev.Irecv(r), "Irecv")
			reqs = append(reqs, r)
		}
	}
	for peer := 0; peer < size; peer++ {
		if peer == rank {
			continue
		}
		for k := 0; k < msgs; k++ {
			mem := make([]byte, vec.Span(1))
			b := buffer(k%2 == 1, mem)
			packed := make([]byte, n)
			for j := range packed {
				packed[j] = val(rank, peer, k, j)
			}
			b.CopyIn(0, packed)
			mode := adi.ModeStandard
			if k%4 == 3 {
				mode = adi.ModeSync
			}
			r := &adi.Request{Op: adi.OpSend, Mode: mode, Context: 4, Peer: peer, Tag: k, Buf: b}
			check(dev.Isend(r), "Isend")
			reqs = append(reqs, r)
		}
	}
	awaitAll(dev, rank, "rendezvous requests", reqs)
	for _, r := range reqs {
		if r.Status.Err != nil || (r.Op == adi.OpRecv && (r.Status.Bytes != n || r.Status.Source != r.Peer)) {
			fail("rank %d: request %+v: status %+v", rank, r.Op, r.Status)
		}
	}
	for key, mem := range recvMem {
		src, k := key[0], key[1]
		b := buffer(k/2%2 == 1, mem)
		got := make([]byte, n)
		b.CopyOut(0, got)
		for j := range got {
			if got[j] != val(src, rank, k, j) {
				fail("rank %d: message %d from %d (%s): packed byte %d is %d, want %d", rank, k, src, path, j, got[j], val(src, rank, k, j))
			}
		}
		if k/2%2 == 1 { // gaps of a strided receive stay untouched
			for j := range mem {
				if j%40 >= 24 && mem[j] != 0 {
					fail("rank %d: message %d from %d: gap byte %d written", rank, k, src, j)
				}
			}
		} else if len(mem) > n && mem[n] != 0 {
			fail("rank %d: message %d from %d: byte after the message written", rank, k, src)
		}
	}
	cnt := dev.Counters()
	if size > 1 {
		want := map[string]bool{"bulk_messages": path == "bulk", "remote_writes": path == "remote", "remote_scatters": path == "remote"}
		for k, w := range want {
			if (cnt[k] > 0) != w {
				fail("rank %d: path %s: counter %s = %d", rank, path, k, cnt[k])
			}
		}
	}
	check(c.Barrier(), "Barrier")
	check(dev.Finalize(), "Finalize")
	check(c.Finalize(), "pmi Finalize")
	if rank == 0 {
		fmt.Printf("ok rndv %s np=%d\n", path, size)
	}
}

// awaitAll drives dev until every request is done, sleeping on its
// doorbell between looks; after 60 s it fails the program.
func awaitAll(dev adi.Device, rank int, what string, reqs []*adi.Request) {
	deadline := time.Now().Add(60 * time.Second)
	for {
		seq := dev.Seq()
		_, err := dev.Progress()
		check(err, "Progress")
		all := true
		for _, r := range reqs {
			all = all && r.Done()
		}
		if all {
			return
		}
		if time.Now().After(deadline) {
			fail("rank %d: %s did not complete", rank, what)
		}
		dev.Sleep(seq, time.Millisecond)
	}
}
