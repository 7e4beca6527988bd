// Command bipprog checks the standalone BIP API (package devices/bip)
// between the processes of a job started by mpirun: bipprog CHECK, with
// CHECK one of short, long, bound. Rank 0 prints "PASS CHECK" when every
// rank passed; a failing rank prints "FAIL ..." and exits 1.
package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"

	"github.com/adimpi/adimpi/adi"
	"github.com/adimpi/adimpi/datatype"
	"github.com/adimpi/adimpi/devices/bip"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: bipprog short|long|bound")
		os.Exit(2)
	}
	e, err := bip.Open(nil)
	if err != nil {
		fail("open: %v", err)
	}
	check := os.Args[1]
	switch check {
	case "short":
		err = checkShort(e)
	case "long":
		err = checkLong(e)
	case "bound":
		err = checkBound(e)
	default:
		err = fmt.Errorf("unknown check %q", check)
	}
	if err != nil {
		fail("rank %d: %s: %v", e.Rank(), check, err)
	}
	// Everyone reports to rank 0 with a short message, so that PASS means
	// every rank passed.
	if e.Rank() != 0 {
		err = e.SendShort(0, 99, []byte("ok"))
	} else {
		for i := 1; i < e.Size() && err == nil; i++ {
			var buf [8]byte
			var n int
			_, _, n, err = e.RecvShort(i, buf[:])
			if err == nil && string(buf[:n]) != "ok" {
				err = fmt.Errorf("rank %d reported %q", i, buf[:n])
			}
		}
	}
	if err != nil {
		fail("rank %d: report: %v", e.Rank(), err)
	}
	if err := e.Close(); err != nil {
		fail("rank %d: close: %v", e.Rank(), err)
	}
	if e.Rank() == 0 {
		fmt.Println("PASS " + check)
	}
}

func fail(format string, args ...any) {
	fmt.Printf("FAIL "+format+"\n", args...)
	os.Exit(1)
}

// payload is message i from rank src: n bytes of a recognisable pattern.
func payload(src, i, n int) []byte {
	b := make([]byte, n)
	for k := range b {
		b[k] = byte(src*31 + i*7 + k)
	}
	return b
}

// checkShort: rank 0 fills rank 1's queue while rank 1 waits in a long
// receive (which drains nothing), sees TrySend refuse, releases rank 1
// and sends twice the queue more with SendShort, which must block and
// resume as rank 1 consumes; rank 1 checks order and contents. Then every
// rank sends to every other rank (round by round) and checks what it got.
func checkShort(e *bip.Endpoint) error {
	q, max := e.QueueSlots(), e.ShortMax()
	if e.Size() >= 2 {
		switch e.Rank() {
		case 0:
			for i := 0; i < q; i++ {
				msg := payload(0, i, i*max/q)
				ok, err := e.TrySend(1, uint32(i), len(msg), func(p []byte) { copy(p, msg) })
				if err != nil || !ok {
					return fmt.Errorf("TrySend %d of %d into an empty queue: ok=%v err=%v", i, q, ok, err)
				}
			}
			if ok, err := e.TrySend(1, 0, 1, func([]byte) {}); ok || err != nil {
				return fmt.Errorf("TrySend into a full queue: ok=%v err=%v, want false", ok, err)
			}
			if err := e.SendLong(1, 7, payload(0, 0, 100000)); err != nil {
				return err
			}
			for i := q; i < 3*q; i++ {
				if err := e.SendShort(1, uint32(i), payload(0, i, (i*max/q)%max)); err != nil {
					return err
				}
			}
			if e.Stats.QueueFull == 0 {
				return errors.New("the queue was never found full")
			}
		case 1:
			buf := make([]byte, 100000)
			if n, err := e.RecvLong(0, 7, buf); err != nil || n != len(buf) || !bytes.Equal(buf, payload(0, 0, n)) {
				return fmt.Errorf("long release message: n=%d err=%v", n, err)
			}
			msg := make([]byte, max)
			for i := 0; i < 3*q; i++ {
				src, tag, n, err := e.RecvShort(0, msg)
				if err != nil {
					return err
				}
				want := payload(0, i, (i*max/q)%max)
				if i < q {
					want = payload(0, i, i*max/q)
				}
				if src != 0 || tag != uint32(i) || !bytes.Equal(msg[:n], want) {
					return fmt.Errorf("message %d: src %d tag %d len %d, want tag %d len %d", i, src, tag, n, i, len(want))
				}
			}
		}
	}
	msg := make([]byte, max)
	for round := 0; round < 2*q; round++ {
		for d := 0; d < e.Size(); d++ {
			if d != e.Rank() {
				if err := e.SendShort(d, uint32(round), payload(e.Rank(), round, (round*13)%max)); err != nil {
					return err
				}
			}
		}
		for s := 0; s < e.Size(); s++ {
			if s == e.Rank() {
				continue
			}
			src, tag, n, err := e.RecvShort(s, msg)
			if err != nil {
				return err
			}
			if src != s || tag != uint32(round) || !bytes.Equal(msg[:n], payload(s, round, (round*13)%max)) {
				return fmt.Errorf("round %d from %d: got src %d tag %d len %d", round, s, src, tag, n)
			}
		}
	}
	return nil
}

// checkLong sends long messages around the ring (the send started before
// the receive is posted, so it must wait for the rendezvous), into a
// contiguous buffer, into a strided (vector datatype) buffer, and into a
// shorter buffer (truncation); and to itself.
func checkLong(e *bip.Endpoint) error {
	me, n := e.Rank(), e.Size()
	right, left := (me+1)%n, (me+n-1)%n
	vec, err := datatype.Vector(1<<14, 3, 5, datatype.Byte)
	if err == nil {
		err = vec.Commit()
	}
	if err != nil {
		return err
	}
	big, err := datatype.Vector(9, 16<<10, 20<<10, datatype.Byte)
	if err == nil {
		err = big.Commit()
	}
	if err != nil {
		return err
	}
	var contigDirect bool // whether the 1 MiB contiguous message came by remote write
	for i, size := range []int{0, 1, 5000, 100000, 1<<20 + 13, 3 << 14, 9 << 14} {
		data := payload(me, i, size)
		s, err := e.StartLong(right, uint32(i), adi.Bytes(data), nil)
		if err != nil {
			return err
		}
		want := payload(left, i, size)
		switch i {
		case 5, 6: // strided receive buffers: 3 bytes of every 5 (through staging), 16 of every 20 KiB (gather list)
			typ, blk, stride := vec, 3, 5
			if i == 6 {
				typ, blk, stride = big, 16<<10, 20<<10
			}
			mem := make([]byte, typ.Extent())
			r, err := e.PostLong(left, uint32(i), adi.Buffer{Mem: mem, Count: 1, Type: typ}, nil)
			if err != nil {
				return err
			}
			if err := e.Wait(r.Done, r.Err); err != nil {
				return err
			}
			if i == 6 && r.Direct() != contigDirect {
				return fmt.Errorf("strided receive of 16 KiB blocks: written in place %v, the contiguous one %v: the gather list was not used", r.Direct(), contigDirect)
			}
			for k := 0; k < size; k++ {
				if mem[k/blk*stride+k%blk] != want[k] {
					return fmt.Errorf("strided long message: byte %d wrong", k)
				}
			}
			for k := 0; k < len(mem); k++ {
				if k%stride >= blk && mem[k] != 0 {
					return fmt.Errorf("strided long message wrote into a gap at %d", k)
				}
			}
		case 3: // truncated: the receive takes 1000 bytes less
			buf := make([]byte, size)
			r, err := e.PostLongN(left, uint32(i), adi.Bytes(buf), size-1000, nil)
			if err != nil {
				return err
			}
			if err := e.Wait(r.Done, r.Err); err != nil {
				return err
			}
			if r.Bytes() != size-1000 || r.Size() != size || !bytes.Equal(buf[:size-1000], want[:size-1000]) || buf[size-1000] != 0 {
				return fmt.Errorf("truncated long message: bytes %d size %d", r.Bytes(), r.Size())
			}
		default:
			buf := make([]byte, size)
			r, err := e.PostLong(left, uint32(i), adi.Bytes(buf), nil)
			if err != nil {
				return err
			}
			err = e.Wait(r.Done, r.Err)
			if err != nil || r.Bytes() != size || !bytes.Equal(buf, want) {
				return fmt.Errorf("long message %d of %d bytes: got %d, err %v, equal %v", i, size, r.Bytes(), err, bytes.Equal(buf, want))
			}
			if i == 4 {
				contigDirect = r.Direct()
				if !e.Options().CMA && (contigDirect != (left == me)) {
					return fmt.Errorf("with cma=off a long message from rank %d came by remote write", left)
				}
			}
		}
		if err := e.Wait(s.Done, s.Err); err != nil {
			return err
		}
	}
	// to itself, receive first
	buf := make([]byte, 70000)
	r, err := e.PostLong(me, 42, adi.Bytes(buf), nil)
	if err != nil {
		return err
	}
	if err := e.SendLong(me, 42, payload(me, 42, len(buf))); err != nil {
		return err
	}
	if err := e.Wait(r.Done, r.Err); err != nil || !bytes.Equal(buf, payload(me, 42, len(buf))) {
		return fmt.Errorf("long message to self: %v", err)
	}
	return nil
}

// checkBound: BIP allows MaxLong outstanding long sends to a peer and
// MaxLong long receives from it; one more is refused with ErrBusy. Each
// rank starts its sends before its right neighbour posts anything (it
// waits for a "go" short message), so the sends are surely outstanding.
func checkBound(e *bip.Endpoint) error {
	me, n := e.Rank(), e.Size()
	right, left := (me+1)%n, (me+n-1)%n
	max := e.Options().MaxLong
	var sends []*bip.LongSend
	for i := max - 1; i >= 0; i-- { // in reverse: matching is by tag
		s, err := e.StartLong(right, uint32(i), adi.Bytes(payload(me, i, 50000)), nil)
		if err != nil {
			return err
		}
		sends = append(sends, s)
	}
	if _, err := e.StartLong(right, 99, adi.Bytes(make([]byte, 10)), nil); !errors.Is(err, bip.ErrBusy) {
		return fmt.Errorf("long send %d beyond maxlong=%d: err %v, want ErrBusy", max+1, max, err)
	}
	if err := e.SendShort(right, 1, []byte("go")); err != nil {
		return err
	}
	if _, _, _, err := e.RecvShort(left, make([]byte, 2)); err != nil {
		return err
	}
	var recvs []*bip.LongRecv
	bufs := make([][]byte, max)
	for i := 0; i < max; i++ {
		bufs[i] = make([]byte, 50000)
		r, err := e.PostLong(left, uint32(i), adi.Bytes(bufs[i]), nil)
		if err != nil {
			return err
		}
		recvs = append(recvs, r)
	}
	if _, err := e.PostLong(left, 99, adi.Bytes(make([]byte, 10)), nil); !errors.Is(err, bip.ErrBusy) {
		return fmt.Errorf("long receive %d beyond maxlong=%d: err %v, want ErrBusy", max+1, max, err)
	}
	for i, r := range recvs {
		if err := e.Wait(r.Done, r.Err); err != nil || !bytes.Equal(bufs[i], payload(left, i, 50000)) {
			return fmt.Errorf("long receive %d: %v", i, err)
		}
	}
	for _, s := range sends {
		if err := e.Wait(s.Done, s.Err); err != nil {
			return err
		}
	}
	return nil
}
