package mpi_test

import (
	"fmt"

	"github.com/adimpi/adimpi/datatype"
	"github.com/adimpi/adimpi/mpi"
)

// The examples run in this package's test binary, an MPI singleton (rank 0
// of 1, see TestMain), so every message goes from rank 0 to itself; under
// mpirun the same code runs on every rank. A program calls mpi.Init first
// and mpi.Finalize at the end.

// A message to oneself: the non-blocking send lets the blocking receive
// that follows take it.
func ExampleSend() {
	world := mpi.World()
	q, err := mpi.Isend(world, []float64{1.5, 2.5, 3.5}, 0, 7)
	if err != nil {
		panic(err)
	}
	buf := make([]float64, 3)
	st, err := mpi.Recv(world, buf, mpi.AnySource, mpi.AnyTag)
	if err != nil {
		panic(err)
	}
	if _, err := q.Wait(); err != nil {
		panic(err)
	}
	fmt.Println(buf, "from rank", st.Source, "tag", st.Tag, "count", mpi.CountOf[float64](st))
	// Output: [1.5 2.5 3.5] from rank 0 tag 7 count 3
}

// Sendrecv exchanges with a ring neighbour without deadlock: here the ring
// has one rank, which is its own neighbour.
func ExampleSendrecv() {
	world := mpi.World()
	me, n := world.Rank(), world.Size()
	right, left := (me+1)%n, (me+n-1)%n
	got := make([]int, 1)
	if _, err := mpi.Sendrecv(world, []int{100 + me}, right, 0, got, left, 0); err != nil {
		panic(err)
	}
	fmt.Println("from the left:", got[0])
	// Output: from the left: 100
}

// Several non-blocking operations at once, completed together.
func ExampleWaitall() {
	world := mpi.World()
	a, b := make([]int32, 2), make([]int32, 2)
	var reqs []*mpi.Request
	for _, r := range []struct {
		buf []int32
		tag int
	}{{a, 1}, {b, 2}} {
		q, err := mpi.Irecv(world, r.buf, 0, r.tag)
		if err != nil {
			panic(err)
		}
		reqs = append(reqs, q)
	}
	for i, data := range [][]int32{{1, 2}, {3, 4}} {
		q, err := mpi.Isend(world, data, 0, i+1)
		if err != nil {
			panic(err)
		}
		reqs = append(reqs, q)
	}
	if _, err := mpi.Waitall(reqs); err != nil {
		panic(err)
	}
	fmt.Println(a, b)
	// Output: [1 2] [3 4]
}

// The root's buffer goes to every rank.
func ExampleBcast() {
	world := mpi.World()
	params := make([]float64, 2)
	if world.Rank() == 0 {
		params[0], params[1] = 0.25, 100
	}
	if err := mpi.Bcast(world, params, 0); err != nil {
		panic(err)
	}
	fmt.Println(params)
	// Output: [0.25 100]
}

// Element-wise sums at the root.
func ExampleReduce() {
	world := mpi.World()
	mine := []int{world.Rank() + 1, 10}
	total := make([]int, 2)
	if err := mpi.Reduce(world, mine, total, mpi.Sum, 0); err != nil {
		panic(err)
	}
	if world.Rank() == 0 {
		fmt.Println("sum at the root:", total)
	}
	// Output: sum at the root: [1 10]
}

// Element-wise maxima on every rank.
func ExampleAllreduce() {
	world := mpi.World()
	biggest := make([]float64, 2)
	if err := mpi.Allreduce(world, []float64{float64(world.Rank()), -1}, biggest, mpi.Max); err != nil {
		panic(err)
	}
	fmt.Println("max everywhere:", biggest)
	// Output: max everywhere: [0 -1]
}

// A slice of Go structs through a broadcast and a user-defined reduction,
// with a datatype from the struct's layout (padding included) and no
// package unsafe.
func ExampleTypedSlice() {
	type particle struct {
		ID   int32
		Mass float64 // 4 bytes of padding before it
	}
	pt, err := datatype.FromStruct(particle{})
	if err != nil {
		panic(err)
	}
	world := mpi.World()
	ps := []particle{{1, 2.5}, {2, 4}}
	buf, err := mpi.TypedSlice(ps, pt)
	if err != nil {
		panic(err)
	}
	if err := mpi.BcastBuf(world, buf, 0); err != nil {
		panic(err)
	}
	heaviest, err := mpi.NewOpFor(pt, func(in, inout []particle) {
		for i := range inout {
			if in[i].Mass > inout[i].Mass {
				inout[i] = in[i]
			}
		}
	}, true)
	if err != nil {
		panic(err)
	}
	defer heaviest.Free()
	out := make([]particle, 2)
	obuf, err := mpi.TypedSlice(out, pt)
	if err != nil {
		panic(err)
	}
	if err := mpi.AllreduceBuf(world, buf, obuf, heaviest); err != nil {
		panic(err)
	}
	fmt.Printf("%+v\n", out)
	// Output: [{ID:1 Mass:2.5} {ID:2 Mass:4}]
}

// Split makes one communicator per colour; ranks are ordered by key.
func ExampleComm_Split() {
	world := mpi.World()
	half, err := world.Split(world.Rank()%2, world.Rank())
	if err != nil {
		panic(err)
	}
	defer half.Free()
	sum := make([]int, 1)
	if err := mpi.Allreduce(half, []int{world.Rank()}, sum, mpi.Sum); err != nil {
		panic(err)
	}
	fmt.Println("rank", half.Rank(), "of", half.Size(), "in colour", world.Rank()%2, "sum", sum[0])
	// Output: rank 0 of 1 in colour 0 sum 0
}

// A matched probe takes the message it found out of matching, so that the
// receive sized from its status gets exactly that message even if other
// goroutines receive at the same time.
func ExampleMprobe() {
	world := mpi.World()
	q, err := mpi.Isend(world, []int64{4, 5, 6, 7}, 0, 3)
	if err != nil {
		panic(err)
	}
	m, st, err := mpi.Mprobe(world, mpi.AnySource, mpi.AnyTag)
	if err != nil {
		panic(err)
	}
	buf := make([]int64, mpi.CountOf[int64](st))
	if _, err := mpi.Mrecv(m, buf); err != nil {
		panic(err)
	}
	if _, err := q.Wait(); err != nil {
		panic(err)
	}
	fmt.Println(buf, "tag", st.Tag)
	// Output: [4 5 6 7] tag 3
}
