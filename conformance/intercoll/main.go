// Command intercoll is the conformance program for collectives on
// intercommunicators, Idup and the persistent collectives, checked against
// sequential references. Run one check under mpirun with at least 2
// processes (conformance/internal/runner):
//
//	mpirun -np 4 intercoll [-short] <check>
//
// The intercommunicator checks run on three splits of the world with
// uneven groups: even against odd ranks, rank 0 against the rest, and the
// first third against the rest with both groups' ranks in reverse order.
// Every collective runs blocking and non-blocking, with every root of
// interest in either group, and is compared with what a sequential
// computation of the same inputs gives.
package main

import (
	"errors"
	"flag"
	"fmt"
	"slices"
	"sync"
	"time"
	"unsafe"

	"github.com/adimpi/adimpi/conformance/internal/runner"
	"github.com/adimpi/adimpi/datatype"
	"github.com/adimpi/adimpi/mpi"
)

var short = flag.Bool("short", false, "smaller sizes and loops")

var checks = []runner.NamedFunc{
	{Name: "intercoll", Fn: checkInterColl},
	{Name: "idup", Fn: checkIdup},
	{Name: "persistent", Fn: checkPersistent},
	{Name: "errors", Fn: checkErrors},
}

func main() {
	runner.Program{Name: "intercoll", Checks: runner.CommChecks(2, checks)}.Main()
}

func sizes() []int {
	if *short {
		return []int{0, 1, 7, 1000}
	}
	return []int{0, 1, 7, 1000, 40000}
}

// val is world rank w's element i in a test salted by s: small integers,
// so float sums are exact.
func val(w, i, s int) float64 { return float64((w*131+i*7+s*17)%1000 - 300) }

func vals(w, m, s int) []float64 {
	v := make([]float64, m)
	for i := range v {
		v[i] = val(w, i, s)
	}
	return v
}

// run runs a collective blocking, or non-blocking and waits for it.
func run(nb bool, blocking func() error, start func() (*mpi.Request, error)) error {
	if !nb {
		return blocking()
	}
	q, err := start()
	if err != nil {
		return err
	}
	_, err = q.Wait()
	return err
}

// inter is one intercommunicator and what the test knows about it.
type inter struct {
	name    string
	ic      *mpi.Comm
	half    *mpi.Comm
	color   int
	me      int      // world rank
	members [2][]int // world ranks of each group, in group rank order
}

func (x *inter) local() []int  { return x.members[x.color] }
func (x *inter) remote() []int { return x.members[1-x.color] }

// makeInter splits w by color (keys order each group) and connects the
// two groups.
func makeInter(w *mpi.Comm, name string, colorOf func(int) int, keyOf func(int) int) (*inter, error) {
	n, me := w.Size(), w.Rank()
	x := &inter{name: name, color: colorOf(me), me: me}
	for r := 0; r < n; r++ {
		x.members[colorOf(r)] = append(x.members[colorOf(r)], r)
	}
	for c := range x.members {
		slices.SortStableFunc(x.members[c], func(a, b int) int { return keyOf(a) - keyOf(b) })
	}
	half, err := w.Split(x.color, keyOf(me))
	if err != nil {
		return nil, err
	}
	ic, err := mpi.IntercommCreate(half, 0, w, x.remote()[0], 77)
	if err != nil {
		return nil, err
	}
	x.half, x.ic = half, ic
	if !ic.IsInter() || ic.Size() != len(x.local()) || ic.RemoteSize() != len(x.remote()) || ic.Rank() != slices.Index(x.local(), me) {
		return nil, fmt.Errorf("%s: intercomm size %d remote %d rank %d, want %d %d %d", name, ic.Size(), ic.RemoteSize(), ic.Rank(),
			len(x.local()), len(x.remote()), slices.Index(x.local(), me))
	}
	return x, nil
}

func (x *inter) free() error {
	if err := x.ic.Free(); err != nil {
		return err
	}
	return x.half.Free()
}

func inters(w *mpi.Comm) ([]*inter, error) {
	n := w.Size()
	third := max(1, n/3)
	specs := []struct {
		name  string
		color func(int) int
		key   func(int) int
	}{
		{"evenodd", func(r int) int { return r % 2 }, func(r int) int { return r }},
		{"onerest", func(r int) int { return min(r, 1) }, func(r int) int { return r }},
		{"thirdrev", func(r int) int {
			if r < third {
				return 0
			}
			return 1
		}, func(r int) int { return -r }},
	}
	var xs []*inter
	for _, s := range specs {
		x, err := makeInter(w, s.name, s.color, s.key)
		if err != nil {
			return nil, err
		}
		xs = append(xs, x)
	}
	return xs, nil
}

func checkInterColl(w *mpi.Comm) error {
	xs, err := inters(w)
	if err != nil {
		return err
	}
	for _, x := range xs {
		for _, f := range []struct {
			name string
			fn   func(*inter, bool) error
		}{
			{"barrier", interBarrier},
			{"bcast", interBcast},
			{"gather", interGather},
			{"gatherv", interGatherv},
			{"scatter", interScatter},
			{"scatterv", interScatterv},
			{"allgather", interAllgather},
			{"allgatherv", interAllgatherv},
			{"alltoall", interAlltoall},
			{"alltoallv", interAlltoallv},
			{"alltoallw", interAlltoallw},
			{"reduce", interReduce},
			{"allreduce", interAllreduce},
			{"reducescatter", interReduceScatter},
			{"strided", interStrided},
			{"dup", interDupCheck},
		} {
			for _, nb := range []bool{false, true} {
				if err := f.fn(x, nb); err != nil {
					return fmt.Errorf("%s %s (non-blocking %v): %w", x.name, f.name, nb, err)
				}
			}
		}
	}
	for _, x := range xs {
		if err := x.free(); err != nil {
			return err
		}
	}
	return nil
}

// interBarrier checks that no process leaves the barrier before the last
// one has entered: one process of a group enters late, and everyone's exit
// time is compared with its entry time afterwards.
func interBarrier(x *inter, nb bool) error {
	for g := 0; g < 2; g++ {
		late := x.members[g][len(x.members[g])-1]
		var entered int64
		if x.me == late {
			time.Sleep(20 * time.Millisecond) // a window in which a broken barrier lets the others leave
			entered = time.Now().UnixNano()
		}
		if err := run(nb, func() error { return mpi.Barrier(x.ic) }, func() (*mpi.Request, error) { return mpi.Ibarrier(x.ic) }); err != nil {
			return err
		}
		left := time.Now().UnixNano()
		// Learn the late process's entry time (through the world, which
		// both groups share: the half communicators are per group).
		e := []int64{entered}
		if err := mpi.Bcast(mpi.World(), e, late); err != nil {
			return err
		}
		if left < e[0] {
			return fmt.Errorf("left the barrier %v before world rank %d entered it", time.Duration(e[0]-left), late)
		}
	}
	return nil
}

// rootArg is the root argument of a rooted collective whose root is rank
// r of group g.
func (x *inter) rootArg(g, r int) (root int, isRoot bool) {
	if x.color != g {
		return r, false
	}
	if x.ic.Rank() == r {
		return mpi.Root, true
	}
	return mpi.ProcNull, false
}

func interBcast(x *inter, nb bool) error {
	for g := 0; g < 2; g++ {
		for _, r := range runner.Roots(len(x.members[g])) {
			rootWorld := x.members[g][r]
			for _, m := range sizes() {
				root, isRoot := x.rootArg(g, r)
				var buf []float64
				switch {
				case isRoot:
					buf = vals(rootWorld, m, 1)
				case x.color != g:
					buf = make([]float64, m)
				}
				if err := run(nb, func() error { return mpi.Bcast(x.ic, buf, root) },
					func() (*mpi.Request, error) { return mpi.Ibcast(x.ic, buf, root) }); err != nil {
					return err
				}
				if x.color != g {
					if err := runner.Eq(fmt.Sprintf("root %d/%d m=%d", g, r, m), buf, vals(rootWorld, m, 1)); err != nil {
						return err
					}
				}
			}
		}
	}
	return nil
}

func interGather(x *inter, nb bool) error {
	for g := 0; g < 2; g++ {
		senders := x.members[1-g]
		for _, r := range runner.Roots(len(x.members[g])) {
			for _, m := range sizes() {
				root, isRoot := x.rootArg(g, r)
				var send, recv []float64
				if x.color != g {
					send = vals(x.me, m, 2)
				}
				if isRoot {
					recv = make([]float64, len(senders)*m)
				}
				if err := run(nb, func() error { return mpi.Gather(x.ic, send, recv, root) },
					func() (*mpi.Request, error) { return mpi.Igather(x.ic, send, recv, root) }); err != nil {
					return err
				}
				if isRoot {
					var want []float64
					for _, s := range senders {
						want = append(want, vals(s, m, 2)...)
					}
					if err := runner.Eq(fmt.Sprintf("root %d/%d m=%d", g, r, m), recv, want); err != nil {
						return err
					}
				}
			}
		}
	}
	return nil
}

// vcount is how many elements world rank s sends to world rank d in the v
// collectives (some zero).
func vcount(s, d, m int) int { return (s*3 + d + m) % 5 * (m/3 + 1) % (m + 1) }

// layout gives counts and displacements (with gaps) for blocks of counts.
func layout(counts []int) (displs []int, total int) {
	displs = make([]int, len(counts))
	for i, c := range counts {
		displs[i] = total + 1 // a one-element gap before each block
		total = displs[i] + c
	}
	return displs, total
}

const gap = -99999.0

func interGatherv(x *inter, nb bool) error {
	for g := 0; g < 2; g++ {
		senders := x.members[1-g]
		for _, r := range runner.Roots(len(x.members[g])) {
			rootWorld := x.members[g][r]
			for _, m := range sizes() {
				root, isRoot := x.rootArg(g, r)
				var send, recv []float64
				var counts, displs []int
				if x.color != g {
					send = vals(x.me, vcount(x.me, rootWorld, m), 3)
				}
				var want []float64
				if isRoot {
					counts = make([]int, len(senders))
					for i, s := range senders {
						counts[i] = vcount(s, rootWorld, m)
					}
					var total int
					displs, total = layout(counts)
					recv = make([]float64, total)
					want = make([]float64, total)
					for i := range recv {
						recv[i], want[i] = gap, gap
					}
					for i, s := range senders {
						copy(want[displs[i]:], vals(s, counts[i], 3))
					}
				}
				if err := run(nb, func() error { return mpi.Gatherv(x.ic, send, recv, counts, displs, root) },
					func() (*mpi.Request, error) { return mpi.Igatherv(x.ic, send, recv, counts, displs, root) }); err != nil {
					return err
				}
				if isRoot {
					if err := runner.Eq(fmt.Sprintf("root %d/%d m=%d", g, r, m), recv, want); err != nil {
						return err
					}
				}
			}
		}
	}
	return nil
}

func interScatter(x *inter, nb bool) error {
	for g := 0; g < 2; g++ {
		receivers := x.members[1-g]
		for _, r := range runner.Roots(len(x.members[g])) {
			rootWorld := x.members[g][r]
			for _, m := range sizes() {
				root, isRoot := x.rootArg(g, r)
				var send, recv []float64
				if isRoot {
					for _, d := range receivers {
						send = append(send, vals(d*1000+rootWorld, m, 4)...)
					}
				}
				if x.color != g {
					recv = make([]float64, m)
				}
				if err := run(nb, func() error { return mpi.Scatter(x.ic, send, recv, root) },
					func() (*mpi.Request, error) { return mpi.Iscatter(x.ic, send, recv, root) }); err != nil {
					return err
				}
				if x.color != g {
					if err := runner.Eq(fmt.Sprintf("root %d/%d m=%d", g, r, m), recv, vals(x.me*1000+rootWorld, m, 4)); err != nil {
						return err
					}
				}
			}
		}
	}
	return nil
}

func interScatterv(x *inter, nb bool) error {
	for g := 0; g < 2; g++ {
		receivers := x.members[1-g]
		for _, r := range runner.Roots(len(x.members[g])) {
			rootWorld := x.members[g][r]
			for _, m := range sizes() {
				root, isRoot := x.rootArg(g, r)
				var send, recv []float64
				var counts, displs []int
				if isRoot {
					counts = make([]int, len(receivers))
					for i, d := range receivers {
						counts[i] = vcount(rootWorld, d, m)
					}
					var total int
					displs, total = layout(counts)
					send = make([]float64, total)
					for i, d := range receivers {
						copy(send[displs[i]:], vals(d, counts[i], 5))
					}
				}
				if x.color != g {
					recv = make([]float64, vcount(rootWorld, x.me, m))
				}
				if err := run(nb, func() error { return mpi.Scatterv(x.ic, send, counts, displs, recv, root) },
					func() (*mpi.Request, error) { return mpi.Iscatterv(x.ic, send, counts, displs, recv, root) }); err != nil {
					return err
				}
				if x.color != g {
					if err := runner.Eq(fmt.Sprintf("root %d/%d m=%d", g, r, m), recv, vals(x.me, len(recv), 5)); err != nil {
						return err
					}
				}
			}
		}
	}
	return nil
}

// groupSize is the block each process of group g contributes to the
// Allgather and Alltoall checks: the groups use different sizes.
func groupSize(g, m int) int {
	if g == 0 {
		return m
	}
	return m/2 + 1
}

func interAllgather(x *inter, nb bool) error {
	for _, m := range sizes() {
		mine, theirs := groupSize(x.color, m), groupSize(1-x.color, m)
		send := vals(x.me, mine, 6)
		recv := make([]float64, len(x.remote())*theirs)
		if err := run(nb, func() error { return mpi.Allgather(x.ic, send, recv) },
			func() (*mpi.Request, error) { return mpi.Iallgather(x.ic, send, recv) }); err != nil {
			return err
		}
		var want []float64
		for _, s := range x.remote() {
			want = append(want, vals(s, theirs, 6)...)
		}
		if err := runner.Eq(fmt.Sprintf("m=%d", m), recv, want); err != nil {
			return err
		}
	}
	return nil
}

func interAllgatherv(x *inter, nb bool) error {
	for _, m := range sizes() {
		send := vals(x.me, vcount(x.me, 0, m), 7)
		counts := make([]int, len(x.remote()))
		for i, s := range x.remote() {
			counts[i] = vcount(s, 0, m)
		}
		displs, total := layout(counts)
		recv := make([]float64, total)
		want := make([]float64, total)
		for i := range recv {
			recv[i], want[i] = gap, gap
		}
		for i, s := range x.remote() {
			copy(want[displs[i]:], vals(s, counts[i], 7))
		}
		if err := run(nb, func() error { return mpi.Allgatherv(x.ic, send, recv, counts, displs) },
			func() (*mpi.Request, error) { return mpi.Iallgatherv(x.ic, send, recv, counts, displs) }); err != nil {
			return err
		}
		if err := runner.Eq(fmt.Sprintf("m=%d", m), recv, want); err != nil {
			return err
		}
	}
	return nil
}

// pair is the block world rank s sends world rank d in the all-to-all checks.
func pair(s, d, m int) []float64 { return vals(s*1000+d, m, 8) }

func interAlltoall(x *inter, nb bool) error {
	for _, m := range sizes() {
		mine, theirs := groupSize(x.color, m), groupSize(1-x.color, m)
		var send, want []float64
		for _, d := range x.remote() {
			send = append(send, pair(x.me, d, mine)...)
			want = append(want, pair(d, x.me, theirs)...)
		}
		recv := make([]float64, len(want))
		if err := run(nb, func() error { return mpi.Alltoall(x.ic, send, recv) },
			func() (*mpi.Request, error) { return mpi.Ialltoall(x.ic, send, recv) }); err != nil {
			return err
		}
		if err := runner.Eq(fmt.Sprintf("m=%d", m), recv, want); err != nil {
			return err
		}
	}
	return nil
}

func interAlltoallv(x *inter, nb bool) error {
	for _, m := range sizes() {
		rem := x.remote()
		sc, rc := make([]int, len(rem)), make([]int, len(rem))
		for i, d := range rem {
			sc[i], rc[i] = vcount(x.me, d, m), vcount(d, x.me, m)
		}
		sd, st := layout(sc)
		rd, rt := layout(rc)
		send, recv, want := make([]float64, st), make([]float64, rt), make([]float64, rt)
		for i := range recv {
			recv[i], want[i] = gap, gap
		}
		for i, d := range rem {
			copy(send[sd[i]:], pair(x.me, d, sc[i]))
			copy(want[rd[i]:], pair(d, x.me, rc[i]))
		}
		if err := run(nb, func() error { return mpi.Alltoallv(x.ic, send, sc, sd, recv, rc, rd) },
			func() (*mpi.Request, error) { return mpi.Ialltoallv(x.ic, send, sc, sd, recv, rc, rd) }); err != nil {
			return err
		}
		if err := runner.Eq(fmt.Sprintf("m=%d", m), recv, want); err != nil {
			return err
		}
	}
	return nil
}

// interAlltoallw sends int32 blocks of a different count per peer at byte
// displacements with gaps.
func interAlltoallw(x *inter, nb bool) error {
	i32 := datatype.Int32
	for _, m := range []int{0, 1, 5, 300} {
		rem := x.remote()
		k := len(rem)
		sc, sd, rc, rd := make([]int, k), make([]int, k), make([]int, k), make([]int, k)
		stypes, rtypes := make([]*datatype.Type, k), make([]*datatype.Type, k)
		sbytes, rbytes := 0, 0
		for i, d := range rem {
			sc[i] = (x.me + d + m) % 4 * m / 3
			stypes[i] = i32
			sd[i] = sbytes
			sbytes += 4*sc[i] + 4
			rc[i] = (d + x.me + m) % 4 * m / 3
			rtypes[i] = i32
			rd[i] = rbytes
			rbytes += 4*rc[i] + 8
		}
		send, recv := make([]byte, sbytes), make([]byte, rbytes)
		si := func(b []byte, off, j int) *int32 { return (*int32)(unsafePtr(b, off+4*j)) }
		for i, d := range rem {
			for j := 0; j < sc[i]; j++ {
				*si(send, sd[i], j) = int32(x.me*1000000 + d*1000 + j)
			}
		}
		if err := run(nb, func() error { return mpi.Alltoallw(x.ic, send, sc, sd, stypes, recv, rc, rd, rtypes) },
			func() (*mpi.Request, error) {
				return mpi.Ialltoallw(x.ic, send, sc, sd, stypes, recv, rc, rd, rtypes)
			}); err != nil {
			return err
		}
		for i, s := range rem {
			for j := 0; j < rc[i]; j++ {
				if got, want := *si(recv, rd[i], j), int32(s*1000000+x.me*1000+j); got != want {
					return fmt.Errorf("m=%d from remote %d element %d: %d want %d", m, i, j, got, want)
				}
			}
		}
	}
	return nil
}

// affine maps x -> a·x + b (mod p) under composition: associative, not
// commutative. in∘inout, lower ranks on the left.
const modp = 1000003

var affOp = mpi.NewTypedOp(func(in, inout []int64) {
	for i := 0; i+1 < len(in); i += 2 {
		a1, b1, a2, b2 := in[i], in[i+1], inout[i], inout[i+1]
		inout[i], inout[i+1] = a1*a2%modp, (a1*b2+b1)%modp
	}
}, false)

func aff(w, pairs int) []int64 {
	v := make([]int64, 2*pairs)
	for i := 0; i < pairs; i++ {
		v[2*i], v[2*i+1] = int64((w*7+i)%97+2), int64((w*13+i*3)%101)
	}
	return v
}

func affRef(ws []int, pairs int) []int64 {
	acc := aff(ws[0], pairs)
	for _, w := range ws[1:] {
		next := aff(w, pairs)
		for i := 0; i < pairs; i++ {
			a1, b1, a2, b2 := acc[2*i], acc[2*i+1], next[2*i], next[2*i+1]
			acc[2*i], acc[2*i+1] = a1*a2%modp, (a1*b2+b1)%modp
		}
	}
	return acc
}

func sumRef(ws []int, m, s int) []float64 {
	out := make([]float64, m)
	for _, w := range ws {
		for i := range out {
			out[i] += val(w, i, s)
		}
	}
	return out
}

func interReduce(x *inter, nb bool) error {
	for g := 0; g < 2; g++ {
		senders := x.members[1-g]
		for _, r := range runner.Roots(len(x.members[g])) {
			for _, m := range sizes() {
				root, isRoot := x.rootArg(g, r)
				var send, recv []float64
				if x.color != g {
					send = vals(x.me, m, 9)
				}
				if isRoot {
					recv = make([]float64, m)
				}
				if err := run(nb, func() error { return mpi.Reduce(x.ic, send, recv, mpi.Sum, root) },
					func() (*mpi.Request, error) { return mpi.Ireduce(x.ic, send, recv, mpi.Sum, root) }); err != nil {
					return err
				}
				if isRoot {
					if err := runner.Eq(fmt.Sprintf("sum root %d/%d m=%d", g, r, m), recv, sumRef(senders, m, 9)); err != nil {
						return err
					}
				}
			}
			// Rank order, with a non-commutative operation.
			root, isRoot := x.rootArg(g, r)
			var send, recv []int64
			if x.color != g {
				send = aff(x.me, 50)
			}
			if isRoot {
				recv = make([]int64, 100)
			}
			if err := run(nb, func() error { return mpi.Reduce(x.ic, send, recv, affOp, root) },
				func() (*mpi.Request, error) { return mpi.Ireduce(x.ic, send, recv, affOp, root) }); err != nil {
				return err
			}
			if isRoot {
				if err := runner.Eq(fmt.Sprintf("affine root %d/%d", g, r), recv, affRef(senders, 50)); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func interAllreduce(x *inter, nb bool) error {
	for _, m := range sizes() {
		send := vals(x.me, m, 10)
		recv := make([]float64, m)
		if err := run(nb, func() error { return mpi.Allreduce(x.ic, send, recv, mpi.Sum) },
			func() (*mpi.Request, error) { return mpi.Iallreduce(x.ic, send, recv, mpi.Sum) }); err != nil {
			return err
		}
		if err := runner.Eq(fmt.Sprintf("sum m=%d", m), recv, sumRef(x.remote(), m, 10)); err != nil {
			return err
		}
	}
	mx := []int{-1}
	if err := run(nb, func() error { return mpi.Allreduce(x.ic, []int{x.me}, mx, mpi.Max) },
		func() (*mpi.Request, error) { return mpi.Iallreduce(x.ic, []int{x.me}, mx, mpi.Max) }); err != nil {
		return err
	}
	if want := slices.Max(x.remote()); mx[0] != want {
		return fmt.Errorf("max %d want %d (the other group's)", mx[0], want)
	}
	got := make([]int64, 2*30)
	if err := run(nb, func() error { return mpi.Allreduce(x.ic, aff(x.me, 30), got, affOp) },
		func() (*mpi.Request, error) { return mpi.Iallreduce(x.ic, aff(x.me, 30), got, affOp) }); err != nil {
		return err
	}
	return runner.Eq("affine", got, affRef(x.remote(), 30))
}

// cuts splits total elements unevenly over n processes (some get none).
func cuts(total, n int) []int {
	counts := make([]int, n)
	prev := 0
	for i := 0; i < n; i++ {
		next := total * (i + 1) * (i + 1) / (n * n)
		counts[i] = next - prev
		prev = next
	}
	return counts
}

func interReduceScatter(x *inter, nb bool) error {
	nl, nr := len(x.local()), len(x.remote())
	for _, m := range sizes() {
		// ReduceScatterBlock: both groups reduce vectors of nl·nr·k elements.
		k := m/10 + 1
		total := nl * nr * k
		rc := total / nl
		send := vals(x.me, total, 11)
		recv := make([]float64, rc)
		if err := run(nb, func() error { return mpi.ReduceScatterBlock(x.ic, send, recv, mpi.Sum) },
			func() (*mpi.Request, error) { return mpi.IreduceScatterBlock(x.ic, send, recv, mpi.Sum) }); err != nil {
			return err
		}
		full := sumRef(x.remote(), total, 11)
		me := x.ic.Rank()
		if err := runner.Eq(fmt.Sprintf("block m=%d", m), recv, full[me*rc:(me+1)*rc]); err != nil {
			return err
		}
		// ReduceScatter with uneven counts of the local group.
		total = 2*m + 3
		counts := cuts(total, nl)
		send = vals(x.me, total, 12)
		recv = make([]float64, counts[me])
		if err := run(nb, func() error { return mpi.ReduceScatter(x.ic, send, recv, counts, mpi.Sum) },
			func() (*mpi.Request, error) { return mpi.IreduceScatter(x.ic, send, recv, counts, mpi.Sum) }); err != nil {
			return err
		}
		full = sumRef(x.remote(), total, 12)
		off := 0
		for i := 0; i < me; i++ {
			off += counts[i]
		}
		if err := runner.Eq(fmt.Sprintf("counts m=%d", m), recv, full[off:off+counts[me]]); err != nil {
			return err
		}
	}
	return nil
}

// stride2 is m float64s at every other position, resized to extent 2m
// elements so that consecutive ones tile: element j, item i is at 2mj+2i.
func stride2(m int) (*datatype.Type, error) {
	v, err := datatype.Vector(m, 1, 2, datatype.Float64)
	if err != nil {
		return nil, err
	}
	if v, err = datatype.Resized(v, 0, 16*m); err != nil {
		return nil, err
	}
	return v, v.Commit()
}

func bytesOf(f []float64) []byte {
	if len(f) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&f[0])), 8*len(f))
}

// spread is what a stride2 buffer of blocks holds: the data at even
// positions, gap at odd ones.
func spread(data []float64) []float64 {
	out := make([]float64, 2*len(data))
	for i := range out {
		out[i] = gap
	}
	for i, v := range data {
		out[2*i] = v
	}
	return out
}

func gaps(n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = gap
	}
	return out
}

// interStrided runs the data-moving intercommunicator collectives with a
// non-contiguous datatype on one side and a contiguous one on the other.
func interStrided(x *inter, nb bool) error {
	nr := len(x.remote())
	for _, m := range []int{1, 7, 1000} {
		st, err := stride2(m)
		if err != nil {
			return err
		}
		// Bcast from the last rank of group 0: contiguous at the root,
		// strided at the receivers.
		root, isRoot := x.rootArg(0, len(x.members[0])-1)
		rootWorld := x.members[0][len(x.members[0])-1]
		var b mpi.Buffer
		var got []float64
		switch {
		case isRoot:
			b = mpi.Slice(vals(rootWorld, m, 20))
		case x.color == 1:
			got = gaps(2 * m)
			b = mpi.Typed(bytesOf(got), 1, st)
		default:
			b = mpi.Slice([]float64(nil))
		}
		if err := run(nb, func() error { return mpi.BcastBuf(x.ic, b, root) },
			func() (*mpi.Request, error) { return mpi.IbcastBuf(x.ic, b, root) }); err != nil {
			return err
		}
		if x.color == 1 {
			if err := runner.Eq(fmt.Sprintf("bcast m=%d", m), got, spread(vals(rootWorld, m, 20))); err != nil {
				return err
			}
		}
		// Gather to the first rank of group 1 from strided senders.
		root, isRoot = x.rootArg(1, 0)
		var send, recv mpi.Buffer
		var all []float64
		if x.color == 0 {
			src := spread(vals(x.me, m, 21))
			send = mpi.Typed(bytesOf(src), 1, st)
		} else {
			send = mpi.Slice([]float64(nil))
		}
		recv = mpi.Slice([]float64(nil))
		if isRoot {
			all = make([]float64, nr*m)
			recv = mpi.Slice(all)
		}
		if err := run(nb, func() error { return mpi.GatherBuf(x.ic, send, recv, root) },
			func() (*mpi.Request, error) { return mpi.IgatherBuf(x.ic, send, recv, root) }); err != nil {
			return err
		}
		if isRoot {
			var want []float64
			for _, s := range x.remote() {
				want = append(want, vals(s, m, 21)...)
			}
			if err := runner.Eq(fmt.Sprintf("gather m=%d", m), all, want); err != nil {
				return err
			}
		}
		// Scatter from the same root into strided receivers.
		send, recv = mpi.Slice([]float64(nil)), mpi.Slice([]float64(nil))
		var mine []float64
		if isRoot {
			var src []float64
			for _, d := range x.remote() {
				src = append(src, vals(d, m, 22)...)
			}
			send = mpi.Slice(src)
		}
		if x.color == 0 {
			mine = gaps(2 * m)
			recv = mpi.Typed(bytesOf(mine), 1, st)
		}
		if err := run(nb, func() error { return mpi.ScatterBuf(x.ic, send, recv, root) },
			func() (*mpi.Request, error) { return mpi.IscatterBuf(x.ic, send, recv, root) }); err != nil {
			return err
		}
		if x.color == 0 {
			if err := runner.Eq(fmt.Sprintf("scatter m=%d", m), mine, spread(vals(x.me, m, 22))); err != nil {
				return err
			}
		}
		// Allgather and Alltoall into strided blocks.
		ag := gaps(2 * m * nr)
		agb := mpi.Typed(bytesOf(ag), nr, st)
		if err := run(nb, func() error { return mpi.AllgatherBuf(x.ic, mpi.Slice(vals(x.me, m, 23)), agb) },
			func() (*mpi.Request, error) { return mpi.IallgatherBuf(x.ic, mpi.Slice(vals(x.me, m, 23)), agb) }); err != nil {
			return err
		}
		var want []float64
		for _, s := range x.remote() {
			want = append(want, vals(s, m, 23)...)
		}
		if err := runner.Eq(fmt.Sprintf("allgather m=%d", m), ag, spread(want)); err != nil {
			return err
		}
		var a2s, a2want []float64
		for _, d := range x.remote() {
			a2s = append(a2s, pair(x.me, d, m)...)
			a2want = append(a2want, pair(d, x.me, m)...)
		}
		a2r := gaps(2 * m * nr)
		a2b := mpi.Typed(bytesOf(a2r), nr, st)
		if err := run(nb, func() error { return mpi.AlltoallBuf(x.ic, mpi.Slice(a2s), a2b) },
			func() (*mpi.Request, error) { return mpi.IalltoallBuf(x.ic, mpi.Slice(a2s), a2b) }); err != nil {
			return err
		}
		if err := runner.Eq(fmt.Sprintf("alltoall m=%d", m), a2r, spread(a2want)); err != nil {
			return err
		}
		if err := st.Free(); err != nil {
			return err
		}
	}
	return nil
}

// interDupCheck duplicates the intercommunicator (Dup, or Idup when nb)
// and runs an Allreduce and point-to-point traffic on the copy.
func interDupCheck(x *inter, nb bool) error {
	var d *mpi.Comm
	if nb {
		n, q, err := x.ic.Idup()
		if err != nil {
			return err
		}
		if _, err := q.Wait(); err != nil {
			return err
		}
		d = n
	} else {
		var err error
		if d, err = x.ic.Dup(); err != nil {
			return err
		}
	}
	if !d.IsInter() || d.Size() != x.ic.Size() || d.RemoteSize() != x.ic.RemoteSize() || d.Rank() != x.ic.Rank() {
		return fmt.Errorf("dup: inter %v size %d remote %d rank %d", d.IsInter(), d.Size(), d.RemoteSize(), d.Rank())
	}
	if c, err := d.Compare(x.ic); err != nil || c != mpi.Congruent {
		return fmt.Errorf("compare(dup, ic) = %v, %v", c, err)
	}
	got := []int{0}
	if err := mpi.Allreduce(d, []int{x.me + 1}, got, mpi.Sum); err != nil {
		return err
	}
	want := 0
	for _, r := range x.remote() {
		want += r + 1
	}
	if got[0] != want {
		return fmt.Errorf("allreduce on dup: %d want %d", got[0], want)
	}
	// Messages on the copy and on the original do not mix.
	me := d.Rank()
	dst := me % d.RemoteSize()
	q1, err := mpi.Isend(d, []int{1}, dst, 5)
	if err != nil {
		return err
	}
	q2, err := mpi.Isend(x.ic, []int{2}, dst, 5)
	if err != nil {
		return err
	}
	for i := 0; i < d.RemoteSize(); i++ {
		if i%d.Size() != me {
			continue
		}
		a, b := []int{0}, []int{0}
		if _, err := mpi.Recv(x.ic, b, i, 5); err != nil {
			return err
		}
		if _, err := mpi.Recv(d, a, i, 5); err != nil {
			return err
		}
		if a[0] != 1 || b[0] != 2 {
			return fmt.Errorf("dup and original mixed: %d %d", a[0], b[0])
		}
	}
	if _, err := mpi.Waitall([]*mpi.Request{q1, q2}); err != nil {
		return err
	}
	return d.Free()
}

// checkIdup runs Idup while other collectives are in flight on the same
// communicator, several Idups at once started in different orders on
// different ranks, and Idups from several goroutines on their own
// communicators.
func checkIdup(w *mpi.Comm) error {
	n, me := w.Size(), w.Rank()
	rounds := 30
	if *short {
		rounds = 10
	}
	base, err := w.Dup()
	if err != nil {
		return err
	}
	// Idup copies attributes through their Copy callbacks, like Dup.
	copied := &mpi.Keyval{Copy: func(_ *mpi.Comm, v any) (any, bool) { return v.(int) + 1, true }}
	dropped := &mpi.Keyval{}
	if err := base.SetAttr(copied, 41); err != nil {
		return err
	}
	if err := base.SetAttr(dropped, 7); err != nil {
		return err
	}
	{
		d, q, err := base.Idup()
		if err != nil {
			return err
		}
		if _, err := q.Wait(); err != nil {
			return err
		}
		if v, ok := d.Attr(copied); !ok || v.(int) != 42 {
			return fmt.Errorf("idup attribute: %v %v", v, ok)
		}
		if _, ok := d.Attr(dropped); ok {
			return errors.New("idup copied an attribute without a Copy callback")
		}
		if err := d.Free(); err != nil {
			return err
		}
	}
	for it := 0; it < rounds; it++ {
		// An Idup between non-blocking and blocking collectives on w.
		sum := []int{0}
		q1, err := mpi.Iallreduce(w, []int{me + it}, sum, mpi.Sum)
		if err != nil {
			return err
		}
		d1, qd1, err := w.Idup()
		if err != nil {
			return err
		}
		bc := []int{-1}
		if me == it%n {
			bc[0] = it
		}
		if err := mpi.Bcast(w, bc, it%n); err != nil || bc[0] != it {
			return fmt.Errorf("bcast during idup: %v %v", bc, err)
		}
		// Two Idups of different communicators, in opposite orders on even
		// and odd ranks: their agreements run at the same time.
		var d2, d3 *mpi.Comm
		var qd2, qd3 *mpi.Request
		if me%2 == 0 {
			if d2, qd2, err = w.Idup(); err == nil {
				d3, qd3, err = base.Idup()
			}
		} else {
			if d3, qd3, err = base.Idup(); err == nil {
				d2, qd2, err = w.Idup()
			}
		}
		if err != nil {
			return err
		}
		if _, err := mpi.Waitall([]*mpi.Request{qd3, q1, qd2, qd1}); err != nil {
			return err
		}
		if want := n*(n-1)/2 + n*it; sum[0] != want {
			return fmt.Errorf("iallreduce during idup: %d want %d", sum[0], want)
		}
		for i, d := range []*mpi.Comm{d1, d2, d3} {
			if c, err := d.Compare(w); err != nil || c != mpi.Congruent {
				return fmt.Errorf("idup %d: compare %v %v", i, c, err)
			}
			got := make([]int, n)
			if err := mpi.Allgather(d, []int{me*10 + i}, got); err != nil {
				return err
			}
			for r := range got {
				if got[r] != r*10+i {
					return fmt.Errorf("allgather on idup %d: %v", i, got)
				}
			}
		}
		// The three copies have distinct contexts: the same tag on each
		// does not mix.
		var reqs []*mpi.Request
		for i, d := range []*mpi.Comm{d1, d2, d3} {
			q, err := mpi.Isend(d, []int{i}, (me+1)%n, 9)
			if err != nil {
				return err
			}
			reqs = append(reqs, q)
		}
		for _, i := range []int{2, 0, 1} {
			got := []int{-1}
			if _, err := mpi.Recv([]*mpi.Comm{d1, d2, d3}[i], got, (me-1+n)%n, 9); err != nil || got[0] != i {
				return fmt.Errorf("recv on idup %d: %v %v", i, got, err)
			}
		}
		if _, err := mpi.Waitall(reqs); err != nil {
			return err
		}
		for _, d := range []*mpi.Comm{d1, d2, d3} {
			if err := d.Free(); err != nil {
				return err
			}
		}
	}
	// Goroutines each Idup their own communicator and use the copy.
	const g = 3
	comms := make([]*mpi.Comm, g)
	for i := range comms {
		if comms[i], err = w.Dup(); err != nil {
			return err
		}
	}
	errs := make([]error, g)
	var wg sync.WaitGroup
	for i := 0; i < g; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for it := 0; it < rounds/2+1; it++ {
				d, q, err := comms[i].Idup()
				if err != nil {
					errs[i] = err
					return
				}
				if _, err := q.Wait(); err != nil {
					errs[i] = err
					return
				}
				s := []int{0}
				if err := mpi.Allreduce(d, []int{i + it}, s, mpi.Sum); err != nil || s[0] != n*(i+it) {
					errs[i] = fmt.Errorf("goroutine %d: allreduce %v %v", i, s, err)
					return
				}
				if err := d.Free(); err != nil {
					errs[i] = err
					return
				}
			}
		}(i)
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	for _, c := range append(comms, base) {
		if err := c.Free(); err != nil {
			return err
		}
	}
	return nil
}

// checkPersistent starts persistent collectives many times with new
// buffer contents each time, one at a time and several at once.
func checkPersistent(w *mpi.Comm) error {
	n, me := w.Size(), w.Rank()
	iters := 25
	if *short {
		iters = 8
	}
	for _, m := range []int{1, 7, 1000, 20000} {
		k := max(m/n, 1)
		bc := make([]float64, m)
		ars, arr := make([]float64, m), make([]float64, m)
		rds, rdr := make([]float64, m), make([]float64, m)
		ags, agr := make([]float64, k), make([]float64, n*k)
		a2s, a2r := make([]float64, n*k), make([]float64, n*k)
		gs, gr := make([]float64, k), make([]float64, n*k)
		ss, sr := make([]float64, n*k), make([]float64, k)
		rsb, rsr := make([]float64, n*k), make([]float64, k)
		scs, scr := make([]float64, m), make([]float64, m)
		root := (m + 1) % n
		var reqs []*mpi.Request
		add := func(q *mpi.Request, err error) error {
			reqs = append(reqs, q)
			return err
		}
		for _, f := range []func() error{
			func() error { return add(mpi.BarrierInit(w)) },
			func() error { return add(mpi.BcastInit(w, bc, root)) },
			func() error { return add(mpi.AllreduceInit(w, ars, arr, mpi.Sum)) },
			func() error { return add(mpi.ReduceInit(w, rds, rdr, mpi.Sum, root)) },
			func() error { return add(mpi.AllgatherInit(w, ags, agr)) },
			func() error { return add(mpi.AlltoallInit(w, a2s, a2r)) },
			func() error { return add(mpi.GatherInit(w, gs, gr, root)) },
			func() error { return add(mpi.ScatterInit(w, ss, sr, root)) },
			func() error { return add(mpi.ReduceScatterBlockInit(w, rsb, rsr, mpi.Sum)) },
			func() error { return add(mpi.ScanInit(w, scs, scr, mpi.Sum)) },
		} {
			if err := f(); err != nil {
				return err
			}
		}
		fill := func(it int) {
			if me == root {
				copy(bc, vals(root, m, it))
			}
			copy(ars, vals(me, m, it+1))
			copy(rds, vals(me, m, it+2))
			copy(ags, vals(me, k, it+3))
			for d := 0; d < n; d++ {
				copy(a2s[d*k:], vals(me*100+d, k, it))
				copy(rsb[d*k:], vals(me, k, it+d))
			}
			copy(gs, vals(me, k, it+4))
			if me == root {
				for d := 0; d < n; d++ {
					copy(ss[d*k:], vals(d, k, it+5))
				}
			}
			copy(scs, vals(me, m, it+6))
		}
		verify := func(it int) error {
			all := make([]int, n)
			for i := range all {
				all[i] = i
			}
			if err := runner.Eq("bcast", bc, vals(root, m, it)); err != nil {
				return err
			}
			if err := runner.Eq("allreduce", arr, sumRef(all, m, it+1)); err != nil {
				return err
			}
			if me == root {
				if err := runner.Eq("reduce", rdr, sumRef(all, m, it+2)); err != nil {
					return err
				}
				for r := 0; r < n; r++ {
					if err := runner.Eq("gather", gr[r*k:(r+1)*k], vals(r, k, it+4)); err != nil {
						return err
					}
				}
			}
			for r := 0; r < n; r++ {
				if err := runner.Eq("allgather", agr[r*k:(r+1)*k], vals(r, k, it+3)); err != nil {
					return err
				}
				if err := runner.Eq("alltoall", a2r[r*k:(r+1)*k], vals(r*100+me, k, it)); err != nil {
					return err
				}
			}
			if err := runner.Eq("scatter", sr, vals(me, k, it+5)); err != nil {
				return err
			}
			if err := runner.Eq("reducescatterblock", rsr, sumRef(all, k, it+me)); err != nil {
				return err
			}
			return runner.Eq("scan", scr, sumRef(all[:me+1], m, it+6))
		}
		for it := 0; it < iters; it++ {
			fill(it)
			if it%2 == 0 {
				// All at once.
				if err := mpi.Startall(reqs); err != nil {
					return err
				}
				if _, err := mpi.Waitall(reqs); err != nil {
					return err
				}
			} else {
				// One after the other, the first one checked for double start.
				for i, q := range reqs {
					if err := q.Start(); err != nil {
						return err
					}
					if i == 0 {
						if err := q.Start(); !errors.Is(err, mpi.ErrRequest) {
							return fmt.Errorf("start of an active request: %v", err)
						}
					}
					if _, err := q.Wait(); err != nil {
						return fmt.Errorf("persistent %d: %w", i, err)
					}
				}
			}
			if err := verify(it); err != nil {
				return fmt.Errorf("m=%d iteration %d: %w", m, it, err)
			}
		}
	}
	if err := persistentV(w, iters); err != nil {
		return err
	}
	// Persistent collectives on an intercommunicator.
	xs, err := inters(w)
	if err != nil {
		return err
	}
	for _, x := range xs {
		m := 300
		ars, arr := make([]float64, m), make([]float64, m)
		bc := make([]float64, m)
		root, isRoot := x.rootArg(1, len(x.members[1])-1)
		qa, err := mpi.AllreduceInit(x.ic, ars, arr, mpi.Sum)
		if err != nil {
			return err
		}
		qb, err := mpi.BcastInit(x.ic, bc, root)
		if err != nil {
			return err
		}
		qc, err := mpi.BarrierInit(x.ic)
		if err != nil {
			return err
		}
		// Reduce to the first rank of group 0 from group 1.
		rroot, rIsRoot := x.rootArg(0, 0)
		rds, rdr := make([]float64, m), make([]float64, m)
		qd, err := mpi.ReduceInit(x.ic, rds, rdr, mpi.Sum, rroot)
		if err != nil {
			return err
		}
		rootWorld := x.members[1][len(x.members[1])-1]
		for it := 0; it < iters; it++ {
			copy(ars, vals(x.me, m, it))
			if isRoot {
				copy(bc, vals(rootWorld, m, it+1))
			}
			copy(rds, vals(x.me, m, it+2))
			if err := mpi.Startall([]*mpi.Request{qa, qb, qc, qd}); err != nil {
				return err
			}
			if _, err := mpi.Waitall([]*mpi.Request{qc, qd, qb, qa}); err != nil {
				return err
			}
			if rIsRoot {
				if err := runner.Eq(x.name+" persistent reduce", rdr, sumRef(x.members[1], m, it+2)); err != nil {
					return err
				}
			}
			if err := runner.Eq(x.name+" persistent allreduce", arr, sumRef(x.remote(), m, it)); err != nil {
				return err
			}
			if x.color == 0 {
				if err := runner.Eq(x.name+" persistent bcast", bc, vals(rootWorld, m, it+1)); err != nil {
					return err
				}
			}
		}
		if err := x.free(); err != nil {
			return err
		}
	}
	return nil
}

// persistentV checks the persistent v-forms, ReduceScatter and Exscan on
// the world, started together many times with new contents.
func persistentV(w *mpi.Comm, iters int) error {
	n, me := w.Size(), w.Rank()
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	for _, m := range []int{5, 300} {
		root := n - 1
		cnt := make([]int, n)
		for r := range cnt {
			cnt[r] = vcount(r, 0, m)
		}
		displs, total := layout(cnt)
		gvs, gvr := make([]float64, cnt[me]), make([]float64, total)
		svs, svr := make([]float64, total), make([]float64, cnt[me])
		avs, avr := make([]float64, cnt[me]), make([]float64, total)
		sc, rc := make([]int, n), make([]int, n)
		for r := 0; r < n; r++ {
			sc[r], rc[r] = vcount(me, r, m), vcount(r, me, m)
		}
		sd, st := layout(sc)
		rd, rt := layout(rc)
		a2s, a2r := make([]float64, st), make([]float64, rt)
		rcounts := cuts(2*m+1, n)
		rss, rsr := make([]float64, 2*m+1), make([]float64, rcounts[me])
		exs, exr := make([]float64, m), make([]float64, m)
		var reqs []*mpi.Request
		for _, mk := range []func() (*mpi.Request, error){
			func() (*mpi.Request, error) { return mpi.GathervInit(w, gvs, gvr, cnt, displs, root) },
			func() (*mpi.Request, error) { return mpi.ScattervInit(w, svs, cnt, displs, svr, root) },
			func() (*mpi.Request, error) { return mpi.AllgathervInit(w, avs, avr, cnt, displs) },
			func() (*mpi.Request, error) { return mpi.AlltoallvInit(w, a2s, sc, sd, a2r, rc, rd) },
			func() (*mpi.Request, error) { return mpi.ReduceScatterInit(w, rss, rsr, rcounts, mpi.Sum) },
			func() (*mpi.Request, error) { return mpi.ExscanInit(w, exs, exr, mpi.Sum) },
		} {
			q, err := mk()
			if err != nil {
				return err
			}
			reqs = append(reqs, q)
		}
		for it := 0; it < iters; it++ {
			copy(gvs, vals(me, cnt[me], it))
			if me == root {
				for r := 0; r < n; r++ {
					copy(svs[displs[r]:], vals(r, cnt[r], it+1))
				}
			}
			copy(avs, vals(me, cnt[me], it+2))
			for d := 0; d < n; d++ {
				copy(a2s[sd[d]:], pair(me, d+it, sc[d]))
			}
			copy(rss, vals(me, len(rss), it+3))
			copy(exs, vals(me, m, it+4))
			for i := range exr {
				exr[i] = gap
			}
			if err := mpi.Startall(reqs); err != nil {
				return err
			}
			if _, err := mpi.Waitall(reqs); err != nil {
				return err
			}
			what := func(s string) string { return fmt.Sprintf("%s m=%d iteration %d", s, m, it) }
			for r := 0; r < n; r++ {
				if me == root {
					if err := runner.Eq(what("gatherv"), gvr[displs[r]:displs[r]+cnt[r]], vals(r, cnt[r], it)); err != nil {
						return err
					}
				}
				if err := runner.Eq(what("allgatherv"), avr[displs[r]:displs[r]+cnt[r]], vals(r, cnt[r], it+2)); err != nil {
					return err
				}
				if err := runner.Eq(what("alltoallv"), a2r[rd[r]:rd[r]+rc[r]], pair(r, me+it, rc[r])); err != nil {
					return err
				}
			}
			if err := runner.Eq(what("scatterv"), svr, vals(me, cnt[me], it+1)); err != nil {
				return err
			}
			off := 0
			for r := 0; r < me; r++ {
				off += rcounts[r]
			}
			if err := runner.Eq(what("reducescatter"), rsr, sumRef(all, len(rss), it+3)[off:off+rcounts[me]]); err != nil {
				return err
			}
			want := gaps(m)
			if me > 0 {
				want = sumRef(all[:me], m, it+4)
			}
			if err := runner.Eq(what("exscan"), exr, want); err != nil {
				return err
			}
		}
	}
	return nil
}

func checkErrors(w *mpi.Comm) error {
	xs, err := inters(w)
	if err != nil {
		return err
	}
	x := xs[0]
	ic := x.ic
	nl, nr := ic.Size(), ic.RemoteSize()
	f := make([]float64, 4)
	big := make([]float64, 4*nr)
	for _, c := range []struct {
		what string
		err  error
		want mpi.Class
	}{
		{"allreduce in place", mpi.Allreduce(ic, mpi.InPlace[float64](), f, mpi.Sum), mpi.ErrBuffer},
		{"allgather in place", mpi.Allgather(ic, mpi.InPlace[float64](), big), mpi.ErrBuffer},
		{"alltoall in place", mpi.Alltoall(ic, mpi.InPlace[float64](), big), mpi.ErrBuffer},
		{"gather in place at root", mpi.Gather(ic, mpi.InPlace[float64](), big, mpi.Root), mpi.ErrBuffer},
		{"reduce in place at root", mpi.Reduce(ic, mpi.InPlace[float64](), f, mpi.Sum, mpi.Root), mpi.ErrBuffer},
		{"reducescatterblock in place", mpi.ReduceScatterBlock(ic, mpi.InPlace[float64](), f, mpi.Sum), mpi.ErrBuffer},
		{"bcast root = remote size", mpi.Bcast(ic, f, nr), mpi.ErrRoot},
		{"bcast root -7", mpi.Bcast(ic, f, -7), mpi.ErrRoot},
		{"reduce root = remote size", mpi.Reduce(ic, f, f, mpi.Sum, nr), mpi.ErrRoot},
		{"gather root -7", mpi.Gather(ic, f, big, -7), mpi.ErrRoot},
		{"Root on an intracommunicator", mpi.Bcast(w, f, mpi.Root), mpi.ErrRoot},
		{"scan on an intercommunicator", mpi.Scan(ic, f, make([]float64, 4), mpi.Sum), mpi.ErrComm},
		{"alltoallv counts", mpi.Alltoallv(ic, big, make([]int, nr+1), make([]int, nr+1), big, make([]int, nr), make([]int, nr)), mpi.ErrCount},
		{"reducescatter counts", mpi.ReduceScatter(ic, f, f[:1], make([]int, nl+1), mpi.Sum), mpi.ErrCount},
		{"allreduce nil op", mpi.Allreduce(ic, f, make([]float64, 4), nil), mpi.ErrOp},
	} {
		if !errors.Is(c.err, c.want) {
			return fmt.Errorf("%s: %v, want class %v", c.what, c.err, c.want)
		}
	}
	if _, err := mpi.IallreduceBuf(ic, mpi.InPlaceBuf, mpi.Slice(f), mpi.Sum); !errors.Is(err, mpi.ErrBuffer) {
		return fmt.Errorf("iallreduce in place: %v", err)
	}
	if _, err := mpi.BcastInit(ic, f, nr+3); !errors.Is(err, mpi.ErrRoot) {
		return fmt.Errorf("bcast init bad root: %v", err)
	}
	// A persistent collective cannot start once its communicator is freed.
	d, err := w.Dup()
	if err != nil {
		return err
	}
	pq, err := mpi.AllreduceInit(d, []int{1}, make([]int, 1), mpi.Sum)
	if err != nil {
		return err
	}
	if err := d.Free(); err != nil {
		return err
	}
	if err := pq.Start(); !errors.Is(err, mpi.ErrComm) {
		return fmt.Errorf("start on a freed communicator: %v", err)
	}
	// The intercommunicator still works after the rejected calls.
	got := []int{0}
	if err := mpi.Allreduce(ic, []int{1}, got, mpi.Sum); err != nil || got[0] != nr {
		return fmt.Errorf("allreduce after errors: %v %v", got, err)
	}
	for _, x := range xs {
		if err := x.free(); err != nil {
			return err
		}
	}
	return nil
}

func unsafePtr(b []byte, off int) unsafe.Pointer { return unsafe.Pointer(&b[off]) }
