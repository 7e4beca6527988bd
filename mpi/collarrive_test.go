package mpi

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	goruntime "runtime"
	"sync"
	"testing"
	"time"

	"github.com/adimpi/adimpi/internal/shm"
	iboard "github.com/adimpi/adimpi/mpi/internal/board"
)

// arriveMembers makes n members of one core-built board in this process,
// each with a runtime of its own, as n processes would have.
func arriveMembers(t *testing.T, n int) ([]*runtime, []*board) {
	t.Helper()
	seg, err := iboard.Export(fmt.Sprintf("adimpi-test-arrive-%d", os.Getpid()), n)
	if err != nil {
		t.Fatal(err)
	}
	rs, bs := make([]*runtime, n), make([]*board, n)
	for p := range n {
		s := seg
		if p > 0 {
			if s, err = shm.Import(os.Getpid(), seg.FD, seg.Key); err != nil {
				t.Fatal(err)
			}
		}
		ib, err := iboard.New(s, p, n)
		if err != nil {
			t.Fatal(err)
		}
		// A job larger than the machine's cores: its boards are crowded
		// (arriving), and this process's n members stand for some of its
		// ranks.
		rs[p] = &runtime{dev: nullDevice{}, devName: "null", size: goruntime.NumCPU() + 1, poll: time.Millisecond, spin: time.Hour}
		bs[p] = &board{Board: ib, own: ib, rank: p, size: n}
	}
	for _, b := range bs {
		if err := b.own.Ready(); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, b := range bs {
			b.own.Close()
		}
	})
	return rs, bs
}

// affine composes maps x -> a*x + b (mod 2^64), each 16 bytes (a, b):
// associative and not commutative, so a result shows the order in which
// the operands were combined.
var affine = reducer{commute: false, apply: func(in, inout []byte) {
	a1, b1 := binary.LittleEndian.Uint64(in), binary.LittleEndian.Uint64(in[8:])
	a2, b2 := binary.LittleEndian.Uint64(inout), binary.LittleEndian.Uint64(inout[8:])
	binary.LittleEndian.PutUint64(inout, a1*a2)
	binary.LittleEndian.PutUint64(inout[8:], a1*b2+b1)
}}

// sumFloat64 is MPI_SUM on float64, whose result depends on the order of
// the additions.
var sumFloat64 = reducer{commute: true, apply: func(in, inout []byte) {
	for i := 0; i+8 <= len(inout); i += 8 {
		x := math.Float64frombits(binary.LittleEndian.Uint64(in[i:]))
		y := math.Float64frombits(binary.LittleEndian.Uint64(inout[i:]))
		binary.LittleEndian.PutUint64(inout[i:], math.Float64bits(x+y))
	}
}}

// allreduceAll runs boardReduce (all: an Allreduce) on every member at
// once, member p with in(p), and returns every member's result and error.
func allreduceAll(rs []*runtime, bs []*board, red reducer, in func(p int) []byte) ([][]byte, []error) {
	n := len(rs)
	outs, errs := make([][]byte, n), make([]error, n)
	var wg sync.WaitGroup
	for p := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			src := in(p)
			outs[p] = make([]byte, len(src))
			errs[p] = rs[p].boardReduce(bs[p], "MPI_Allreduce", src, outs[p], red, 0, true)
		}()
	}
	wg.Wait()
	return outs, errs
}

// TestAllreduceArrive: a small Allreduce on a core-built board, which one
// arrival round carries (boardAllreduceArrive), gives every member the
// same bytes, combines the operands in rank order (rank 0's leftmost) for
// an operation that does not commute, round after round and with other
// board rounds between; counts that differ fail on every member, whether
// all take the arrival round or one takes the line-fold path with a count
// too large for it, and the board works on afterwards.
func TestAllreduceArrive(t *testing.T) {
	const n = 6
	// Every member a thread of its own: a waiter's yield (a system call)
	// lets the kernel run another member, not another goroutine.
	defer goruntime.GOMAXPROCS(goruntime.GOMAXPROCS(n + 1))
	rs, bs := arriveMembers(t, n)
	for round := range 40 {
		mapOf := func(p int) []byte {
			m := make([]byte, 16)
			binary.LittleEndian.PutUint64(m, uint64(2*p+3+round))
			binary.LittleEndian.PutUint64(m[8:], uint64(p*7+round))
			return m
		}
		want := mapOf(n - 1)
		for p := n - 2; p >= 0; p-- {
			affine.apply(mapOf(p), want)
		}
		outs, errs := allreduceAll(rs, bs, affine, mapOf)
		if ok, _ := bs[0].own.Released(bs[0].seq.Load()); !ok {
			t.Fatalf("round %d: the Allreduce did not take an arrival round", round)
		}
		for p := range n {
			if errs[p] != nil || !bytes.Equal(outs[p], want) {
				t.Fatalf("round %d, member %d: %x, %v; want %x (rank 0's map applied last)", round, p, outs[p], errs[p], want)
			}
		}
		// Sums of values of very different sizes: the same bits on
		// every member.
		vals := func(p int) []byte {
			v := make([]byte, arriveMax)
			for i := 0; i < arriveMax; i += 8 {
				binary.LittleEndian.PutUint64(v[i:], math.Float64bits(math.Pow(10, float64((p*5+i+round)%31-15))))
			}
			return v
		}
		outs, errs = allreduceAll(rs, bs, sumFloat64, vals)
		for p := range n {
			if errs[p] != nil || !bytes.Equal(outs[p], outs[0]) {
				t.Fatalf("round %d, member %d: sum %x, %v; member 0 has %x", round, p, outs[p], errs[p], outs[0])
			}
		}
		if round%8 == 0 {
			var wg sync.WaitGroup
			for p := range n {
				wg.Add(1)
				go func() { defer wg.Done(); rs[p].boardBarrier(bs[p]) }()
			}
			wg.Wait()
		}
	}
	for _, big := range []int{16, arriveMax + 8} {
		// Member 2 passes big bytes, the others 8.
		_, errs := allreduceAll(rs, bs, sumFloat64, func(p int) []byte {
			if p == 2 {
				return make([]byte, big)
			}
			return make([]byte, 8)
		})
		for p, err := range errs {
			want := ErrTruncate
			if p == 2 {
				want = ErrCount
			}
			if !errors.Is(err, want) {
				t.Errorf("member 2 passing %d bytes: member %d got %v, want %v", big, p, err, want)
			}
		}
	}
	outs, errs := allreduceAll(rs, bs, sumFloat64, func(p int) []byte {
		v := make([]byte, 8)
		binary.LittleEndian.PutUint64(v, math.Float64bits(float64(p)))
		return v
	})
	for p := range n {
		if got := math.Float64frombits(binary.LittleEndian.Uint64(outs[p])); errs[p] != nil || got != n*(n-1)/2 {
			t.Errorf("after the mismatches, member %d: %v, %v", p, got, errs[p])
		}
	}
}
