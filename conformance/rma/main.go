// Command rma is adimpi's one-sided communication (MPI-3 RMA) conformance
// program: windows of every flavor, Put, Get, the accumulates with every
// predefined operation, request-based operations, derived datatypes on both
// sides, every synchronisation mode (fence, PSCW, locks, lock-all and
// flushes), a lock-based and a CompareAndSwap-based mutex under contention,
// FetchAndOp counters, epochs mixed with point-to-point and collectives,
// random operations against a model, and erroneous use.
//
//	mpirun -np 4 ./rma fence-put   # run one check
//	mpirun -np 4 ./rma all         # run every check in one job
//	rma -list                      # print the names of every check
//
// Every check runs on any number of ranks ≥ 1 and prints "PASS <check>"
// as the runner does (conformance/internal/runner).
package main

import (
	"errors"
	"flag"
	"math"
	"os"
	"runtime"
	"sort"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/adimpi/adimpi/conformance/internal/runner"
	"github.com/adimpi/adimpi/datatype"
	"github.com/adimpi/adimpi/mpi"
)

var checks = []runner.Check{
	{Name: "fence-put", MinRanks: 1, Run: checkFencePut},
	{Name: "fence-get", MinRanks: 1, Run: checkFenceGet},
	{Name: "large", MinRanks: 1, Run: checkLarge},
	{Name: "datatypes", MinRanks: 1, Run: checkDatatypes},
	{Name: "accumulate-ops", MinRanks: 1, Run: checkAccOps},
	{Name: "get-accumulate", MinRanks: 1, Run: checkGetAcc},
	{Name: "fetch-and-op", MinRanks: 1, Run: checkFetchAndOp},
	{Name: "cas-spinlock", MinRanks: 1, Run: checkCASSpinlock},
	{Name: "lock-mutex", MinRanks: 1, Run: checkLockMutex},
	{Name: "lockall-flush", MinRanks: 1, Run: checkLockAllFlush},
	{Name: "pscw", MinRanks: 1, Run: checkPSCW},
	{Name: "requests", MinRanks: 1, Run: checkRequests},
	{Name: "shared", MinRanks: 1, Run: checkShared},
	{Name: "dynamic", MinRanks: 1, Run: checkDynamic},
	{Name: "mixed", MinRanks: 1, Run: checkMixed},
	{Name: "random", MinRanks: 1, Run: checkRandom},
	{Name: "attributes", MinRanks: 1, Run: checkAttributes},
	{Name: "win-attr-errhandler", MinRanks: 1, Run: checkWinAttrErrhandler},
	{Name: "acc-queue", MinRanks: 1, Run: checkAccQueue},
	{Name: "errors", MinRanks: 1, Run: checkErrors},
	{Name: "passive-progress", MinRanks: 2, Run: checkPassiveProgress},
	{Name: "lock-fair", MinRanks: 1, Run: checkLockFair},
	{Name: "info", MinRanks: 1, Run: checkInfo},
	{Name: "lock-handoff", MinRanks: 1, Run: checkLockHandoff},
}

var (
	world      *mpi.Comm
	rank, size int
	create     = flag.Bool("create", false, "make the checks' windows with WinCreate (the program's memory: every operation through the device or the target's agent) rather than WinAllocate (memory that ranks of one host map)")
	iters      = flag.Int("iters", 200, "operations per rank in the contention checks (fetch-and-op, cas-spinlock, lock-mutex)")
	wantNative = flag.String("want-native", "", "passive-progress: fail unless the last rank reaches rank 0's WinCreate window natively (Win.Native) and the device counter of this name grew while it put, accumulated and fetched (e.g. rma_rdma_writes under via)")
	dieHolding = flag.Bool("die-holding", false, "instead of the checks: rank 1 takes an exclusive lock on rank 0's window and exits with status 3 while holding it, rank 2 asks for the lock; the launcher must end the job")
	failf      = runner.Failf
	must       = runner.Must
)

func main() {
	runner.Program{Name: "rma", Checks: checks, Setup: func(w *mpi.Comm) {
		world, rank, size = w, w.Rank(), w.Size()
		if *dieHolding {
			dieHoldingLock()
		}
	}}.Main()
}

// allocate makes a window of n elements of T on every rank: WinAllocate,
// or with -create WinCreate of the program's memory.
func allocate[T int32 | int64 | float64](n int, info *mpi.Info) (*mpi.Win, []T, error) {
	if !*create {
		return mpi.WinAllocate[T](world, n, info)
	}
	mem := make([]T, n)
	w, err := mpi.WinCreate(world, mem, info)
	return w, mem, err
}

// val is the value rank r puts at element i of target t's window.
func val(r, t, i int) int64 { return int64(r*1_000_000 + t*1_000 + i) }

func freeWin(w *mpi.Win) { must(w.Free(), "MPI_Win_free") }

// checkFencePut: every rank puts its block into every rank's window; after
// the fence each window holds every origin's block in its slot.
func checkFencePut() {
	const k = 5
	for _, alloc := range []bool{false, true} {
		var w *mpi.Win
		var mem []int64
		var err error
		if alloc {
			w, mem, err = mpi.WinAllocate[int64](world, k*size, nil)
		} else {
			mem = make([]int64, k*size)
			w, err = mpi.WinCreate(world, mem, nil)
		}
		must(err, "window (allocate=%v)", alloc)
		must(w.Fence(0), "first fence")
		for t := range size {
			src := make([]int64, k)
			for i := range src {
				src[i] = val(rank, t, i)
			}
			must(mpi.Put(w, src, t, rank*k), "MPI_Put to %d", t)
		}
		must(w.Fence(0), "second fence")
		for r := range size {
			for i := range k {
				if got, want := mem[r*k+i], val(r, rank, i); got != want {
					failf("allocate=%v: element %d from rank %d is %d, want %d", alloc, i, r, got, want)
				}
			}
		}
		must(w.Fence(mpi.ModeNoSucceed), "last fence")
		freeWin(w)
	}
}

// checkFenceGet: every rank reads every rank's window.
func checkFenceGet() {
	const k = 7
	w, mem, err := allocate[float64](k, nil)
	must(err, "MPI_Win_allocate")
	for i := range mem {
		mem[i] = float64(rank) + float64(i)/10
	}
	must(w.Fence(mpi.ModeNoPrecede), "fence")
	got := make([][]float64, size)
	for t := range size {
		got[t] = make([]float64, k)
		must(mpi.Get(w, got[t], t, 0), "MPI_Get from %d", t)
	}
	must(w.Fence(mpi.ModeNoSucceed), "fence")
	for t := range size {
		for i := range k {
			if want := float64(t) + float64(i)/10; got[t][i] != want {
				failf("element %d from rank %d is %v, want %v", i, t, got[t][i], want)
			}
		}
	}
	freeWin(w)
}

// checkLarge: puts and gets beyond the inline size (1 MiB), to the right
// neighbour and back.
func checkLarge() {
	const n = 1 << 17 // 1 MiB of int64
	w, mem, err := allocate[int64](n, nil)
	must(err, "MPI_Win_allocate")
	right, left := (rank+1)%size, (rank+size-1)%size
	src := make([]int64, n)
	for i := range src {
		src[i] = val(rank, right, i)
	}
	must(w.Fence(0), "fence")
	must(mpi.Put(w, src, right, 0), "MPI_Put")
	must(w.Fence(0), "fence")
	for i := range n {
		if want := val(left, rank, i); mem[i] != want {
			failf("element %d is %d, want %d", i, mem[i], want)
		}
	}
	back := make([]int64, n)
	must(mpi.Get(w, back, right, 0), "MPI_Get")
	must(w.Fence(0), "fence")
	for i := range n {
		if want := val(rank, right, i); back[i] != want {
			failf("read back element %d is %d, want %d", i, back[i], want)
		}
	}
	freeWin(w)
}

// checkDatatypes: a strided origin into a strided target, a contiguous
// origin into an indexed target, a Get into a vector, an accumulate
// through a vector, and a large strided put (its block list and data
// travel apart from the header on the generic path).
func checkDatatypes() {
	const rows, cols = 16, 8
	w, mem, err := allocate[int32](rows*cols, nil)
	must(err, "MPI_Win_allocate")
	col, err := datatype.Vector(rows, 1, cols, datatype.Int32)
	must(err, "vector")
	must(col.Commit(), "commit")
	idx, err := datatype.Indexed([]int{1, 2, 3}, []int{0, 10, 20}, datatype.Int32)
	must(err, "indexed")
	must(idx.Commit(), "commit")
	right, left := (rank+1)%size, (rank+size-1)%size

	// Column c of the right neighbour's matrix gets this rank's column c.
	local := make([]int32, rows*cols)
	for i := range local {
		local[i] = int32(1000*rank + i)
	}
	must(w.Fence(0), "fence")
	lb := mpi.Typed(int32Bytes(local[2:]), 1, col)
	must(w.PutBuf(lb, right, 2, 1, col), "MPI_Put column")
	must(w.PutBuf(mpi.Slice([]int32{-1, -2, -3, -4, -5, -6}), right, 3, 1, idx), "MPI_Put indexed")
	must(w.Fence(0), "fence")
	for r := range rows {
		if got, want := mem[r*cols+2], int32(1000*left+r*cols+2); got != want {
			failf("column 2 row %d is %d, want %d", r, got, want)
		}
	}
	for i, d := range []int{3, 13, 14, 23, 24, 25} {
		if got := mem[d]; got != int32(-1-i) {
			failf("indexed element at %d is %d, want %d", d, got, -1-i)
		}
	}
	// Get the left neighbour's column 5 into our column 6 of a scratch matrix.
	scratch := make([]int32, rows*cols)
	must(w.GetBuf(mpi.Typed(int32Bytes(scratch[6:]), 1, col), left, 5, 1, col), "MPI_Get column")
	// Accumulate 1 into column 4 of the right neighbour (which nothing
	// else writes), through the vector.
	ones := make([]int32, rows)
	for i := range ones {
		ones[i] = 1
	}
	must(w.AccumulateBuf(mpi.Slice(ones), right, 4, 1, col, mpi.Sum), "MPI_Accumulate column")
	must(w.Fence(0), "fence")
	for r := range rows {
		want := int32(0) // the left neighbour's column 5: never written, but for its indexed element 13
		if r*cols+5 == 13 {
			want = -2
		}
		if got := scratch[r*cols+6]; got != want {
			failf("column read: row %d is %d, want %d", r, got, want)
		}
		if got, want := mem[r*cols+4], int32(1); got != want {
			failf("accumulated column: row %d is %d, want %d", r, got, want)
		}
	}
	// A large strided put: 4096 blocks, more than one message holds.
	const big = 4096
	w2, mem2, err := allocate[int64](2*big, nil)
	must(err, "MPI_Win_allocate")
	every2, err := datatype.Vector(big, 1, 2, datatype.Int64)
	must(err, "vector")
	must(every2.Commit(), "commit")
	src := make([]int64, big)
	for i := range src {
		src[i] = val(rank, right, i)
	}
	must(w2.Fence(0), "fence")
	must(w2.PutBuf(mpi.Slice(src), right, 1, 1, every2), "MPI_Put strided")
	must(w2.Fence(0), "fence")
	for i := range big {
		if mem2[2*i] != 0 || mem2[2*i+1] != val(left, rank, i) {
			failf("strided put: elements %d,%d are %d,%d, want 0,%d", 2*i, 2*i+1, mem2[2*i], mem2[2*i+1], val(left, rank, i))
		}
	}
	freeWin(w2)
	freeWin(w)
}

// checkAccOps: every predefined operation, from every rank into every
// rank, against the sequential result. Replace and NoOp have one origin
// per element, so that the result does not depend on the order.
func checkAccOps() {
	type opCase struct {
		op   *mpi.Op
		fold func(a, b int64) int64
		init int64
	}
	b2i := func(v bool) int64 {
		if v {
			return 1
		}
		return 0
	}
	cases := []opCase{
		{mpi.Sum, func(a, b int64) int64 { return a + b }, 0},
		{mpi.Prod, func(a, b int64) int64 { return a * b }, 1},
		{mpi.Min, func(a, b int64) int64 { return min(a, b) }, 1 << 40},
		{mpi.Max, func(a, b int64) int64 { return max(a, b) }, -1 << 40},
		{mpi.Band, func(a, b int64) int64 { return a & b }, -1},
		{mpi.Bor, func(a, b int64) int64 { return a | b }, 0},
		{mpi.Bxor, func(a, b int64) int64 { return a ^ b }, 0},
		{mpi.Land, func(a, b int64) int64 { return b2i(a != 0 && b != 0) }, 1},
		{mpi.Lor, func(a, b int64) int64 { return b2i(a != 0 || b != 0) }, 0},
		{mpi.Lxor, func(a, b int64) int64 { return b2i((a != 0) != (b != 0)) }, 0},
	}
	const k = 6
	contrib := func(r, i int) int64 { return int64((r*7+i*3)%5 + 1 + (r&i)&1*8) }
	w, mem, err := allocate[int64](k, nil)
	must(err, "MPI_Win_allocate")
	for _, c := range cases {
		for i := range mem {
			mem[i] = c.init
		}
		must(w.Fence(0), "fence")
		for t := range size {
			src := make([]int64, k)
			for i := range src {
				src[i] = contrib(rank, i)
			}
			must(mpi.Accumulate(w, src, t, 0, c.op), "MPI_Accumulate %s to %d", c.op.Name(), t)
		}
		must(w.Fence(0), "fence")
		for i := range k {
			want := c.init
			for r := range size {
				want = c.fold(want, contrib(r, i))
			}
			if mem[i] != want {
				failf("%s: element %d is %d, want %d", c.op.Name(), i, mem[i], want)
			}
		}
	}
	// Replace and NoOp: rank i%size replaces element i; NoOp changes nothing.
	must(w.Fence(0), "fence")
	for t := range size {
		for i := rank; i < k; i += size {
			must(mpi.Accumulate(w, []int64{val(rank, t, i)}, t, i, mpi.Replace), "MPI_Accumulate MPI_REPLACE")
		}
		must(mpi.Accumulate(w, make([]int64, k), t, 0, mpi.NoOp), "MPI_Accumulate MPI_NO_OP")
	}
	must(w.Fence(0), "fence")
	for i := range k {
		if want := val(i%size, rank, i); mem[i] != want {
			failf("MPI_REPLACE: element %d is %d, want %d", i, mem[i], want)
		}
	}
	// Floats: Sum of float64 and Max of float32 through the Buf form.
	wf, memf, err := allocate[float64](1, nil)
	must(err, "MPI_Win_allocate")
	must(wf.Fence(0), "fence")
	for t := range size {
		must(mpi.Accumulate(wf, []float64{0.5 * float64(rank+1)}, t, 0, mpi.Sum), "MPI_Accumulate float64")
	}
	must(wf.Fence(0), "fence")
	if want := 0.25 * float64(size) * float64(size+1); math.Abs(memf[0]-want) > 1e-9 {
		failf("float64 sum is %v, want %v", memf[0], want)
	}
	freeWin(wf)
	freeWin(w)
}

// checkGetAcc: GetAccumulate returns the value before the operation;
// with NoOp it is an atomic read.
func checkGetAcc() {
	w, mem, err := allocate[int32](2, nil)
	must(err, "MPI_Win_allocate")
	mem[0], mem[1] = 10, 20
	must(w.Fence(0), "fence")
	old := make([]int32, 2)
	right := (rank + 1) % size
	must(mpi.GetAccumulate(w, []int32{1, 2}, old, right, 0, mpi.Sum), "MPI_Get_accumulate")
	must(w.Fence(0), "fence")
	if old[0] < 10 || old[0] >= int32(10+size) || (old[0]-10)*2 != old[1]-20 {
		failf("old values %v do not come from [10,20] plus whole increments", old)
	}
	if mem[0] != 11 || mem[1] != 22 {
		failf("after one accumulate from the left the window holds %v, want [11 22]", mem)
	}
	must(mpi.GetAccumulate(w, nil, old, right, 0, mpi.NoOp), "MPI_Get_accumulate MPI_NO_OP")
	must(w.Fence(0), "fence")
	if old[0] != 11 || old[1] != 22 {
		failf("atomic read gave %v, want [11 22]", old)
	}
	freeWin(w)
}

// checkFetchAndOp: every rank increments a counter on rank 0 (and on
// itself) iters times under LockAll; the old values seen are exactly
// 0..n*iters-1, with no increment lost.
func checkFetchAndOp() {
	w, mem, err := allocate[int64](1, nil)
	must(err, "MPI_Win_allocate")
	must(mpi.Barrier(world), "barrier")
	must(w.LockAll(0), "MPI_Win_lock_all")
	seen := make([]int64, *iters)
	for i := range seen {
		v, err := mpi.FetchAndOp(w, int64(1), 0, 0, mpi.Sum)
		must(err, "MPI_Fetch_and_op %d", i)
		seen[i] = v
	}
	must(w.UnlockAll(), "MPI_Win_unlock_all")
	all := make([]int64, *iters*size)
	must(mpi.Allgather(world, seen, all), "allgather")
	hit := make([]bool, len(all))
	for _, v := range all {
		if v < 0 || int(v) >= len(all) || hit[v] {
			failf("FetchAndOp returned %d twice or out of [0,%d): an increment was lost", v, len(all))
		}
		hit[v] = true
	}
	must(mpi.Barrier(world), "barrier")
	if rank == 0 && mem[0] != int64(len(all)) {
		failf("counter is %d, want %d", mem[0], len(all))
	}
	freeWin(w)
}

// checkCASSpinlock: a mutex made of CompareAndSwap on rank 0 guards a
// read-modify-write (Get, add, Put) of a counter on the last rank.
func checkCASSpinlock() {
	w, mem, err := allocate[int64](2, nil)
	must(err, "MPI_Win_allocate")
	last := size - 1
	must(w.LockAll(0), "MPI_Win_lock_all")
	n := max(1, *iters/4)
	for i := range n {
		for {
			old, err := mpi.CompareAndSwap(w, int64(rank+1), 0, 0, 0)
			must(err, "MPI_Compare_and_swap (iteration %d)", i)
			if old == 0 {
				break
			}
		}
		v := []int64{0}
		must(mpi.Get(w, v, last, 1), "MPI_Get")
		must(w.Flush(last), "MPI_Win_flush")
		v[0]++
		must(mpi.Put(w, v, last, 1), "MPI_Put")
		must(w.Flush(last), "MPI_Win_flush")
		old, err := mpi.CompareAndSwap(w, 0, int64(rank+1), 0, 0)
		must(err, "MPI_Compare_and_swap release")
		if old != int64(rank+1) {
			failf("released a spinlock held by %d, not by this rank", old-1)
		}
	}
	must(w.UnlockAll(), "MPI_Win_unlock_all")
	must(mpi.Barrier(world), "barrier")
	if rank == last && mem[1] != int64(n*size) {
		failf("counter is %d, want %d: the spinlock let two ranks in", mem[1], n*size)
	}
	freeWin(w)
}

// checkLockMutex: exclusive locks on rank 0 guard a non-atomic
// read-modify-write there; shared locks let readers in together.
func checkLockMutex() {
	w, mem, err := allocate[int64](1, nil)
	must(err, "MPI_Win_allocate")
	n := max(1, *iters/4)
	for range n {
		must(w.Lock(mpi.LockExclusive, 0, 0), "MPI_Win_lock exclusive")
		v := []int64{0}
		must(mpi.Get(w, v, 0, 0), "MPI_Get")
		must(w.Flush(0), "MPI_Win_flush")
		v[0]++
		must(mpi.Put(w, v, 0, 0), "MPI_Put")
		must(w.Unlock(0), "MPI_Win_unlock")
	}
	must(mpi.Barrier(world), "barrier")
	must(w.Lock(mpi.LockShared, 0, 0), "MPI_Win_lock shared")
	v := []int64{0}
	must(mpi.Get(w, v, 0, 0), "MPI_Get")
	must(w.Unlock(0), "MPI_Win_unlock")
	if v[0] != int64(n*size) {
		failf("counter is %d, want %d: exclusive locks let two ranks in", v[0], n*size)
	}
	must(mpi.Barrier(world), "barrier")
	_ = mem
	freeWin(w)
}

// checkLockAllFlush: puts made visible by Flush while the epoch stays
// open, read back under the same LockAll; FlushLocal and FlushLocalAll.
func checkLockAllFlush() {
	w, mem, err := allocate[int64](size, nil)
	must(err, "MPI_Win_allocate")
	must(w.LockAll(0), "MPI_Win_lock_all")
	for t := range size {
		must(mpi.Put(w, []int64{val(rank, t, 0)}, t, rank), "MPI_Put")
		must(w.FlushLocal(t), "MPI_Win_flush_local")
	}
	must(w.FlushAll(), "MPI_Win_flush_all")
	must(w.FlushLocalAll(), "MPI_Win_flush_local_all")
	right := (rank + 1) % size
	got := []int64{0}
	must(mpi.Get(w, got, right, rank), "MPI_Get")
	must(w.Flush(right), "MPI_Win_flush")
	if want := val(rank, right, 0); got[0] != want {
		failf("read back %d after Flush, want %d", got[0], want)
	}
	must(w.UnlockAll(), "MPI_Win_unlock_all")
	must(mpi.Barrier(world), "barrier")
	must(w.Sync(), "MPI_Win_sync")
	for r := range size {
		if want := val(r, rank, 0); mem[r] != want {
			failf("element %d is %d, want %d", r, mem[r], want)
		}
	}
	freeWin(w)
}

// checkPSCW: a ring (each rank exposes to its left neighbour and accesses
// its right one), then everyone to everyone, with Test for the wait.
func checkPSCW() {
	w, mem, err := allocate[int64](size+1, nil)
	must(err, "MPI_Win_allocate")
	g, err := world.Group()
	must(err, "group")
	right, left := (rank+1)%size, (rank+size-1)%size
	lg, err := g.Incl([]int{left})
	must(err, "incl")
	rg, err := g.Incl([]int{right})
	must(err, "incl")
	for round := range 3 {
		must(w.Post(lg, 0), "MPI_Win_post")
		must(w.Start(rg, 0), "MPI_Win_start")
		must(mpi.Put(w, []int64{val(rank, right, round)}, right, 0), "MPI_Put")
		must(mpi.Accumulate(w, []int64{int64(round)}, right, size, mpi.Sum), "MPI_Accumulate")
		must(w.Complete(), "MPI_Win_complete")
		must(w.Wait(), "MPI_Win_wait")
		if want := val(left, rank, round); mem[0] != want {
			failf("round %d: element 0 is %d, want %d", round, mem[0], want)
		}
	}
	// Everyone to everyone, waiting with Test.
	must(w.Post(g, mpi.ModeNoStore), "MPI_Win_post all")
	must(w.Start(g, 0), "MPI_Win_start all")
	for t := range size {
		must(mpi.Put(w, []int64{val(rank, t, 9)}, t, rank), "MPI_Put")
	}
	must(w.Complete(), "MPI_Win_complete")
	for {
		done, err := w.Test()
		must(err, "MPI_Win_test")
		if done {
			break
		}
	}
	for r := range size {
		if want := val(r, rank, 9); mem[r] != want {
			failf("element %d is %d, want %d", r, mem[r], want)
		}
	}
	must(mpi.Barrier(world), "barrier")
	freeWin(w)
}

// checkRequests: Rput, Rget, Raccumulate and RgetAccumulate complete
// through their requests inside a lock-all epoch.
func checkRequests() {
	w, mem, err := allocate[int64](3, nil)
	must(err, "MPI_Win_allocate")
	must(w.LockAll(0), "MPI_Win_lock_all")
	right := (rank + 1) % size
	q, err := mpi.Rput(w, []int64{val(rank, right, 0)}, right, 0)
	must(err, "MPI_Rput")
	_, err = q.Wait()
	must(err, "wait MPI_Rput")
	q, err = mpi.Raccumulate(w, []int64{5}, right, 1, mpi.Sum)
	must(err, "MPI_Raccumulate")
	_, err = q.Wait()
	must(err, "wait MPI_Raccumulate")
	must(w.Flush(right), "MPI_Win_flush")
	got := []int64{0, 0}
	q, err = mpi.Rget(w, got, right, 0)
	must(err, "MPI_Rget")
	_, err = q.Wait()
	must(err, "wait MPI_Rget")
	if got[0] != val(rank, right, 0) || got[1] != 5 {
		failf("Rget after Rput and Raccumulate gave %v, want [%d 5]", got, val(rank, right, 0))
	}
	old := []int64{0}
	q, err = mpi.RgetAccumulate(w, []int64{1}, old, right, 2, mpi.Sum)
	must(err, "MPI_Rget_accumulate")
	_, err = q.Wait()
	must(err, "wait MPI_Rget_accumulate")
	if old[0] != 0 {
		failf("RgetAccumulate's old value is %d, want 0", old[0])
	}
	must(w.UnlockAll(), "MPI_Win_unlock_all")
	must(mpi.Barrier(world), "barrier")
	if mem[2] != 1 {
		failf("element 2 is %d, want 1", mem[2])
	}
	freeWin(w)
}

// checkShared: a shared window's memory is loaded and stored directly by
// the other ranks, and RMA on it works as on any window.
func checkShared() {
	node, err := world.SplitType(mpi.SplitTypeShared, rank)
	must(err, "split by host")
	oneHost := node.Size() == size
	must(node.Free(), "free")
	w, mine, err := mpi.WinAllocateShared[int64](world, 4, nil)
	if !oneHost {
		// The ranks span hosts: no memory is shared among them all.
		wantErr(err, mpi.ErrRMAShared, "MPI_Win_allocate_shared across hosts")
		return
	}
	must(err, "MPI_Win_allocate_shared")
	must(w.LockAll(0), "MPI_Win_lock_all")
	right := (rank + 1) % size
	theirs, err := mpi.WinSharedQuery[int64](w, right)
	must(err, "MPI_Win_shared_query")
	if len(theirs) != 4 {
		failf("shared query gave %d elements, want 4", len(theirs))
	}
	theirs[0] = val(rank, right, 0) // a plain store into the neighbour's memory
	must(w.Sync(), "MPI_Win_sync")
	must(mpi.Barrier(world), "barrier")
	must(w.Sync(), "MPI_Win_sync")
	left := (rank + size - 1) % size
	if want := val(left, rank, 0); mine[0] != want {
		failf("direct store from the left: %d, want %d", mine[0], want)
	}
	must(mpi.Put(w, []int64{7}, right, 1), "MPI_Put")
	must(mpi.Accumulate(w, []int64{1}, 0, 2, mpi.Sum), "MPI_Accumulate")
	must(w.FlushAll(), "MPI_Win_flush_all")
	must(w.UnlockAll(), "MPI_Win_unlock_all")
	must(mpi.Barrier(world), "barrier")
	if mine[1] != 7 {
		failf("put through a shared window: %d, want 7", mine[1])
	}
	if rank == 0 && mine[2] != int64(size) {
		failf("accumulates through a shared window: %d, want %d", mine[2], size)
	}
	freeWin(w)
}

// checkDynamic: memory attached after creation, addressed by its address;
// an access outside attached memory fails with ErrRMARange.
func checkDynamic() {
	w, err := mpi.WinCreateDynamic(world, nil)
	must(err, "MPI_Win_create_dynamic")
	mem := make([]byte, 64)
	addr, err := w.Attach(mem)
	must(err, "MPI_Win_attach")
	addrs := make([]int64, size)
	must(mpi.Allgather(world, []int64{int64(addr)}, addrs), "allgather")
	right := (rank + 1) % size
	must(w.Lock(mpi.LockExclusive, right, 0), "MPI_Win_lock")
	must(w.PutBuf(mpi.Slice([]byte("dynamic!")), right, int(addrs[right])+8, 8, datatype.Byte), "MPI_Put")
	must(w.Unlock(right), "MPI_Win_unlock")
	must(mpi.Barrier(world), "barrier")
	if string(mem[8:16]) != "dynamic!" {
		failf("attached memory holds %q, want %q", mem[8:16], "dynamic!")
	}
	if right != rank || size == 1 {
		must(w.Lock(mpi.LockShared, right, 0), "MPI_Win_lock")
		err = w.PutBuf(mpi.Slice([]byte("x")), right, int(addrs[right])+64, 1, datatype.Byte)
		if err == nil {
			err = w.Unlock(right)
		} else {
			must(w.Unlock(right), "MPI_Win_unlock")
		}
		wantErr(err, mpi.ErrRMARange, "put past attached memory")
	}
	must(mpi.Barrier(world), "barrier")
	must(w.Detach(mem), "MPI_Win_detach")
	wantErr(w.Detach(mem), mpi.ErrRMAAttach, "MPI_Win_detach")
	freeWin(w)
}

// checkMixed: an epoch interleaved with point-to-point and collectives on
// the same communicator.
func checkMixed() {
	w, mem, err := allocate[int64](2, nil)
	must(err, "MPI_Win_allocate")
	right, left := (rank+1)%size, (rank+size-1)%size
	for round := range 4 {
		must(w.Fence(0), "fence")
		must(mpi.Accumulate(w, []int64{1}, right, 0, mpi.Sum), "MPI_Accumulate")
		sum := []int64{0}
		must(mpi.Allreduce(world, []int64{int64(rank)}, sum, mpi.Sum), "allreduce")
		got := []int64{0}
		_, err := mpi.Sendrecv(world, []int64{int64(round)}, right, 5, got, left, 5)
		must(err, "sendrecv")
		must(mpi.Put(w, got, right, 1), "MPI_Put")
		must(w.Fence(0), "fence")
		if mem[0] != int64(round+1) || mem[1] != int64(round) || sum[0] != int64(size*(size-1)/2) {
			failf("round %d: window %v, sum %d", round, mem, sum[0])
		}
	}
	freeWin(w)
}

// checkRandom: random puts and accumulates in fence epochs against a
// model every rank computes from the same seed.
func checkRandom() {
	const k, epochs, ops = 16, 6, 12
	w, mem, err := allocate[int64](k, nil)
	must(err, "MPI_Win_allocate")
	model := make([][]int64, size)
	for i := range model {
		model[i] = make([]int64, k)
	}
	seed := uint64(12345)
	next := func() uint64 {
		seed = seed*6364136223846793005 + 1442695040888963407
		return seed >> 33
	}
	must(w.Fence(0), "fence")
	for e := range epochs {
		// In each epoch an element is either put by one origin or summed
		// into by any: the outcome does not depend on the order.
		owner := make([][]int, size) // -1: accumulated
		for t := range owner {
			owner[t] = make([]int, k)
			for i := range owner[t] {
				owner[t][i] = int(next()%uint64(size+1)) - 1
			}
		}
		for r := range size {
			for range ops {
				t, i := int(next()%uint64(size)), int(next()%k)
				v := int64(next() % 1000)
				if owner[t][i] >= 0 && owner[t][i] != r {
					continue
				}
				if owner[t][i] == r {
					model[t][i] = v
				} else {
					model[t][i] += v
				}
				if r != rank {
					continue
				}
				if owner[t][i] == r {
					must(mpi.Put(w, []int64{v}, t, i), "epoch %d: MPI_Put", e)
				} else {
					must(mpi.Accumulate(w, []int64{v}, t, i, mpi.Sum), "epoch %d: MPI_Accumulate", e)
				}
			}
		}
		must(w.Fence(0), "fence")
		for i := range k {
			if mem[i] != model[rank][i] {
				failf("epoch %d: element %d is %d, the model says %d", e, i, mem[i], model[rank][i])
			}
		}
		// The next epoch's operations may reach this rank's memory as soon
		// as their origins have left the fence: look first.
		must(mpi.Barrier(world), "barrier")
	}
	freeWin(w)
}

// checkAttributes: base, size, displacement unit, flavor, model, group, name.
func checkAttributes() {
	w, mem, err := mpi.WinAllocate[int32](world, 5, nil)
	must(err, "MPI_Win_allocate")
	if w.Size() != 20 || w.DispUnit() != 4 || len(w.Base()) != 20 || &w.Base()[0] != (*byte)(ptrOf(mem)) {
		failf("size %d, disp unit %d, base of %d bytes: want 20, 4, the allocated memory", w.Size(), w.DispUnit(), len(w.Base()))
	}
	if w.Flavor() != mpi.FlavorAllocate || w.Model() != mpi.ModelUnified {
		failf("flavor %v, model %v", w.Flavor(), w.Model())
	}
	g, err := w.Group()
	must(err, "MPI_Win_get_group")
	if g.Size() != size || g.Rank() != rank {
		failf("group of %d with rank %d, want %d and %d", g.Size(), g.Rank(), size, rank)
	}
	w.SetName("halo")
	if w.Name() != "halo" {
		failf("name %q", w.Name())
	}
	freeWin(w)
	wc, err := mpi.WinCreate(world, make([]float64, 3), nil)
	must(err, "MPI_Win_create")
	if wc.Flavor() != mpi.FlavorCreate || wc.DispUnit() != 8 {
		failf("flavor %v disp unit %d", wc.Flavor(), wc.DispUnit())
	}
	freeWin(wc)
}

// rmaCalls is how many remote reads and writes the device made for
// one-sided operations (netvm's process_vm_readv/writev, via's RDMA
// descriptors; 0 on devices without them).
func rmaCalls() int64 {
	c := mpi.Counters()
	return c["rma_remote_writes"] + c["rma_remote_reads"] + c["rma_rdma_writes"] + c["rma_rdma_reads"]
}

// checkAccQueue: the last rank's accumulates on rank 0's window are
// carried out in call order with its other operations there (a Replace, a
// Sum, then a FetchAndOp that must see both), touch no byte but their own
// (rank 1 puts into a word between two of them while they may be pending),
// and where the last rank reaches rank 0's memory natively (WinCreate
// windows of one host on netvm and via) 200 accumulates before a Flush
// cost a remote read and write per range of bytes they touch, not two
// device calls each.
func checkAccQueue() {
	const n = 100
	w, mem, err := allocate[int64](4, nil)
	must(err, "MPI_Win_allocate")
	last := size - 1
	must(mpi.Barrier(world), "barrier")
	if rank == last {
		must(w.Lock(mpi.LockShared, 0, 0), "MPI_Win_lock")
		before := rmaCalls()
		for i := range n {
			must(mpi.Accumulate(w, []int64{1}, 0, 0, mpi.Sum), "MPI_Accumulate %d", i)
			must(mpi.Accumulate(w, []int64{2}, 0, 1, mpi.Sum), "MPI_Accumulate %d", i)
		}
		must(w.Flush(0), "MPI_Win_flush")
		if calls := rmaCalls() - before; w.Native(0) && calls > 4 {
			failf("%d accumulates and a Flush made %d remote reads and writes, want at most 4 (one read and one write of the 16 bytes they touch)", 2*n, calls)
		}
		must(mpi.Accumulate(w, []int64{5}, 0, 3, mpi.Replace), "MPI_Accumulate")
		must(mpi.Accumulate(w, []int64{1}, 0, 3, mpi.Sum), "MPI_Accumulate")
		old, err := mpi.FetchAndOp(w, int64(10), 0, 3, mpi.Sum)
		must(err, "MPI_Fetch_and_op")
		if old != 6 {
			failf("FetchAndOp after Accumulate(Replace 5) and Accumulate(Sum 1) saw %d, want 6", old)
		}
		must(w.Unlock(0), "MPI_Win_unlock")
	}
	must(mpi.Barrier(world), "barrier")
	if rank == 0 && (mem[0] != n || mem[1] != 2*n || mem[3] != 16) {
		failf("rank 0's words are %v, want [%d %d _ 16]", mem, n, 2*n)
	}
	// Rank 0 may still be in the barrier, serving, when the others leave
	// it: the next operations wait until it has looked.
	must(mpi.Barrier(world), "barrier")
	if size >= 3 {
		token := []int32{0}
		switch rank {
		case last:
			must(w.Lock(mpi.LockShared, 0, 0), "MPI_Win_lock")
			must(mpi.Accumulate(w, []int64{1}, 0, 0, mpi.Sum), "MPI_Accumulate")
			must(mpi.Accumulate(w, []int64{1}, 0, 2, mpi.Sum), "MPI_Accumulate")
			must(mpi.Send(world, token, 1, 0), "send")
			_, err := mpi.Recv(world, token, 1, 0)
			must(err, "recv")
			must(w.Unlock(0), "MPI_Win_unlock")
		case 1:
			_, err := mpi.Recv(world, token, last, 0)
			must(err, "recv")
			must(w.Lock(mpi.LockShared, 0, 0), "MPI_Win_lock")
			must(mpi.Put(w, []int64{77}, 0, 1), "MPI_Put")
			must(w.Unlock(0), "MPI_Win_unlock")
			must(mpi.Send(world, token, last, 0), "send")
		}
		must(mpi.Barrier(world), "barrier")
		if rank == 0 && (mem[0] != n+1 || mem[1] != 77 || mem[2] != 1) {
			failf("rank 0's words are %v, want [%d 77 1 _]: the accumulates around word 1 overwrote rank 1's Put", mem, n+1)
		}
	}
	must(mpi.Barrier(world), "barrier")
	freeWin(w)
}

// checkWinAttrErrhandler: a window's attributes and error handler are its
// own. Its communicator's attribute callbacks do not run when the window
// is made or freed, nor its communicator's handler for the window's
// errors; the window's handler starts as ErrorsReturn, a NewWinErrhandler's
// gets the window and the error, a communicator's handler is refused; an
// attribute's Delete callback runs on overwrite, on DeleteAttr and at
// Free; the predefined keys give the window's base, size, displacement
// unit, flavor and model, and cannot be set.
func checkWinAttrErrhandler() {
	c, err := world.Dup()
	must(err, "MPI_Comm_dup")
	var copies, commDeletes, commRaised int
	ck := &mpi.Keyval{
		Copy:   func(_ *mpi.Comm, v any) (any, bool) { copies++; return v, true },
		Delete: func(*mpi.Comm, any) error { commDeletes++; return nil },
	}
	must(c.SetAttr(ck, 1), "MPI_Comm_set_attr")
	must(c.SetErrhandler(mpi.NewErrhandler(func(*mpi.Comm, error) { commRaised++ })), "MPI_Comm_set_errhandler")
	var w *mpi.Win
	if *create {
		w, err = mpi.WinCreate(c, make([]int64, 4), nil)
	} else {
		w, _, err = mpi.WinAllocate[int64](c, 4, nil)
	}
	must(err, "window")
	if copies != 0 {
		failf("making a window ran its communicator's attribute Copy callback %d times", copies)
	}
	right := (rank + 1) % size

	// The error handler.
	if h, err := w.GetErrhandler(); err != nil || h != mpi.ErrorsReturn {
		failf("a new window's error handler is %v (%v), want MPI_ERRORS_RETURN", h, err)
	}
	wantErr(mpi.Put(w, []int64{1}, right, 0), mpi.ErrRMASync, "MPI_Put outside an epoch")
	if commRaised != 0 {
		failf("a window's error ran its communicator's handler")
	}
	var raised []error
	var on *mpi.Win
	wh := mpi.NewWinErrhandler(func(x *mpi.Win, err error) { on, raised = x, append(raised, err) })
	must(w.SetErrhandler(wh), "MPI_Win_set_errhandler")
	if h, err := w.GetErrhandler(); err != nil || h != wh {
		failf("MPI_Win_get_errhandler gave %v (%v), not the handler set", h, err)
	}
	err = mpi.Get(w, []int64{1}, right, 0)
	wantErr(err, mpi.ErrRMASync, "MPI_Get outside an epoch")
	if len(raised) != 1 || raised[0] != err || on != w {
		failf("the window's handler got %v on %v, want the error returned (%v) on the window", raised, on, err)
	}
	mine := errors.New("the program's error")
	if w.CallErrhandler(mine) != mine || len(raised) != 2 || raised[1] != mine {
		failf("MPI_Win_call_errhandler: the handler got %v", raised)
	}
	wantErr(w.SetErrhandler(mpi.NewErrhandler(func(*mpi.Comm, error) {})), mpi.ErrArg, "MPI_Win_set_errhandler with a communicator's handler")
	if len(raised) != 3 || commRaised != 0 {
		failf("the refused MPI_Win_set_errhandler ran %d window and %d communicator handlers, want 1 and 0", len(raised)-2, commRaised)
	}
	wantErr(c.SetErrhandler(wh), mpi.ErrArg, "MPI_Comm_set_errhandler with a window's handler")
	must(w.SetErrhandler(nil), "MPI_Win_set_errhandler")

	// The attributes.
	var deleted []any
	k := &mpi.WinKeyval{Delete: func(x *mpi.Win, v any) error {
		if x != w {
			failf("a Delete callback got window %v, want %v", x, w)
		}
		deleted = append(deleted, v)
		return nil
	}}
	plain := &mpi.WinKeyval{}
	must(w.SetAttr(k, "a"), "MPI_Win_set_attr")
	must(w.SetAttr(plain, 7), "MPI_Win_set_attr")
	if v, ok := w.Attr(k); !ok || v != "a" {
		failf("MPI_Win_get_attr gave %v, %v; want a", v, ok)
	}
	must(w.SetAttr(k, "b"), "MPI_Win_set_attr")
	if len(deleted) != 1 || deleted[0] != "a" {
		failf("overwriting an attribute deleted %v, want [a]", deleted)
	}
	must(w.DeleteAttr(k), "MPI_Win_delete_attr")
	if _, ok := w.Attr(k); ok || len(deleted) != 2 || deleted[1] != "b" {
		failf("after MPI_Win_delete_attr the attribute is there: %v; deleted %v, want [a b]", ok, deleted)
	}
	wantErr(w.DeleteAttr(k), mpi.ErrArg, "MPI_Win_delete_attr of an absent attribute")
	must(w.SetAttr(k, "c"), "MPI_Win_set_attr")
	if _, ok := c.Attr(ck); !ok {
		failf("the communicator lost its attribute")
	}
	base, _ := w.Attr(mpi.KeyWinBase)
	wsize, _ := w.Attr(mpi.KeyWinSize)
	unit, _ := w.Attr(mpi.KeyWinDispUnit)
	flavor, _ := w.Attr(mpi.KeyWinCreateFlavor)
	model, _ := w.Attr(mpi.KeyWinModel)
	if b, ok := base.([]byte); !ok || len(b) != 32 || &b[0] != &w.Base()[0] || wsize != 32 || unit != 8 || flavor != w.Flavor() || model != mpi.ModelUnified {
		failf("predefined attributes: base %T of %d bytes, size %v, unit %v, flavor %v, model %v", base, len(w.Base()), wsize, unit, flavor, model)
	}
	wantErr(w.SetAttr(mpi.KeyWinSize, 64), mpi.ErrArg, "MPI_Win_set_attr(MPI_WIN_SIZE)")
	freeWin(w)
	if len(deleted) != 3 || deleted[2] != "c" {
		failf("MPI_Win_free deleted %v, want [a b c]", deleted)
	}
	if commDeletes != 0 {
		failf("freeing a window ran its communicator's attribute Delete callback %d times", commDeletes)
	}
	must(c.Free(), "MPI_Comm_free")
	if commDeletes != 1 {
		failf("MPI_Comm_free ran the attribute's Delete callback %d times, want 1", commDeletes)
	}
}

// checkPassiveProgress: the last rank locks rank 0's window, puts,
// accumulates and fetches-and-adds a word and unlocks, while rank 0
// computes. Where every one of those needs nothing of the target
// (w.Native: memory mapped by the origin, or the device's remote write and
// read under the target's control block), rank 0 computes without calling
// MPI at all until the word arrives, and the check fails if it does not
// within 30 s. Under mpirun -async-progress rank 0 polls with Sync (the
// progress goroutine serves the origin); otherwise it waits in a receive
// (a target must call MPI then: docs/rma.md).
func checkPassiveProgress() {
	for _, alloc := range []bool{true, false} {
		var w *mpi.Win
		var mem []int64
		var err error
		if alloc {
			w, mem, err = mpi.WinAllocate[int64](world, 1, nil)
		} else {
			mem = make([]int64, 1)
			w, err = mpi.WinCreate(world, mem, nil)
		}
		must(err, "window (allocate=%v)", alloc)
		last := size - 1
		native := []int64{0}
		if rank == last && w.Native(0) {
			native[0] = 1
		}
		must(mpi.Bcast(world, native, last), "bcast")
		var before int64
		if *wantNative != "" && !alloc && rank == last {
			if native[0] == 0 {
				failf("-want-native: rank %d does not reach rank 0's WinCreate window natively (Win.Native(0) is false)", rank)
			}
			before = mpi.Counters()[*wantNative]
		}
		switch {
		case rank == last:
			must(w.Lock(mpi.LockExclusive, 0, 0), "MPI_Win_lock")
			must(mpi.Put(w, []int64{41}, 0, 0), "MPI_Put")
			must(mpi.Accumulate(w, []int64{1}, 0, 0, mpi.Sum), "MPI_Accumulate")
			old, err := mpi.FetchAndOp(w, int64(1), 0, 0, mpi.Sum)
			must(err, "MPI_Fetch_and_op")
			if old != 42 {
				failf("allocate=%v: FetchAndOp after Put 41 and Accumulate 1 returned %d, want 42", alloc, old)
			}
			must(w.Unlock(0), "MPI_Win_unlock")
			if *wantNative != "" && !alloc {
				if after := mpi.Counters()[*wantNative]; after <= before {
					failf("-want-native: device counter %s did not grow (%d before the Put, %d after the Unlock): the operations did not take the device's remote memory access", *wantNative, before, after)
				}
			}
			must(mpi.Send(world, []int64{1}, 0, 9), "send")
		case rank == 0 && native[0] == 1 && !mpi.AsyncProgress():
			// A compute loop that calls no MPI at all: only the
			// origin's remote writes can end it. The deadline turns a
			// hang into a failure.
			deadline := time.Now().Add(30 * time.Second)
			for atomic.LoadInt64(&mem[0]) != 43 {
				if time.Now().After(deadline) {
					failf("allocate=%v: the word is %d after 30 s of computing: the origin's Lock, Put, Accumulate and FetchAndOp needed this target's progress", alloc, atomic.LoadInt64(&mem[0]))
				}
				runtime.Gosched()
			}
			_, err := mpi.Recv(world, []int64{0}, last, 9)
			must(err, "recv")
		case rank == 0 && (native[0] == 1 || mpi.AsyncProgress()):
			for {
				// Computing, and looking at the word between steps: Sync
				// orders the load after the RMA writes (no progress).
				must(w.Sync(), "MPI_Win_sync")
				if mem[0] == 43 {
					break
				}
				runtime.Gosched()
			}
			_, err := mpi.Recv(world, []int64{0}, last, 9)
			must(err, "recv")
		case rank == 0:
			_, err := mpi.Recv(world, []int64{0}, last, 9)
			must(err, "recv")
			if mem[0] != 43 {
				failf("after the origin's Unlock the word is %d, want 43", mem[0])
			}
		}
		must(mpi.Barrier(world), "barrier")
		freeWin(w)
	}
}

// checkLockFair: shared lockers that keep taking rank 0's lock, each
// holding it while another asks (so that it is never free), do not starve
// an exclusive locker: the last rank's exclusive lock comes in its turn,
// and the readers see the flag it wrote. The deadline turns starvation
// into a failure.
func checkLockFair() {
	w, _, err := allocate[int64](1, nil)
	must(err, "window")
	last := size - 1
	must(mpi.Barrier(world), "barrier")
	if rank == last {
		must(w.Lock(mpi.LockExclusive, 0, 0), "MPI_Win_lock exclusive")
		must(mpi.Put(w, []int64{1}, 0, 0), "MPI_Put")
		must(w.Unlock(0), "MPI_Win_unlock")
	} else {
		deadline := time.Now().Add(20 * time.Second)
		for n := 0; ; n++ {
			must(w.Lock(mpi.LockShared, 0, 0), "MPI_Win_lock shared")
			v := []int64{0}
			must(mpi.Get(w, v, 0, 0), "MPI_Get")
			must(w.Unlock(0), "MPI_Win_unlock")
			if v[0] == 1 {
				break
			}
			if time.Now().After(deadline) {
				failf("after %d shared locks in 20 s the exclusive locker has not had its turn: shared locks starve it", n)
			}
		}
	}
	must(mpi.Barrier(world), "barrier")
	freeWin(w)
}

// checkInfo: the window info keys adimpi acts on. no_locks=true refuses
// Lock and LockAll; same_size=true with sizes that differ fails the
// creation; a known key with a value it cannot take is an argument error;
// the hints given come back from Info.
func checkInfo() {
	info := mpi.NewInfo()
	must(info.Set("no_locks", "true"), "MPI_Info_set")
	must(info.Set("accumulate_ordering", "rar,waw"), "MPI_Info_set")
	w, _, err := allocate[int64](1, info)
	must(err, "window with no_locks")
	wantErr(w.Lock(mpi.LockShared, 0, 0), mpi.ErrRMASync, "MPI_Win_lock with no_locks=true")
	wantErr(w.LockAll(0), mpi.ErrRMASync, "MPI_Win_lock_all with no_locks=true")
	must(info.Set("no_locks", "false"), "MPI_Info_set") // the window keeps its own copy
	if v, ok, _ := w.Info().Get("accumulate_ordering"); !ok || v != "rar,waw" {
		failf("MPI_Win_get_info: accumulate_ordering is %q (set: %v), want rar,waw", v, ok)
	}
	if v, _, _ := w.Info().Get("no_locks"); v != "true" {
		failf("MPI_Win_get_info: no_locks is %q, want true (the hint the window was made with)", v)
	}
	must(w.Fence(0), "MPI_Win_fence")
	must(mpi.Accumulate(w, []int64{1}, 0, 0, mpi.Sum), "MPI_Accumulate")
	must(w.Fence(0), "MPI_Win_fence")
	freeWin(w)

	bad := mpi.NewInfo()
	must(bad.Set("accumulate_ordering", "rar,sideways"), "MPI_Info_set")
	_, _, err = allocate[int64](1, bad)
	wantErr(err, mpi.ErrArg, "window with accumulate_ordering=rar,sideways")

	same := mpi.NewInfo()
	must(same.Set("same_size", "true"), "MPI_Info_set")
	w, _, err = allocate[int64](2, same)
	must(err, "window with same_size=true and equal sizes")
	freeWin(w)
	if size > 1 {
		_, _, err = allocate[int64](1+rank, same)
		wantErr(err, mpi.ErrSize, "window with same_size=true and sizes that differ")
	}
}

// checkLockHandoff: a rank on rank 0's host holds rank 0's lock (in the
// control block it maps) while a rank of another host asks rank 0's agent
// for it, and rank 0 waits, asleep, in a receive. The release rings no
// doorbell, yet the lock must reach the other host soon after it: the
// median delay beyond the holder's 20 ms hold over 5 rounds must stay
// under 40 ms (a sleeping agent that looked only at its 100 ms timeout
// took about 80). On one host there is no such pair and nothing to check.
func checkLockHandoff() {
	w, _, err := mpi.WinAllocate[int64](world, 1, nil)
	must(err, "MPI_Win_allocate")
	near := make([]int64, size)
	mine := []int64{0}
	if w.Native(0) {
		mine[0] = 1
	}
	must(mpi.Allgather(world, mine, near), "allgather")
	holder, asker := -1, -1
	for r := 1; r < size; r++ {
		if near[r] == 1 && holder < 0 {
			holder = r
		}
		if near[r] == 0 && asker < 0 {
			asker = r
		}
	}
	const rounds, hold = 5, 20 * time.Millisecond
	var late []time.Duration
	for i := 0; holder > 0 && asker > 0 && i < rounds; i++ {
		// Between the release and the grant no message goes to rank 0,
		// which waits, asleep, in a receive from the asker.
		must(mpi.Barrier(world), "barrier")
		switch rank {
		case 0:
			_, err := mpi.Recv(world, []int64{0}, asker, 12)
			must(err, "recv")
		case holder:
			must(w.Lock(mpi.LockExclusive, 0, 0), "MPI_Win_lock")
			must(mpi.Send(world, []int64{1}, asker, 11), "send")
			time.Sleep(hold) // the lock is held: the asker's request queues at rank 0's agent
			must(w.Unlock(0), "MPI_Win_unlock")
			_, err := mpi.Recv(world, []int64{0}, asker, 13)
			must(err, "recv")
		case asker:
			_, err := mpi.Recv(world, []int64{0}, holder, 11)
			must(err, "recv")
			t0 := time.Now()
			must(w.Lock(mpi.LockExclusive, 0, 0), "MPI_Win_lock")
			late = append(late, time.Since(t0)-hold)
			must(w.Unlock(0), "MPI_Win_unlock")
			must(mpi.Send(world, []int64{1}, 0, 12), "send")
			must(mpi.Send(world, []int64{1}, holder, 13), "send")
		}
	}
	if len(late) > 0 {
		sort.Slice(late, func(i, j int) bool { return late[i] < late[j] })
		if m := late[len(late)/2]; m > 40*time.Millisecond {
			failf("rank %d got rank 0's lock a median %v after rank %d released it (delays %v): the release was seen late", asker, m, holder, late)
		}
	}
	must(mpi.Barrier(world), "barrier")
	freeWin(w)
}

// dieHoldingLock is -die-holding: rank 1 exits while it holds rank 0's
// lock; rank 2 waits for the lock and rank 0 for a message that never
// comes. Only the launcher, seeing rank 1's exit, ends the job.
func dieHoldingLock() {
	w, _, err := allocate[int64](1, nil)
	must(err, "window")
	switch rank {
	case 1:
		must(w.Lock(mpi.LockExclusive, 0, 0), "MPI_Win_lock")
		must(mpi.Send(world, []int64{1}, 2, 5), "send")
		os.Exit(3)
	case 2:
		_, err := mpi.Recv(world, []int64{0}, 1, 5)
		must(err, "recv")
		must(w.Lock(mpi.LockExclusive, 0, 0), "MPI_Win_lock")
		failf("rank 2 got the lock that rank 1 died holding")
	default:
		_, err := mpi.Recv(world, []int64{0}, mpi.AnySource, 77)
		must(err, "recv")
		failf("a message that no rank sends arrived")
	}
}

// wantErr checks that err has class c and names the call.
func wantErr(err error, c mpi.Class, what string) {
	if err == nil {
		failf("%s: no error, want %v", what, c)
	}
	if !errors.Is(err, c) {
		failf("%s: error %v, want class %v", what, err, c)
	}
	if !strings.HasPrefix(err.Error(), "MPI_") || strings.Count(err.Error(), c.Error()) != 1 {
		failf("%s: error %q does not name the call and its class once", what, err)
	}
}

// checkErrors: erroneous use is reported with the right class.
func checkErrors() {
	w, _, err := allocate[int64](4, nil)
	must(err, "MPI_Win_allocate")
	right := (rank + 1) % size
	wantErr(mpi.Put(w, []int64{1}, right, 0), mpi.ErrRMASync, "MPI_Put outside an epoch")
	wantErr(mpi.Get(w, []int64{1}, right, 0), mpi.ErrRMASync, "MPI_Get outside an epoch")
	wantErr(w.Unlock(right), mpi.ErrRMASync, "MPI_Win_unlock without a lock")
	wantErr(w.Complete(), mpi.ErrRMASync, "MPI_Win_complete without Start")
	wantErr(w.Wait(), mpi.ErrRMASync, "MPI_Win_wait without Post")
	wantErr(w.Lock(7, right, 0), mpi.ErrLocktype, "MPI_Win_lock type 7")
	wantErr(w.Fence(1<<20), mpi.ErrAssert, "MPI_Win_fence bad assertion")
	must(w.Lock(mpi.LockShared, right, 0), "MPI_Win_lock")
	err = mpi.Put(w, []int64{1, 2}, right, 3)
	wantErr(err, mpi.ErrRMARange, "MPI_Put past the window")
	if !strings.Contains(err.Error(), "[24, 40)") || !strings.Contains(err.Error(), "32 bytes") {
		failf("range error %q does not name the bytes [24, 40) and the window's 32 bytes", err)
	}
	wantErr(mpi.Put(w, []int64{1}, right, -1), mpi.ErrRMARange, "MPI_Put at displacement -1")
	wantErr(mpi.Put(w, []int64{1}, size, 0), mpi.ErrRank, "MPI_Put to a rank out of range")
	wantErr(w.Lock(mpi.LockShared, right, 0), mpi.ErrRMASync, "MPI_Win_lock twice")
	userOp := mpi.NewTypedOp(func(in, inout []int64) {}, true)
	wantErr(mpi.Accumulate(w, []int64{1}, right, 0, userOp), mpi.ErrOp, "MPI_Accumulate with a user operation")
	wantErr(w.PutBuf(mpi.Slice([]int32{1}), right, 0, 1, datatype.Int64), mpi.ErrType, "MPI_Put with mismatched sizes")
	wantErr(w.GetAccumulateBuf(mpi.Buffer{}, mpi.Slice([]int64{0}), right, 0, 1, datatype.Int64, mpi.Sum), mpi.ErrBuffer, "MPI_Get_accumulate without origin data")
	must(w.Unlock(right), "MPI_Win_unlock")
	_, err = w.Attach(make([]byte, 8))
	wantErr(err, mpi.ErrRMAFlavor, "MPI_Win_attach on an allocated window")
	_, _, err = w.SharedQuery(0)
	wantErr(err, mpi.ErrRMAFlavor, "MPI_Win_shared_query on an allocated window")
	must(w.Fence(0), "fence")
	must(mpi.Put(w, []int64{1}, right, 0), "MPI_Put")
	wantErr(w.Free(), mpi.ErrRMASync, "MPI_Win_free with operations since the fence")
	must(w.Fence(mpi.ModeNoSucceed), "fence")
	freeWin(w)
	wantErr(w.Fence(0), mpi.ErrWin, "MPI_Win_fence on a freed window")
	wantErr(mpi.Put(w, []int64{1}, 0, 0), mpi.ErrWin, "MPI_Put on a freed window")
	var null *mpi.Win
	wantErr(null.Free(), mpi.ErrWin, "MPI_Win_free(MPI_WIN_NULL)")
	_, err = mpi.WinCreateBuf(world, nil, 0, nil)
	wantErr(err, mpi.ErrDisp, "MPI_Win_create with displacement unit 0")
}

// int32Bytes is the memory of s as bytes.
func int32Bytes(s []int32) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), 4*len(s))
}

// ptrOf is the address of s's first element.
func ptrOf[T any](s []T) unsafe.Pointer { return unsafe.Pointer(unsafe.SliceData(s)) }
