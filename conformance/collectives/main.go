// Command collectives is the conformance program for groups,
// communicators, topologies and every collective on intracommunicators
// (blocking and non-blocking), each check comparing every rank's results
// with what a sequential computation of the same inputs gives. Run one
// check under mpirun (conformance/internal/runner):
//
//	mpirun -np 4 collectives [-short] <check>
//	collectives -list
package main

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"sync"
	"unsafe"

	"github.com/adimpi/adimpi/conformance/internal/runner"
	"github.com/adimpi/adimpi/datatype"
	"github.com/adimpi/adimpi/mpi"
)

var (
	short = flag.Bool("short", false, "smaller sizes and loops")
	dups  = flag.Int("dups", 0, "communicators the dupfree check keeps alive at once (0: 10000, or 1000 with -short or more than 4 ranks)")
)

var checks = []runner.NamedFunc{
	{Name: "groups", Fn: checkGroups},
	{Name: "comms", Fn: checkComms},
	{Name: "dupfree", Fn: checkDupFree},
	{Name: "barrier", Fn: checkBarrier},
	{Name: "bcast", Fn: checkBcast},
	{Name: "gather", Fn: checkGather},
	{Name: "scatter", Fn: checkScatter},
	{Name: "allgather", Fn: checkAllgather},
	{Name: "alltoall", Fn: checkAlltoall},
	{Name: "alltoallw", Fn: checkAlltoallw},
	{Name: "reduce", Fn: checkReduce},
	{Name: "allreduce", Fn: checkAllreduce},
	{Name: "allreduce-chain", Fn: checkAllreduceChain},
	{Name: "ops", Fn: checkOps},
	{Name: "noncommutative", Fn: checkNonCommutative},
	{Name: "reducescatter", Fn: checkReduceScatter},
	{Name: "scan", Fn: checkScan},
	{Name: "inplace", Fn: checkInPlace},
	{Name: "split", Fn: checkSplitColl},
	{Name: "nbc", Fn: checkNBC},
	{Name: "threads", Fn: checkThreads},
	{Name: "topo", Fn: checkTopo},
	{Name: "intercomm", Fn: checkIntercomm},
	{Name: "errors", Fn: checkErrors},
	{Name: "mismatch", Fn: checkMismatch},
	{Name: "subcomms", Fn: checkSubcomms},
}

func main() {
	runner.Program{Name: "collectives", Checks: runner.CommChecks(1, checks)}.Main()
}

// sizes are the element counts collectives are checked with: 0, 1, odd, and
// a large one (~1 MiB of float64 for the rooted/reducing calls).
func sizes() []int {
	if *short {
		return []int{0, 1, 7, 1000}
	}
	return []int{0, 1, 7, 1000, 131072}
}

// val is rank r's element i: small integers, so float sums are exact.
func val(r, i int) float64 { return float64((r*131+i*7)%1000 - 300) }

func checkGroups(w *mpi.Comm) error {
	n, me := w.Size(), w.Rank()
	g, err := w.Group()
	if err != nil {
		return err
	}
	if g.Size() != n || g.Rank() != me {
		return fmt.Errorf("world group size %d rank %d", g.Size(), g.Rank())
	}
	if mpi.GroupEmpty.Size() != 0 || mpi.GroupEmpty.Rank() != mpi.Undefined {
		return errors.New("GroupEmpty not empty")
	}
	// Reverse order.
	rev := make([]int, n)
	for i := range rev {
		rev[i] = n - 1 - i
	}
	gr, err := g.Incl(rev)
	if err != nil {
		return err
	}
	if gr.Rank() != n-1-me {
		return fmt.Errorf("reversed group rank %d, want %d", gr.Rank(), n-1-me)
	}
	if c, _ := mpi.GroupCompare(g, gr); (n > 1 && c != mpi.Similar) || (n == 1 && c != mpi.Ident) {
		return fmt.Errorf("compare(world, reversed) = %v", c)
	}
	tr, err := mpi.TranslateRanks(g, []int{0, n - 1, mpi.ProcNull}, gr)
	if err != nil {
		return err
	}
	if err := runner.Eq("translate", tr, []int{n - 1, 0, mpi.ProcNull}); err != nil {
		return err
	}
	// Evens by range, odds by exclusion.
	ev, err := g.RangeIncl([][3]int{{0, n - 1, 2}})
	if err != nil {
		return err
	}
	var evens, odds []int
	for i := 0; i < n; i++ {
		if i%2 == 0 {
			evens = append(evens, i)
		} else {
			odds = append(odds, i)
		}
	}
	od, err := g.Excl(evens)
	if err != nil {
		return err
	}
	od2, err := g.RangeExcl([][3]int{{0, n - 1, 2}})
	if err != nil {
		return err
	}
	if c, _ := mpi.GroupCompare(od, od2); c != mpi.Ident {
		return fmt.Errorf("Excl and RangeExcl differ: %v", c)
	}
	if ev.Size() != len(evens) || od.Size() != len(odds) {
		return fmt.Errorf("evens %d odds %d", ev.Size(), od.Size())
	}
	wantEv := mpi.Undefined
	if me%2 == 0 {
		wantEv = me / 2
	}
	if ev.Rank() != wantEv {
		return fmt.Errorf("even group rank %d want %d", ev.Rank(), wantEv)
	}
	u, _ := mpi.Union(od, ev)
	in, _ := mpi.Intersection(g, od)
	d, _ := mpi.Difference(g, od)
	if u.Size() != n || in.Size() != len(odds) || d.Size() != len(evens) {
		return fmt.Errorf("union %d inter %d diff %d", u.Size(), in.Size(), d.Size())
	}
	// Union order: odds first, then evens.
	ut, _ := mpi.TranslateRanks(u, identity(n), g)
	if err := runner.Eq("union order", ut, append(slices.Clone(odds), evens...)); err != nil {
		return err
	}
	if c, _ := mpi.GroupCompare(d, ev); c != mpi.Ident {
		return fmt.Errorf("difference != evens: %v", c)
	}
	if _, err := g.Incl([]int{0, 0}); !errors.Is(err, mpi.ErrRank) {
		return fmt.Errorf("Incl duplicate: %v", err)
	}
	if _, err := g.Incl([]int{n}); !errors.Is(err, mpi.ErrRank) {
		return fmt.Errorf("Incl out of range: %v", err)
	}
	e, _ := mpi.Difference(g, g)
	if c, _ := mpi.GroupCompare(e, mpi.GroupEmpty); c != mpi.Ident {
		return errors.New("g - g is not empty")
	}
	return nil
}

func identity(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

// checkShared checks sh, w's SplitTypeShared communicator with key the
// world rank: it holds the ranks of this host (same processor name), in
// world order; with ADIMPI_PRETEND_HOSTS (ranks placed on pretend hosts)
// the communicators of the ranks partition w, each ordered by world rank.
func checkShared(w, sh *mpi.Comm) error {
	n, me := w.Size(), w.Rank()
	if os.Getenv("ADIMPI_PRETEND_HOSTS") == "" {
		local, lrank, err := sameHost(w)
		if err != nil {
			return err
		}
		if sh.Size() != local || sh.Rank() != lrank {
			return fmt.Errorf("split type shared: rank %d of %d, want %d of %d (the ranks with this processor name)", sh.Rank(), sh.Size(), lrank, local)
		}
		return nil
	}
	// Every rank names its host by the lowest world rank on it.
	low := []int{me}
	if err := mpi.Allreduce(sh, []int{me}, low, mpi.Min); err != nil {
		return err
	}
	lows := make([]int, n)
	if err := mpi.Allgather(w, low, lows); err != nil {
		return err
	}
	size, rank := 0, 0
	for r, l := range lows {
		if l == low[0] {
			size++
			if r < me {
				rank++
			}
		}
	}
	if sh.Size() != size || sh.Rank() != rank || lows[low[0]] != low[0] {
		return fmt.Errorf("split type shared: rank %d of %d on the host of world rank %d, want %d of %d (hosts by world rank: %v)", sh.Rank(), sh.Size(), low[0], rank, size, lows)
	}
	return nil
}

// sameHost returns how many ranks of w share this process's host (its
// processor name) and this process's place among them.
func sameHost(w *mpi.Comm) (count, rank int, err error) {
	const width = 64
	name := make([]byte, width)
	copy(name, mpi.ProcessorName())
	all := make([]byte, width*w.Size())
	if err := mpi.Allgather(w, name, all); err != nil {
		return 0, 0, fmt.Errorf("allgather of host names: %v", err)
	}
	for r := 0; r < w.Size(); r++ {
		if string(all[r*width:(r+1)*width]) == string(name) {
			if r == w.Rank() {
				rank = count
			}
			count++
		}
	}
	return count, rank, nil
}

func checkComms(w *mpi.Comm) error {
	n, me := w.Size(), w.Rank()
	d, err := w.Dup()
	if err != nil {
		return err
	}
	if d.Size() != n || d.Rank() != me {
		return fmt.Errorf("dup size %d rank %d", d.Size(), d.Rank())
	}
	if c, _ := mpi.Compare(w, d); c != mpi.Congruent {
		return fmt.Errorf("compare(world, dup) = %v", c)
	}
	if c, _ := mpi.Compare(d, d); c != mpi.Ident {
		return fmt.Errorf("compare(dup, dup) = %v", c)
	}
	// Messages on the dup never match the world's: send the same tag on
	// both, receive the dup's first.
	right, left := (me+1)%n, (me-1+n)%n
	a, b := []int{me}, []int{-me - 1}
	qa, _ := mpi.Isend(w, a, right, 5)
	qb, _ := mpi.Isend(d, b, right, 5)
	rb, ra := []int{0}, []int{0}
	if _, err := mpi.Recv(d, rb, left, 5); err != nil {
		return err
	}
	if _, err := mpi.Recv(w, ra, left, 5); err != nil {
		return err
	}
	if _, err := mpi.Waitall([]*mpi.Request{qa, qb}); err != nil {
		return err
	}
	if ra[0] != left || rb[0] != -left-1 {
		return fmt.Errorf("context mix-up: world got %d dup got %d", ra[0], rb[0])
	}
	// Reversed order through Split: key = -rank.
	rv, err := w.Split(0, -me)
	if err != nil {
		return err
	}
	if rv.Rank() != n-1-me {
		return fmt.Errorf("reversed split rank %d", rv.Rank())
	}
	if c, _ := mpi.Compare(w, rv); (n > 1 && c != mpi.Similar) || (n == 1 && c != mpi.Congruent) {
		return fmt.Errorf("compare(world, reversed) = %v", c)
	}
	// Undefined color.
	nc, err := w.Split(mpi.Undefined, 0)
	if err != nil || nc != nil {
		return fmt.Errorf("split undefined: %v %v", nc, err)
	}
	sh, err := w.SplitType(mpi.SplitTypeShared, me)
	if err != nil {
		return fmt.Errorf("split type shared: %v", err)
	}
	if err := checkShared(w, sh); err != nil {
		return err
	}
	// Create with the odd ranks; CreateGroup with the even ones.
	g, _ := w.Group()
	od, _ := g.RangeIncl([][3]int{{1, n - 1, 2}})
	if n == 1 {
		od = mpi.GroupEmpty
	}
	oc, err := w.Create(od)
	if err != nil {
		return err
	}
	if (me%2 == 1) != (oc != nil) {
		return fmt.Errorf("create: member %v comm %v", me%2 == 1, oc)
	}
	if oc != nil {
		if oc.Rank() != me/2 || oc.Size() != n/2 {
			return fmt.Errorf("odd comm rank %d size %d", oc.Rank(), oc.Size())
		}
		s := []int{0}
		if err := mpi.Allreduce(oc, []int{me}, s, mpi.Sum); err != nil {
			return err
		}
		want := 0
		for i := 1; i < n; i += 2 {
			want += i
		}
		if s[0] != want {
			return fmt.Errorf("odd allreduce %d want %d", s[0], want)
		}
		if err := oc.Free(); err != nil {
			return err
		}
	}
	if me%2 == 0 {
		ev, _ := g.RangeIncl([][3]int{{0, n - 1, 2}})
		ec, err := w.CreateGroup(ev, 77)
		if err != nil {
			return err
		}
		s := []int{0}
		if err := mpi.Allreduce(ec, []int{me}, s, mpi.Sum); err != nil {
			return err
		}
		want := 0
		for i := 0; i < n; i += 2 {
			want += i
		}
		if s[0] != want || ec.Rank() != me/2 {
			return fmt.Errorf("even create_group: sum %d want %d rank %d", s[0], want, ec.Rank())
		}
		if err := ec.Free(); err != nil {
			return err
		}
	}
	for _, c := range []*mpi.Comm{d, rv, sh} {
		if err := c.Free(); err != nil {
			return err
		}
	}
	if err := d.Free(); !errors.Is(err, mpi.ErrComm) {
		return fmt.Errorf("double free: %v", err)
	}
	if err := mpi.Barrier(d); !errors.Is(err, mpi.ErrComm) {
		return fmt.Errorf("barrier on freed comm: %v", err)
	}
	if err := w.Free(); !errors.Is(err, mpi.ErrComm) {
		return fmt.Errorf("freeing world: %v", err)
	}
	return nil
}

func checkDupFree(w *mpi.Comm) error {
	k := 10000
	if *short || w.Size() > 4 {
		k = 1000
	}
	if *dups > 0 {
		k = *dups
	}
	cs := make([]*mpi.Comm, 0, k)
	for i := 0; i < k; i++ {
		c, err := w.Dup()
		if err != nil {
			return fmt.Errorf("dup %d: %v", i, err)
		}
		cs = append(cs, c)
	}
	// The newest and the oldest still work and are separate.
	s := []int{0}
	if err := mpi.Allreduce(cs[k-1], []int{1}, s, mpi.Sum); err != nil || s[0] != w.Size() {
		return fmt.Errorf("allreduce on dup %d: %v %v", k-1, s, err)
	}
	for _, c := range cs {
		if err := c.Free(); err != nil {
			return err
		}
	}
	// Freed ids are reused: another round of dups must not run out.
	for i := 0; i < 20; i++ {
		c, err := w.Dup()
		if err != nil {
			return err
		}
		if err := mpi.Barrier(c); err != nil {
			return err
		}
		if err := c.Free(); err != nil {
			return err
		}
	}
	return nil
}

func checkBarrier(w *mpi.Comm) error {
	// Each rank increments a counter held by rank 0 after a barrier; before
	// the barrier rank 0 has seen every rank's pre-barrier message.
	for i := 0; i < 20; i++ {
		if err := mpi.Barrier(w); err != nil {
			return err
		}
	}
	return nil
}

func checkBcast(w *mpi.Comm) error {
	n, me := w.Size(), w.Rank()
	// 131073 float64 is one element more than 1 MiB: a device that passes
	// broadcasts of up to 1 MiB through shared slots (netvm's boards) takes
	// its other path for it.
	for _, m := range append(sizes(), 131073) {
		for _, root := range runner.Roots(n) {
			buf := make([]float64, m)
			want := make([]float64, m)
			for i := range want {
				want[i] = val(root, i)
			}
			if me == root {
				copy(buf, want)
			}
			if err := mpi.Bcast(w, buf, root); err != nil {
				return err
			}
			if err := runner.Eq(fmt.Sprintf("bcast m=%d root=%d", m, root), buf, want); err != nil {
				return err
			}
		}
	}
	// Other element types, odd sizes.
	cb := make([]complex128, 33)
	if me == n-1 {
		for i := range cb {
			cb[i] = complex(float64(i), -float64(i))
		}
	}
	if err := mpi.Bcast(w, cb, n-1); err != nil {
		return err
	}
	for i := range cb {
		if cb[i] != complex(float64(i), -float64(i)) {
			return fmt.Errorf("complex bcast element %d: %v", i, cb[i])
		}
	}
	ib := make([]int8, 12345)
	if me == 0 {
		for i := range ib {
			ib[i] = int8(i)
		}
	}
	if err := mpi.Bcast(w, ib, 0); err != nil {
		return err
	}
	for i := range ib {
		if ib[i] != int8(i) {
			return fmt.Errorf("int8 bcast element %d: %v", i, ib[i])
		}
	}
	return nil
}

// perRank scales a size so that n blocks stay about that large in total.
func perRank(m, n int) int {
	if m > 1000 {
		return m / n
	}
	return m
}

func checkGather(w *mpi.Comm) error {
	n, me := w.Size(), w.Rank()
	for _, m0 := range sizes() {
		m := perRank(m0, n)
		for _, root := range runner.Roots(n) {
			send := make([]float64, m)
			for i := range send {
				send[i] = val(me, i)
			}
			var recv []float64
			if me == root {
				recv = make([]float64, n*m)
			}
			if err := mpi.Gather(w, send, recv, root); err != nil {
				return err
			}
			if me == root {
				for r := 0; r < n; r++ {
					for i := 0; i < m; i++ {
						if recv[r*m+i] != val(r, i) {
							return fmt.Errorf("gather m=%d root=%d: [%d][%d]=%v", m, root, r, i, recv[r*m+i])
						}
					}
				}
			}
		}
	}
	// Gatherv: rank r sends r+1 elements (or r%3), placed in reverse order with gaps.
	for _, root := range runner.Roots(n) {
		counts, displs := make([]int, n), make([]int, n)
		at := 0
		for r := n - 1; r >= 0; r-- {
			counts[r] = (r*5 + 1) % 7
			displs[r] = at
			at += counts[r] + 2
		}
		send := make([]int32, counts[me])
		for i := range send {
			send[i] = int32(me*100 + i)
		}
		var recv []int32
		if me == root {
			recv = make([]int32, at)
			for i := range recv {
				recv[i] = -1
			}
		}
		if err := mpi.Gatherv(w, send, recv, counts, displs, root); err != nil {
			return err
		}
		if me == root {
			want := make([]int32, at)
			for i := range want {
				want[i] = -1
			}
			for r := 0; r < n; r++ {
				for i := 0; i < counts[r]; i++ {
					want[displs[r]+i] = int32(r*100 + i)
				}
			}
			if err := runner.Eq("gatherv", recv, want); err != nil {
				return err
			}
		}
	}
	return nil
}

func checkScatter(w *mpi.Comm) error {
	n, me := w.Size(), w.Rank()
	for _, m0 := range sizes() {
		m := perRank(m0, n)
		for _, root := range runner.Roots(n) {
			var send []float64
			if me == root {
				send = make([]float64, n*m)
				for r := 0; r < n; r++ {
					for i := 0; i < m; i++ {
						send[r*m+i] = val(r, i)
					}
				}
			}
			recv := make([]float64, m)
			if err := mpi.Scatter(w, send, recv, root); err != nil {
				return err
			}
			for i := range recv {
				if recv[i] != val(me, i) {
					return fmt.Errorf("scatter m=%d root=%d: [%d]=%v", m, root, i, recv[i])
				}
			}
		}
	}
	for _, root := range runner.Roots(n) {
		counts, displs := make([]int, n), make([]int, n)
		at := 0
		for r := 0; r < n; r++ {
			counts[r] = (r*3 + 2) % 5
			displs[r] = at + 1
			at += counts[r] + 1
		}
		var send []uint16
		if me == root {
			send = make([]uint16, at+1)
			for i := range send {
				send[i] = uint16(i * 3)
			}
		}
		recv := make([]uint16, counts[me])
		if err := mpi.Scatterv(w, send, counts, displs, recv, root); err != nil {
			return err
		}
		for i := range recv {
			if recv[i] != uint16((displs[me]+i)*3) {
				return fmt.Errorf("scatterv [%d]=%d", i, recv[i])
			}
		}
	}
	return nil
}

func checkAllgather(w *mpi.Comm) error {
	n, me := w.Size(), w.Rank()
	ms := append(sizes(), 5000) // 5000 float64: Bruck / recursive doubling / ring by n
	for _, m0 := range ms {
		m := perRank(m0, n)
		send := make([]float64, m)
		for i := range send {
			send[i] = val(me, i)
		}
		recv := make([]float64, n*m)
		if err := mpi.Allgather(w, send, recv); err != nil {
			return err
		}
		for r := 0; r < n; r++ {
			for i := 0; i < m; i++ {
				if recv[r*m+i] != val(r, i) {
					return fmt.Errorf("allgather m=%d: [%d][%d]=%v", m, r, i, recv[r*m+i])
				}
			}
		}
	}
	counts, displs := make([]int, n), make([]int, n)
	at := 0
	for r := 0; r < n; r++ {
		counts[r] = (r * 7) % 4
		displs[r] = at
		at += counts[r] + 1
	}
	send := make([]int64, counts[me])
	for i := range send {
		send[i] = int64(me*1000 + i)
	}
	recv := make([]int64, at)
	if err := mpi.Allgatherv(w, send, recv, counts, displs); err != nil {
		return err
	}
	for r := 0; r < n; r++ {
		for i := 0; i < counts[r]; i++ {
			if recv[displs[r]+i] != int64(r*1000+i) {
				return fmt.Errorf("allgatherv [%d][%d]=%d", r, i, recv[displs[r]+i])
			}
		}
	}
	return nil
}

func checkAlltoall(w *mpi.Comm) error {
	n, me := w.Size(), w.Rank()
	// The last size makes each process's send buffer one element more
	// than 1 MiB of int32 (the most netvm's boards pass through a slot).
	for _, m0 := range append(sizes(), -1) {
		m := perRank(m0, n)
		if m0 < 0 {
			m = (1<<18)/n + 1
		}
		send := make([]int32, n*m)
		for j := 0; j < n; j++ {
			for i := 0; i < m; i++ {
				send[j*m+i] = int32(me*1000000 + j*1000 + i%1000)
			}
		}
		recv := make([]int32, n*m)
		if err := mpi.Alltoall(w, send, recv); err != nil {
			return err
		}
		for r := 0; r < n; r++ {
			for i := 0; i < m; i++ {
				if recv[r*m+i] != int32(r*1000000+me*1000+i%1000) {
					return fmt.Errorf("alltoall m=%d: [%d][%d]=%d", m, r, i, recv[r*m+i])
				}
			}
		}
	}
	// Alltoallv: rank i sends (i+j)%3 elements to j.
	cnt := func(i, j int) int { return (i + j) % 3 }
	sc, sd, rc, rd := make([]int, n), make([]int, n), make([]int, n), make([]int, n)
	sa, ra := 0, 0
	for j := 0; j < n; j++ {
		sc[j], sd[j] = cnt(me, j), sa
		sa += sc[j] + 1
		rc[j], rd[j] = cnt(j, me), ra
		ra += rc[j]
	}
	send := make([]float32, sa)
	for j := 0; j < n; j++ {
		for k := 0; k < sc[j]; k++ {
			send[sd[j]+k] = float32(me*100 + j*10 + k)
		}
	}
	recv := make([]float32, ra)
	if err := mpi.Alltoallv(w, send, sc, sd, recv, rc, rd); err != nil {
		return err
	}
	for j := 0; j < n; j++ {
		for k := 0; k < rc[j]; k++ {
			if recv[rd[j]+k] != float32(j*100+me*10+k) {
				return fmt.Errorf("alltoallv from %d [%d]=%v", j, k, recv[rd[j]+k])
			}
		}
	}
	return nil
}

func sumRef(n, m int) []float64 {
	want := make([]float64, m)
	for r := 0; r < n; r++ {
		for i := range want {
			want[i] += val(r, i)
		}
	}
	return want
}

func checkReduce(w *mpi.Comm) error {
	n, me := w.Size(), w.Rank()
	for _, m := range sizes() {
		for _, root := range runner.Roots(n) {
			send := make([]float64, m)
			for i := range send {
				send[i] = val(me, i)
			}
			recv := make([]float64, m)
			if err := mpi.Reduce(w, send, recv, mpi.Sum, root); err != nil {
				return err
			}
			if me == root {
				if err := runner.Eq(fmt.Sprintf("reduce sum m=%d root=%d", m, root), recv, sumRef(n, m)); err != nil {
					return err
				}
			}
			// Max on int64.
			si := make([]int64, m)
			for i := range si {
				si[i] = int64(val(me, i))
			}
			ri := make([]int64, m)
			if err := mpi.Reduce(w, si, ri, mpi.Max, root); err != nil {
				return err
			}
			if me == root {
				want := make([]int64, m)
				for i := range want {
					want[i] = math.MinInt64
					for r := 0; r < n; r++ {
						want[i] = max(want[i], int64(val(r, i)))
					}
				}
				if err := runner.Eq("reduce max", ri, want); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func checkAllreduce(w *mpi.Comm) error {
	n, me := w.Size(), w.Rank()
	// 2·131072+7 float64 are more than 2 MiB: a device that reduces
	// through 1 MiB slots (netvm's boards) takes three segments, the last
	// one short.
	for _, m := range append(sizes(), 300, 5000, 2*131072+7) {
		send := make([]float64, m)
		for i := range send {
			send[i] = val(me, i)
		}
		recv := make([]float64, m)
		if err := mpi.Allreduce(w, send, recv, mpi.Sum); err != nil {
			return err
		}
		if err := runner.Eq(fmt.Sprintf("allreduce sum m=%d", m), recv, sumRef(n, m)); err != nil {
			return err
		}
		// In place: each segment is read before its result is written.
		if err := mpi.Allreduce(w, mpi.InPlace[float64](), send, mpi.Sum); err != nil {
			return err
		}
		if err := runner.Eq(fmt.Sprintf("in-place allreduce sum m=%d", m), send, recv); err != nil {
			return err
		}
	}
	// Large sums of every type with a vector kernel, and of bytes, on a Dup
	// (a board of the core's on every device), at counts that split into
	// uneven shares and leave a tail past the vector block; in place too.
	d, err := w.Dup()
	if err != nil {
		return err
	}
	defer d.Free()
	m := 2*8192/n*n + 2*n + 1 // over the 8 KiB of the small path for every type
	if err := largeSum[float64](d, m, "float64"); err != nil {
		return err
	}
	if err := largeSum[float32](d, m, "float32"); err != nil {
		return err
	}
	if err := largeSum[int64](d, m, "int64"); err != nil {
		return err
	}
	if err := largeSum[uint32](d, m, "uint32"); err != nil {
		return err
	}
	if err := largeSum[int32](d, 3*m, "int32"); err != nil {
		return err
	}
	if err := largeSum[uint8](d, 9*m, "uint8"); err != nil {
		return err
	}
	// Determinism: inexact float sums are bit-identical on every rank and
	// across repetitions.
	rng := rand.New(rand.NewPCG(uint64(me), 9))
	for _, m := range []int{5, 3000, 140001} {
		send := make([]float64, m)
		for i := range send {
			send[i] = rng.Float64() * math.Pow(10, float64(rng.IntN(12)-6))
		}
		a, b := make([]float64, m), make([]float64, m)
		if err := mpi.Allreduce(w, send, a, mpi.Sum); err != nil {
			return err
		}
		if err := mpi.Allreduce(w, send, b, mpi.Sum); err != nil {
			return err
		}
		for i := range a {
			if math.Float64bits(a[i]) != math.Float64bits(b[i]) {
				return fmt.Errorf("allreduce not repeatable at %d", i)
			}
		}
		// Every rank compares its result with rank 0's, bit for bit.
		if err := mpi.Bcast(w, b, 0); err != nil {
			return err
		}
		for i := range a {
			if math.Float64bits(a[i]) != math.Float64bits(b[i]) {
				return fmt.Errorf("allreduce m=%d differs between rank 0 and %d at %d", m, me, i)
			}
		}
	}
	return nil
}

// checkAllreduceChain: back-to-back large Allreduces, on the world and on
// a Dup, with new data at every call, so that a call that reads what the
// one before left behind (a share in a board slot) shows. Most calls
// follow one of the same shape (count and type: the board path then skips
// its wait for the previous call's last round), one rank at a time comes
// late to a call (it folds its vector a few times first), and now and then
// a call of another size, another type, in place, a Barrier or a small
// Allreduce comes between. Each result is checked against the sum
// computed here.
func checkAllreduceChain(w *mpi.Comm) error {
	d, err := w.Dup()
	if err != nil {
		return err
	}
	defer d.Free()
	ms := []int{131072, 100003, 4099}
	if *short {
		ms = []int{100003, 4099}
	}
	for _, c := range []*mpi.Comm{w, d} {
		n, me := c.Size(), c.Rank()
		v := func(t, r, i int) float64 { return float64((t*29+r*131+i*7)%1000 - 300) }
		for _, m := range ms {
			send, recv, want := make([]float64, m), make([]float64, m), make([]float64, m)
			for t := range 12 {
				for i := range send {
					send[i] = v(t, me, i)
				}
				clear(want)
				for r := range n {
					for i := range want {
						want[i] += v(t, r, i)
					}
				}
				if me == t%n {
					// Come late: the others start the call first.
					for range 3 {
						for _, e := range send {
							chainSink += e
						}
					}
				}
				in, inplace := send, t%3 == 2
				if inplace {
					copy(recv, send)
					in = mpi.InPlace[float64]()
				}
				if err := mpi.Allreduce(c, in, recv, mpi.Sum); err != nil {
					return err
				}
				if err := runner.Eq(fmt.Sprintf("allreduce %d of %d float64, in place %v", t, m, inplace), recv, want); err != nil {
					return err
				}
				switch t % 5 {
				case 1:
					if err := mpi.Barrier(c); err != nil {
						return err
					}
				case 3:
					// Another shape between two of the same.
					s32, r32 := make([]float32, m), make([]float32, m)
					for i := range s32 {
						s32[i] = float32(me + i%5)
					}
					if err := mpi.Allreduce(c, s32, r32, mpi.Sum); err != nil {
						return err
					}
					for i, x := range r32 {
						if want := float32(n*(i%5) + n*(n-1)/2); x != want {
							return fmt.Errorf("allreduce of %d float32 between: element %d is %g, want %g", m, i, x, want)
						}
					}
				case 4:
					one, max := []float64{float64(me)}, []float64{-1}
					if err := mpi.Allreduce(c, one, max, mpi.Max); err != nil {
						return err
					}
					if max[0] != float64(n-1) {
						return fmt.Errorf("allreduce max between: %g, want %d", max[0], n-1)
					}
				}
			}
		}
	}
	return nil
}

// chainSink keeps checkAllreduceChain's delaying loop from being dropped.
var chainSink float64

// largeSum checks an Allreduce Sum of m elements of T on c, and the same
// in place, against the sum computed here; the values stay small enough
// that every sum is exact.
func largeSum[T float64 | float32 | int64 | uint32 | int32 | uint8](c *mpi.Comm, m int, name string) error {
	n, me := c.Size(), c.Rank()
	v := func(r, i int) T { return T((r*37+i*11)%23 + r%3) }
	send, got, want := make([]T, m), make([]T, m), make([]T, m)
	for i := range send {
		send[i] = v(me, i)
		for r := range n {
			want[i] += v(r, i)
		}
	}
	if err := mpi.Allreduce(c, send, got, mpi.Sum); err != nil {
		return err
	}
	if err := runner.Eq(fmt.Sprintf("allreduce sum of %d %s", m, name), got, want); err != nil {
		return err
	}
	if err := mpi.Allreduce(c, mpi.InPlace[T](), send, mpi.Sum); err != nil {
		return err
	}
	return runner.Eq(fmt.Sprintf("in-place allreduce sum of %d %s", m, name), send, want)
}

func checkOps(w *mpi.Comm) error {
	n, me := w.Size(), w.Rank()
	const m = 37
	iv := func(r, i int) int { return (r*7+i*13)%11 - 3 }
	// Integer ops on uint32, int8, int64.
	type intCase struct {
		op  *mpi.Op
		ref func(a, b int64) int64
	}
	b2i := func(b bool) int64 {
		if b {
			return 1
		}
		return 0
	}
	cases := []intCase{
		{mpi.Sum, func(a, b int64) int64 { return a + b }},
		{mpi.Prod, func(a, b int64) int64 { return a * b }},
		{mpi.Min, func(a, b int64) int64 { return min(a, b) }},
		{mpi.Max, func(a, b int64) int64 { return max(a, b) }},
		{mpi.Land, func(a, b int64) int64 { return b2i(a != 0 && b != 0) }},
		{mpi.Lor, func(a, b int64) int64 { return b2i(a != 0 || b != 0) }},
		{mpi.Lxor, func(a, b int64) int64 { return b2i((a != 0) != (b != 0)) }},
		{mpi.Band, func(a, b int64) int64 { return a & b }},
		{mpi.Bor, func(a, b int64) int64 { return a | b }},
		{mpi.Bxor, func(a, b int64) int64 { return a ^ b }},
		{mpi.Replace, func(a, b int64) int64 { return b }},
		{mpi.NoOp, func(a, b int64) int64 { return a }},
	}
	for _, c := range cases {
		send := make([]int64, m)
		for i := range send {
			send[i] = int64(iv(me, i))
		}
		got := make([]int64, m)
		if err := mpi.Allreduce(w, send, got, c.op); err != nil {
			return fmt.Errorf("%s: %v", c.op.Name(), err)
		}
		want := make([]int64, m)
		for i := range want {
			want[i] = int64(iv(0, i))
			for r := 1; r < n; r++ {
				want[i] = c.ref(want[i], int64(iv(r, i)))
			}
		}
		if err := runner.Eq("int64 "+c.op.Name(), got, want); err != nil {
			return err
		}
		// The same on uint32 for the bitwise ops.
		if c.op == mpi.Band || c.op == mpi.Bor || c.op == mpi.Bxor {
			su := make([]uint32, m)
			for i := range su {
				su[i] = uint32(iv(me, i) + 100)
			}
			gu := make([]uint32, m)
			if err := mpi.Allreduce(w, su, gu, c.op); err != nil {
				return err
			}
			for i := range gu {
				x := int64(iv(0, i) + 100)
				for r := 1; r < n; r++ {
					x = c.ref(x, int64(iv(r, i)+100))
				}
				if gu[i] != uint32(x) {
					return fmt.Errorf("uint32 %s [%d]=%d want %d", c.op.Name(), i, gu[i], x)
				}
			}
		}
	}
	// Min/Max on float32, Prod on complex128.
	sf := make([]float32, m)
	for i := range sf {
		sf[i] = float32(iv(me, i)) / 4
	}
	gf := make([]float32, m)
	if err := mpi.Allreduce(w, sf, gf, mpi.Min); err != nil {
		return err
	}
	for i := range gf {
		x := float32(math.Inf(1))
		for r := 0; r < n; r++ {
			x = min(x, float32(iv(r, i))/4)
		}
		if gf[i] != x {
			return fmt.Errorf("float32 min [%d]=%v want %v", i, gf[i], x)
		}
	}
	sc := []complex128{complex(0, 1), complex(float64(me%3), 1)}
	gc := make([]complex128, 2)
	if err := mpi.Reduce(w, sc, gc, mpi.Prod, n-1); err != nil {
		return err
	}
	if me == n-1 {
		want := []complex128{1, 1}
		for r := 0; r < n; r++ {
			want[0] *= complex(0, 1)
			want[1] *= complex(float64(r%3), 1)
		}
		if err := runner.Eq("complex prod", gc, want); err != nil {
			return err
		}
	}
	// Minloc/Maxloc on (value, index) pairs of float64; 70001 pairs are
	// more than 1 MiB, so a large reduction's pieces must not cut a pair.
	for _, m := range []int{m, 70001} {
		pairs := make([]float64, 2*m)
		for i := 0; i < m; i++ {
			pairs[2*i], pairs[2*i+1] = float64(iv(me, i)%4), float64(me)
		}
		for _, op := range []*mpi.Op{mpi.Minloc, mpi.Maxloc} {
			got := make([]float64, 2*m)
			if err := mpi.Allreduce(w, pairs, got, op); err != nil {
				return err
			}
			for i := 0; i < m; i++ {
				bv, bi := float64(iv(0, i)%4), 0.0
				for r := 1; r < n; r++ {
					v := float64(iv(r, i) % 4)
					if (op == mpi.Minloc && v < bv) || (op == mpi.Maxloc && v > bv) {
						bv, bi = v, float64(r)
					}
				}
				if got[2*i] != bv || got[2*i+1] != bi {
					return fmt.Errorf("%s m=%d pair %d = (%v,%v) want (%v,%v)", op.Name(), m, i, got[2*i], got[2*i+1], bv, bi)
				}
			}
		}
	}
	// ReduceLocal.
	a, b := []int{1, 2, 3}, []int{10, 20, 30}
	if err := mpi.ReduceLocal(a, b, mpi.Sum); err != nil || b[2] != 33 {
		return fmt.Errorf("reduce local %v %v", b, err)
	}
	return nil
}

// Non-commutative: products of 2×2 integer matrices modulo a prime, four
// int64 per matrix.
const prime = 1000003

func matmul(a, b []int64) { // b = a·b
	x := (a[0]*b[0] + a[1]*b[2]) % prime
	y := (a[0]*b[1] + a[1]*b[3]) % prime
	z := (a[2]*b[0] + a[3]*b[2]) % prime
	t := (a[2]*b[1] + a[3]*b[3]) % prime
	b[0], b[1], b[2], b[3] = x, y, z, t
}

var matOp = mpi.NewTypedOp(func(in, inout []int64) {
	for i := 0; i+3 < len(inout); i += 4 {
		matmul(in[i:i+4], inout[i:i+4])
	}
}, false)

func mat(r, k int) []int64 {
	return []int64{int64(r*3+k+1) % prime, int64(r + 2*k), int64(k*k + 1), int64(r*r+k) % 7}
}

func matRef(lo, hi, k int) []int64 { // product of mats lo..hi-1, in order
	acc := []int64{1, 0, 0, 1}
	for r := hi - 1; r >= lo; r-- {
		matmul(mat(r, k), acc)
	}
	return acc
}

func mats(r, count int) []int64 {
	out := make([]int64, 0, 4*count)
	for k := 0; k < count; k++ {
		out = append(out, mat(r, k)...)
	}
	return out
}

func checkNonCommutative(w *mpi.Comm) error {
	n, me := w.Size(), w.Rank()
	for _, count := range []int{1, 3, 700} { // 700 matrices = 22 KiB: Rabenseifner-size
		want := make([]int64, 0, 4*count)
		for k := 0; k < count; k++ {
			want = append(want, matRef(0, n, k)...)
		}
		got := make([]int64, 4*count)
		if err := mpi.Allreduce(w, mats(me, count), got, matOp); err != nil {
			return err
		}
		if err := runner.Eq(fmt.Sprintf("noncommutative allreduce count=%d", count), got, want); err != nil {
			return err
		}
		for _, root := range runner.Roots(n) {
			got := make([]int64, 4*count)
			if err := mpi.Reduce(w, mats(me, count), got, matOp, root); err != nil {
				return err
			}
			if me == root {
				if err := runner.Eq(fmt.Sprintf("noncommutative reduce root=%d", root), got, want); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func checkReduceScatter(w *mpi.Comm) error {
	n, me := w.Size(), w.Rank()
	for _, k := range []int{0, 1, 5, 300} {
		send := make([]float64, n*k)
		for i := range send {
			send[i] = val(me, i)
		}
		recv := make([]float64, k)
		if err := mpi.ReduceScatterBlock(w, send, recv, mpi.Sum); err != nil {
			return err
		}
		if err := runner.Eq("reduce_scatter_block", recv, sumRef(n, n*k)[me*k:(me+1)*k]); err != nil {
			return err
		}
	}
	counts := make([]int, n)
	total := 0
	for i := range counts {
		counts[i] = (i*3 + 1) % 4
		total += counts[i]
	}
	send := mats(me, total)
	recv := make([]int64, 4*counts[me])
	counts4 := make([]int, n)
	for i := range counts {
		counts4[i] = 4 * counts[i]
	}
	if err := mpi.ReduceScatter(w, send, recv, counts4, matOp); err != nil {
		return err
	}
	off := 0
	for i := 0; i < me; i++ {
		off += counts[i]
	}
	for k := 0; k < counts[me]; k++ {
		if err := runner.Eq("reduce_scatter matrices", recv[4*k:4*k+4], matRef(0, n, off+k)); err != nil {
			return err
		}
	}
	return nil
}

func checkScan(w *mpi.Comm) error {
	n, me := w.Size(), w.Rank()
	_ = n
	for _, m := range []int{0, 1, 9, 2000} {
		send := make([]float64, m)
		for i := range send {
			send[i] = val(me, i)
		}
		got := make([]float64, m)
		if err := mpi.Scan(w, send, got, mpi.Sum); err != nil {
			return err
		}
		if err := runner.Eq("scan", got, sumRef(me+1, m)); err != nil {
			return err
		}
		ex := make([]float64, m)
		for i := range ex {
			ex[i] = -7
		}
		if err := mpi.Exscan(w, send, ex, mpi.Sum); err != nil {
			return err
		}
		want := sumRef(me, m)
		if me == 0 {
			for i := range want {
				want[i] = -7
			}
		}
		if err := runner.Eq("exscan", ex, want); err != nil {
			return err
		}
	}
	for _, count := range []int{1, 5} {
		got := make([]int64, 4*count)
		if err := mpi.Scan(w, mats(me, count), got, matOp); err != nil {
			return err
		}
		for k := 0; k < count; k++ {
			if err := runner.Eq("noncommutative scan", got[4*k:4*k+4], matRef(0, me+1, k)); err != nil {
				return err
			}
		}
		ex := make([]int64, 4*count)
		if err := mpi.Exscan(w, mats(me, count), ex, matOp); err != nil {
			return err
		}
		if me > 0 {
			for k := 0; k < count; k++ {
				if err := runner.Eq("noncommutative exscan", ex[4*k:4*k+4], matRef(0, me, k)); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func checkInPlace(w *mpi.Comm) error {
	n, me := w.Size(), w.Rank()
	ip := mpi.InPlace[float64]()
	for _, m := range []int{0, 3, 4000} {
		// Allreduce.
		buf := make([]float64, m)
		for i := range buf {
			buf[i] = val(me, i)
		}
		if err := mpi.Allreduce(w, ip, buf, mpi.Sum); err != nil {
			return err
		}
		if err := runner.Eq("inplace allreduce", buf, sumRef(n, m)); err != nil {
			return err
		}
		for _, root := range runner.Roots(n) {
			// Reduce at root.
			buf := make([]float64, m)
			for i := range buf {
				buf[i] = val(me, i)
			}
			send := buf
			if me == root {
				send = ip
			}
			out := make([]float64, m)
			if me == root {
				out = buf
			}
			if err := mpi.Reduce(w, send, out, mpi.Sum, root); err != nil {
				return err
			}
			if me == root {
				if err := runner.Eq("inplace reduce", buf, sumRef(n, m)); err != nil {
					return err
				}
			}
			// Gather at root.
			all := make([]float64, n*m)
			mine := make([]float64, m)
			for i := range mine {
				mine[i] = val(me, i)
			}
			if me == root {
				copy(all[me*m:], mine)
				mine = ip
			}
			if err := mpi.Gather(w, mine, all, root); err != nil {
				return err
			}
			if me == root {
				for r := 0; r < n; r++ {
					for i := 0; i < m; i++ {
						if all[r*m+i] != val(r, i) {
							return fmt.Errorf("inplace gather [%d][%d]", r, i)
						}
					}
				}
			}
			// Scatter at root.
			var src []float64
			dst := make([]float64, m)
			if me == root {
				src = make([]float64, n*m)
				for r := 0; r < n; r++ {
					for i := 0; i < m; i++ {
						src[r*m+i] = val(r, i)
					}
				}
				dst = ip
			}
			if err := mpi.Scatter(w, src, dst, root); err != nil {
				return err
			}
			if me != root {
				for i := range dst {
					if dst[i] != val(me, i) {
						return fmt.Errorf("inplace scatter [%d]", i)
					}
				}
			}
		}
		// Allgather.
		all := make([]float64, n*m)
		for i := 0; i < m; i++ {
			all[me*m+i] = val(me, i)
		}
		if err := mpi.Allgather(w, ip, all); err != nil {
			return err
		}
		for r := 0; r < n; r++ {
			for i := 0; i < m; i++ {
				if all[r*m+i] != val(r, i) {
					return fmt.Errorf("inplace allgather [%d][%d]", r, i)
				}
			}
		}
		// Alltoall.
		k := m / n
		a := make([]float64, n*k)
		for j := 0; j < n; j++ {
			for i := 0; i < k; i++ {
				a[j*k+i] = float64(me*1000 + j*10 + i%10)
			}
		}
		if err := mpi.Alltoall(w, ip, a); err != nil {
			return err
		}
		for j := 0; j < n; j++ {
			for i := 0; i < k; i++ {
				if a[j*k+i] != float64(j*1000+me*10+i%10) {
					return fmt.Errorf("inplace alltoall [%d][%d]", j, i)
				}
			}
		}
		// Scan.
		s := make([]float64, m)
		for i := range s {
			s[i] = val(me, i)
		}
		if err := mpi.Scan(w, ip, s, mpi.Sum); err != nil {
			return err
		}
		if err := runner.Eq("inplace scan", s, sumRef(me+1, m)); err != nil {
			return err
		}
		// ReduceScatterBlock: recv holds n·k inputs, result at its start.
		rs := make([]float64, n*k)
		for i := range rs {
			rs[i] = val(me, i)
		}
		if err := mpi.ReduceScatterBlock(w, ip, rs, mpi.Sum); err != nil {
			return err
		}
		if err := runner.Eq("inplace reduce_scatter_block", rs[:k], sumRef(n, n*k)[me*k:(me+1)*k]); err != nil {
			return err
		}
	}
	return nil
}

// checkSplitColl splits the world with pseudo-random colors and keys and
// checks the parts against a sequential partition, then runs collectives on
// the parts (and on a second-level split).
func checkSplitColl(w *mpi.Comm) error {
	n, me := w.Size(), w.Rank()
	for round := 0; round < 4; round++ {
		rng := rand.New(rand.NewPCG(uint64(round), 42))
		colors, keys := make([]int, n), make([]int, n)
		for i := range colors {
			colors[i] = rng.IntN(3)
			if rng.IntN(7) == 0 {
				colors[i] = mpi.Undefined
			}
			keys[i] = rng.IntN(5) - 2
		}
		c, err := w.Split(colors[me], keys[me])
		if err != nil {
			return err
		}
		if colors[me] == mpi.Undefined {
			if c != nil {
				return errors.New("undefined color got a communicator")
			}
			continue
		}
		var members []int
		for i := 0; i < n; i++ {
			if colors[i] == colors[me] {
				members = append(members, i)
			}
		}
		sort.SliceStable(members, func(a, b int) bool { return keys[members[a]] < keys[members[b]] })
		myRank := slices.Index(members, me)
		if c.Size() != len(members) || c.Rank() != myRank {
			return fmt.Errorf("split round %d: size %d rank %d, want %d %d", round, c.Size(), c.Rank(), len(members), myRank)
		}
		// Allgather world ranks: must be members in order.
		got := make([]int, c.Size())
		if err := mpi.Allgather(c, []int{me}, got); err != nil {
			return err
		}
		if err := runner.Eq("split members", got, members); err != nil {
			return err
		}
		// Non-commutative allreduce in the sub-communicator's rank order.
		res := make([]int64, 4)
		if err := mpi.Allreduce(c, mat(me, 1), res, matOp); err != nil {
			return err
		}
		want := []int64{1, 0, 0, 1}
		for i := len(members) - 1; i >= 0; i-- {
			matmul(mat(members[i], 1), want)
		}
		if err := runner.Eq("split noncommutative allreduce", res, want); err != nil {
			return err
		}
		// Bcast from the sub-communicator's last rank.
		b := []int{0}
		if c.Rank() == c.Size()-1 {
			b[0] = me
		}
		if err := mpi.Bcast(c, b, c.Size()-1); err != nil {
			return err
		}
		if b[0] != members[len(members)-1] {
			return fmt.Errorf("split bcast got %d", b[0])
		}
		// Second level: halves.
		c2, err := c.Split(c.Rank()%2, 0)
		if err != nil {
			return err
		}
		s := []int{0}
		if err := mpi.Allreduce(c2, []int{me}, s, mpi.Sum); err != nil {
			return err
		}
		ws := 0
		for i := c.Rank() % 2; i < len(members); i += 2 {
			ws += members[i]
		}
		if s[0] != ws {
			return fmt.Errorf("second-level split sum %d want %d", s[0], ws)
		}
		c2.Free()
		c.Free()
	}
	return nil
}

// checkNBC starts several non-blocking collectives at once, exchanges
// point-to-point messages on the same communicator while they run, computes,
// and then completes them with Test and Waitall.
func checkNBC(w *mpi.Comm) error {
	n, me := w.Size(), w.Rank()
	for _, m := range []int{1, 1000, 40000} {
		send := make([]float64, m)
		for i := range send {
			send[i] = val(me, i)
		}
		ar := make([]float64, m)
		bc := make([]float64, m)
		if me == n-1 {
			for i := range bc {
				bc[i] = val(n-1, i)
			}
		}
		k := max(m/n, 1)
		ag := make([]float64, n*k)
		a2s, a2r := make([]int32, n*k), make([]int32, n*k)
		for j := 0; j < n; j++ {
			for i := 0; i < k; i++ {
				a2s[j*k+i] = int32(me*100000 + j*100 + i%100)
			}
		}
		rd := make([]float64, m)
		gat := make([]float64, n*k)
		sc := make([]float64, k)
		var scsrc []float64
		if me == 0 {
			scsrc = make([]float64, n*k)
			for r := 0; r < n; r++ {
				for i := 0; i < k; i++ {
					scsrc[r*k+i] = val(r, i)
				}
			}
		}
		var reqs []*mpi.Request
		add := func(q *mpi.Request, err error) error {
			reqs = append(reqs, q)
			return err
		}
		if err := add(mpi.Ibarrier(w)); err != nil {
			return err
		}
		if err := add(mpi.Iallreduce(w, send, ar, mpi.Sum)); err != nil {
			return err
		}
		if err := add(mpi.Ibcast(w, bc, n-1)); err != nil {
			return err
		}
		if err := add(mpi.Iallgather(w, send[:k], ag)); err != nil {
			return err
		}
		if err := add(mpi.Ialltoall(w, a2s, a2r)); err != nil {
			return err
		}
		if err := add(mpi.Ireduce(w, send, rd, mpi.Sum, n/2)); err != nil {
			return err
		}
		if err := add(mpi.Igather(w, send[:k], gat, 0)); err != nil {
			return err
		}
		if err := add(mpi.Iscatter(w, scsrc, sc, 0)); err != nil {
			return err
		}
		// Point-to-point on the same communicator, with AnySource and
		// AnyTag receives, while the collectives run.
		right, left := (me+1)%n, (me-1+n)%n
		out := []int{me, m}
		in := []int{-1, -1}
		rq, err := mpi.Irecv(w, in, mpi.AnySource, mpi.AnyTag)
		if err != nil {
			return err
		}
		if err := mpi.Send(w, out, right, 3); err != nil {
			return err
		}
		if _, err := rq.Wait(); err != nil {
			return err
		}
		if in[0] != left || in[1] != m {
			return fmt.Errorf("p2p during nbc got %v", in)
		}
		// Compute, testing now and then.
		x := 0.0
		for i := 0; i < 1000; i++ {
			x += math.Sqrt(float64(i))
			if i%100 == 0 {
				if _, _, err := mpi.Testall(reqs); err != nil {
					return err
				}
			}
		}
		_ = x
		if _, err := mpi.Waitall(reqs); err != nil {
			return err
		}
		if err := runner.Eq("iallreduce", ar, sumRef(n, m)); err != nil {
			return err
		}
		want := make([]float64, m)
		for i := range want {
			want[i] = val(n-1, i)
		}
		if err := runner.Eq("ibcast", bc, want); err != nil {
			return err
		}
		if me == n/2 {
			if err := runner.Eq("ireduce", rd, sumRef(n, m)); err != nil {
				return err
			}
		}
		for r := 0; r < n; r++ {
			for i := 0; i < k; i++ {
				if ag[r*k+i] != val(r, i) {
					return fmt.Errorf("iallgather [%d][%d]", r, i)
				}
				if me == 0 && gat[r*k+i] != val(r, i) {
					return fmt.Errorf("igather [%d][%d]", r, i)
				}
				if a2r[r*k+i] != int32(r*100000+me*100+i%100) {
					return fmt.Errorf("ialltoall [%d][%d]", r, i)
				}
			}
		}
		for i := 0; i < k; i++ {
			if sc[i] != val(me, i) {
				return fmt.Errorf("iscatter [%d]", i)
			}
		}
	}
	// The other non-blocking forms, all in flight together.
	{
		counts, displs := make([]int, n), make([]int, n)
		at := 0
		for r := 0; r < n; r++ {
			counts[r], displs[r] = r%3+1, at
			at += r%3 + 1
		}
		mine := make([]int64, counts[me])
		for i := range mine {
			mine[i] = int64(me*10 + i)
		}
		agv := make([]int64, at)
		gv := make([]int64, at)
		var svSrc []int64
		if me == n-1 {
			svSrc = make([]int64, at)
			for i := range svSrc {
				svSrc[i] = int64(i * 7)
			}
		}
		sv := make([]int64, counts[me])
		sc := []int64{int64(me + 1)}
		scan, exscan := []int64{0}, []int64{-5}
		rsb := make([]int64, 2)
		rsbIn := make([]int64, 2*n)
		for i := range rsbIn {
			rsbIn[i] = int64(me + i)
		}
		a2vS, a2vR := make([]int64, n), make([]int64, n)
		one, offs := make([]int, n), make([]int, n)
		for j := range a2vS {
			a2vS[j] = int64(me*100 + j)
			one[j], offs[j] = 1, j
		}
		var reqs []*mpi.Request
		for _, f := range []func() (*mpi.Request, error){
			func() (*mpi.Request, error) { return mpi.Iallgatherv(w, mine, agv, counts, displs) },
			func() (*mpi.Request, error) { return mpi.Igatherv(w, mine, gv, counts, displs, 0) },
			func() (*mpi.Request, error) { return mpi.Iscatterv(w, svSrc, counts, displs, sv, n-1) },
			func() (*mpi.Request, error) { return mpi.Iscan(w, sc, scan, mpi.Sum) },
			func() (*mpi.Request, error) { return mpi.Iexscan(w, sc, exscan, mpi.Sum) },
			func() (*mpi.Request, error) { return mpi.IreduceScatterBlock(w, rsbIn, rsb, mpi.Sum) },
			func() (*mpi.Request, error) { return mpi.Ialltoallv(w, a2vS, one, offs, a2vR, one, offs) },
		} {
			q, err := f()
			if err != nil {
				return err
			}
			reqs = append(reqs, q)
		}
		for len(reqs) > 0 {
			idx, _, err := mpi.Waitany(reqs)
			if err != nil {
				return err
			}
			reqs = slices.Delete(reqs, idx, idx+1)
		}
		for r := 0; r < n; r++ {
			for i := 0; i < counts[r]; i++ {
				if agv[displs[r]+i] != int64(r*10+i) || (me == 0 && gv[displs[r]+i] != int64(r*10+i)) {
					return fmt.Errorf("iallgatherv/igatherv [%d][%d]", r, i)
				}
			}
			if a2vR[r] != int64(r*100+me) {
				return fmt.Errorf("ialltoallv [%d] = %d", r, a2vR[r])
			}
		}
		for i := range sv {
			if sv[i] != int64((displs[me]+i)*7) {
				return fmt.Errorf("iscatterv [%d] = %d", i, sv[i])
			}
		}
		if scan[0] != int64((me+1)*(me+2)/2) || (me > 0 && exscan[0] != int64(me*(me+1)/2)) || (me == 0 && exscan[0] != -5) {
			return fmt.Errorf("iscan %d iexscan %d", scan[0], exscan[0])
		}
		for i := range rsb {
			want := int64(0)
			for r := 0; r < n; r++ {
				want += int64(r + 2*me + i)
			}
			if rsb[i] != want {
				return fmt.Errorf("ireduce_scatter_block [%d] = %d want %d", i, rsb[i], want)
			}
		}
	}
	// Many outstanding collectives of one kind complete in any Wait order.
	const many = 8
	rs := make([]*mpi.Request, many)
	vals := make([][]int, many)
	for i := range rs {
		vals[i] = []int{0}
		q, err := mpi.Iallreduce(w, []int{me * (i + 1)}, vals[i], mpi.Sum)
		if err != nil {
			return err
		}
		rs[i] = q
	}
	for i := many - 1; i >= 0; i-- {
		if _, err := rs[i].Wait(); err != nil {
			return err
		}
		if vals[i][0] != (i+1)*n*(n-1)/2 {
			return fmt.Errorf("iallreduce %d = %d", i, vals[i][0])
		}
	}
	return nil
}

func checkErrors(w *mpi.Comm) error {
	n := w.Size()
	buf := make([]int, 4)
	if err := mpi.Bcast(w, buf, n); !errors.Is(err, mpi.ErrRoot) {
		return fmt.Errorf("bcast root n: %v", err)
	}
	if err := mpi.Reduce(w, buf, buf, mpi.Sum, -1); !errors.Is(err, mpi.ErrRoot) {
		return fmt.Errorf("reduce root -1: %v", err)
	}
	if err := mpi.Allreduce(w, buf, buf[:3], mpi.Sum); !errors.Is(err, mpi.ErrCount) {
		return fmt.Errorf("allreduce count mismatch: %v", err)
	}
	if err := mpi.Allgather(w, buf, make([]int, 4*n+1)); !errors.Is(err, mpi.ErrCount) {
		return fmt.Errorf("allgather count mismatch: %v", err)
	}
	if err := mpi.Allreduce(w, buf, make([]int, 4), nil); !errors.Is(err, mpi.ErrOp) {
		return fmt.Errorf("nil op: %v", err)
	}
	if err := mpi.Allreduce(w, []complex128{1}, make([]complex128, 1), mpi.Max); !errors.Is(err, mpi.ErrOp) {
		return fmt.Errorf("max on complex: %v", err)
	}
	if err := mpi.Barrier(nil); !errors.Is(err, mpi.ErrComm) {
		return fmt.Errorf("nil comm: %v", err)
	}
	if _, err := mpi.Iallreduce[int](nil, buf, buf, mpi.Sum); !errors.Is(err, mpi.ErrComm) {
		return fmt.Errorf("nil comm iallreduce: %v", err)
	}
	if err := mpi.Allreduce(w, []float64{1}, make([]float64, 1), matOp); !errors.Is(err, mpi.ErrType) {
		return fmt.Errorf("typed op on wrong type: %v", err)
	}
	// The communicator still works after the rejected calls.
	s := []int{0}
	if err := mpi.Allreduce(w, []int{1}, s, mpi.Sum); err != nil || s[0] != n {
		return fmt.Errorf("allreduce after errors: %v %v", s, err)
	}
	return nil
}

func checkTopo(w *mpi.Comm) error {
	n, me := w.Size(), w.Rank()
	d3 := []int{0, 3, 0}
	if err := mpi.DimsCreate(12, d3); err != nil || d3[0]*d3[1]*d3[2] != 12 || d3[1] != 3 || d3[0] < d3[2] {
		return fmt.Errorf("DimsCreate(12, [0 3 0]) = %v, %v", d3, err)
	}
	if err := mpi.DimsCreate(7, []int{2, 0}); !errors.Is(err, mpi.ErrDims) {
		return fmt.Errorf("DimsCreate(7, [2 0]): %v", err)
	}
	dims := []int{0, 0}
	if err := mpi.DimsCreate(n, dims); err != nil || dims[0]*dims[1] != n || dims[0] < dims[1] {
		return fmt.Errorf("DimsCreate(%d) = %v, %v", n, dims, err)
	}
	periods := []bool{true, false}
	cart, err := w.CartCreate(dims, periods, false)
	if err != nil {
		return err
	}
	if cart.Topo() != mpi.TopoCart || w.Topo() != mpi.TopoNone {
		return errors.New("topology kinds")
	}
	coords, err := cart.CartCoords(me)
	if err != nil {
		return err
	}
	if coords[0] != me/dims[1] || coords[1] != me%dims[1] {
		return fmt.Errorf("coords of %d = %v", me, coords)
	}
	if r, err := cart.CartRank(coords); err != nil || r != me {
		return fmt.Errorf("CartRank(%v) = %d %v", coords, r, err)
	}
	rankAt := func(x, y int) int {
		if y < 0 || y >= dims[1] {
			return mpi.ProcNull
		}
		x = ((x % dims[0]) + dims[0]) % dims[0]
		return x*dims[1] + y
	}
	x, y := coords[0], coords[1]
	refIn := []int{rankAt(x-1, y), rankAt(x+1, y), rankAt(x, y-1), rankAt(x, y+1)}
	for d := 0; d < 2; d++ {
		src, dst, err := cart.CartShift(d, 1)
		if err != nil || src != refIn[2*d] || dst != refIn[2*d+1] {
			return fmt.Errorf("CartShift(%d) = %d %d %v, want %v", d, src, dst, err, refIn)
		}
	}
	// Neighbour allgather and alltoall against the reference neighbours.
	ag := []int{-1, -1, -1, -1}
	if err := mpi.NeighborAllgather(cart, []int{me}, ag); err != nil {
		return err
	}
	for i, p := range refIn {
		want := p
		if p == mpi.ProcNull {
			want = -1
		}
		if ag[i] != want {
			return fmt.Errorf("neighbor allgather slot %d = %d want %d (coords %v dims %v)", i, ag[i], want, coords, dims)
		}
	}
	a2 := []int{-1, -1, -1, -1}
	if err := mpi.NeighborAlltoall(cart, []int{me * 10, me*10 + 1, me*10 + 2, me*10 + 3}, a2); err != nil {
		return err
	}
	for i, p := range refIn {
		want := -1
		if p != mpi.ProcNull {
			want = p*10 + (i ^ 1) // the neighbour sent it in the opposite direction
		}
		if a2[i] != want {
			return fmt.Errorf("neighbor alltoall slot %d = %d want %d (coords %v dims %v)", i, a2[i], want, coords, dims)
		}
	}
	// Rows: keep dimension 1.
	row, err := cart.CartSub([]bool{false, true})
	if err != nil {
		return err
	}
	if row.Size() != dims[1] || row.Rank() != y {
		return fmt.Errorf("CartSub row size %d rank %d", row.Size(), row.Rank())
	}
	s := []int{0}
	if err := mpi.Allreduce(row, []int{me}, s, mpi.Sum); err != nil {
		return err
	}
	want := 0
	for j := 0; j < dims[1]; j++ {
		want += x*dims[1] + j
	}
	if s[0] != want {
		return fmt.Errorf("row sum %d want %d", s[0], want)
	}
	// A ring graph.
	index, edges := make([]int, n), []int{}
	for i := 0; i < n; i++ {
		edges = append(edges, (i-1+n)%n, (i+1)%n)
		index[i] = len(edges)
	}
	g, err := w.GraphCreate(index, edges, false)
	if err != nil {
		return err
	}
	nb, err := g.GraphNeighbors(me)
	if err != nil || len(nb) != 2 {
		return fmt.Errorf("graph neighbours %v %v", nb, err)
	}
	gr := []float64{-1, -1}
	if err := mpi.NeighborAllgather(g, []float64{float64(me)}, gr); err != nil {
		return err
	}
	if gr[0] != float64((me-1+n)%n) || gr[1] != float64((me+1)%n) {
		return fmt.Errorf("graph neighbor allgather %v", gr)
	}
	// A distributed graph: send to +1 and +3, receive from -1 and -3.
	dg, err := w.DistGraphCreateAdjacent([]int{(me - 1 + n) % n, ((me-3)%n + n) % n}, []int{(me + 1) % n, (me + 3) % n}, false)
	if err != nil {
		return err
	}
	dr := []int32{-1, -1}
	if err := mpi.NeighborAlltoall(dg, []int32{int32(me * 10), int32(me*10 + 1)}, dr); err != nil {
		return err
	}
	if dr[0] != int32(((me-1+n)%n)*10) || dr[1] != int32((((me-3)%n+n)%n)*10+1) {
		return fmt.Errorf("dist graph neighbor alltoall %v", dr)
	}
	for _, c := range []*mpi.Comm{row, cart, g, dg} {
		if err := c.Free(); err != nil {
			return err
		}
	}
	return nil
}

// checkIntercomm splits the world into evens and odds, joins them with an
// intercommunicator, exchanges point-to-point messages across it and merges
// it back (odds first, by high).
func checkIntercomm(w *mpi.Comm) error {
	n, me := w.Size(), w.Rank()
	if n < 2 {
		return nil
	}
	color := me % 2
	half, err := w.Split(color, me)
	if err != nil {
		return err
	}
	remoteLeader := 1 - color // world rank of the other group's rank 0
	ic, err := mpi.IntercommCreate(half, 0, w, remoteLeader, 99)
	if err != nil {
		return err
	}
	nEven, nOdd := (n+1)/2, n/2
	local, remote := nEven, nOdd
	if color == 1 {
		local, remote = nOdd, nEven
	}
	if !ic.IsInter() || ic.Size() != local || ic.RemoteSize() != remote || ic.Rank() != me/2 {
		return fmt.Errorf("intercomm size %d remote %d rank %d", ic.Size(), ic.RemoteSize(), ic.Rank())
	}
	rg, err := ic.RemoteGroup()
	if err != nil || rg.Size() != remote {
		return fmt.Errorf("remote group %v", err)
	}
	// Local rank i sends its world rank to remote rank i % remote; every
	// remote rank receives from each local rank mapping to it.
	dst := ic.Rank() % remote
	sq, err := mpi.Isend(ic, []int{me}, dst, 4)
	if err != nil {
		return err
	}
	expect := 0
	for i := 0; i < remote; i++ {
		if i%local == ic.Rank() {
			expect++
		}
	}
	for k := 0; k < expect; k++ {
		b := []int{-1}
		st, err := mpi.Recv(ic, b, mpi.AnySource, 4)
		if err != nil {
			return err
		}
		// Remote rank j is world rank 2j+(1-color).
		if b[0] != 2*st.Source+(1-color) || st.Source%local != ic.Rank() {
			return fmt.Errorf("intercomm recv %d from remote %d", b[0], st.Source)
		}
	}
	if _, err := sq.Wait(); err != nil {
		return err
	}
	if err := mpi.Barrier(ic); err != nil {
		return fmt.Errorf("barrier on an intercommunicator: %v", err)
	}
	if err := mpi.Scan(ic, []int{1}, []int{0}, mpi.Sum); !errors.Is(err, mpi.ErrComm) {
		return fmt.Errorf("scan on an intercommunicator: %v", err)
	}
	m, err := ic.IntercommMerge(color == 0) // evens high: odds first
	if err != nil {
		return err
	}
	wantRank := me / 2
	if color == 0 {
		wantRank += nOdd
	}
	if m.Size() != n || m.Rank() != wantRank || m.IsInter() {
		return fmt.Errorf("merged size %d rank %d want %d", m.Size(), m.Rank(), wantRank)
	}
	all := make([]int, n)
	if err := mpi.Allgather(m, []int{me}, all); err != nil {
		return err
	}
	for i := 0; i < n; i++ {
		want := 2*i + 1
		if i >= nOdd {
			want = 2 * (i - nOdd)
		}
		if all[i] != want {
			return fmt.Errorf("merged order %v", all)
		}
	}
	for _, c := range []*mpi.Comm{m, ic, half} {
		if err := c.Free(); err != nil {
			return err
		}
	}
	return nil
}

// checkThreads runs blocking collectives from several goroutines at once,
// each on its own duplicate of the world, alongside point-to-point traffic.
func checkThreads(w *mpi.Comm) error {
	n, me := w.Size(), w.Rank()
	const g = 4
	comms := make([]*mpi.Comm, g)
	for i := range comms {
		c, err := w.Dup()
		if err != nil {
			return err
		}
		comms[i] = c
	}
	errs := make([]error, g)
	var wg sync.WaitGroup
	for i := 0; i < g; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			c := comms[i]
			for it := 0; it < 20; it++ {
				m := 1 + (i*997+it*131)%3000
				send := make([]float64, m)
				for k := range send {
					send[k] = val(me+i, k)
				}
				got := make([]float64, m)
				if err := mpi.Allreduce(c, send, got, mpi.Sum); err != nil {
					errs[i] = err
					return
				}
				for k := range got {
					want := 0.0
					for r := 0; r < n; r++ {
						want += val(r+i, k)
					}
					if got[k] != want {
						errs[i] = fmt.Errorf("goroutine %d iteration %d: [%d] = %v want %v", i, it, k, got[k], want)
						return
					}
				}
				b := []int{it}
				if err := mpi.Bcast(c, b, it%n); err != nil || b[0] != it {
					errs[i] = fmt.Errorf("goroutine %d bcast %v %v", i, b, err)
					return
				}
				// Point-to-point on the same communicator.
				in := []int{-1}
				if _, err := mpi.Sendrecv(c, []int{me}, (me+1)%n, it, in, (me-1+n)%n, it); err != nil || in[0] != (me-1+n)%n {
					errs[i] = fmt.Errorf("goroutine %d sendrecv %v %v", i, in, err)
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
	for _, c := range comms {
		if err := c.Free(); err != nil {
			return err
		}
	}
	return nil
}

// checkAlltoallw: rank me sends rank j column j of its own row-major 4×n
// int32 matrix, as a strided vector type; the receiver takes the columns as
// contiguous int32 runs, one after another in rank order.
func checkAlltoallw(w *mpi.Comm) error {
	n, me := w.Size(), w.Rank()
	const rows = 4
	mat := make([]int32, rows*n)
	for r := 0; r < rows; r++ {
		for j := 0; j < n; j++ {
			mat[r*n+j] = int32(me*10000 + r*100 + j)
		}
	}
	col, err := datatype.Vector(rows, 1, n, datatype.Int32)
	if err != nil {
		return err
	}
	col, err = datatype.Resized(col, 0, 4)
	if err != nil {
		return err
	}
	if err := col.Commit(); err != nil {
		return err
	}
	send := unsafe.Slice((*byte)(unsafe.Pointer(&mat[0])), len(mat)*4)
	sc, sd, st := make([]int, n), make([]int, n), make([]*datatype.Type, n)
	rc, rd, rt := make([]int, n), make([]int, n), make([]*datatype.Type, n)
	total := 0
	for j := 0; j < n; j++ {
		sc[j], sd[j], st[j] = 1, 4*j, col
		rc[j], rd[j], rt[j] = rows, total*4, datatype.Int32
		total += rows
	}
	recv := make([]byte, total*4)
	if err := mpi.Alltoallw(w, send, sc, sd, st, recv, rc, rd, rt); err != nil {
		return err
	}
	got := unsafe.Slice((*int32)(unsafe.Pointer(&recv[0])), total)
	for i := 0; i < n; i++ {
		for r := 0; r < rows; r++ {
			if want := int32(i*10000 + r*100 + me); got[i*rows+r] != want {
				return fmt.Errorf("alltoallw: from rank %d row %d: got %d, want %d", i, r, got[i*rows+r], want)
			}
		}
	}
	return nil
}

// checkMismatch calls collectives with counts that differ between ranks
// (erroneous in MPI) at sizes for every path: a board line (5 elements), a
// board slot (1000) and the staged or memory-read large paths (> 1 MiB),
// on MPI_COMM_WORLD (netvm's board collectives) and on a duplicate (the
// message algorithms), shorter and longer than the root's. A rank whose
// buffer is too short must get ErrTruncate and the part that fits, a
// longer one ErrCount and the root's data, the root nil; nobody may hang,
// and a correct Allreduce afterwards must give the right answer.
func checkMismatch(w *mpi.Comm) error {
	n := w.Size()
	if n < 2 {
		return nil
	}
	d, err := w.Dup()
	if err != nil {
		return err
	}
	defer d.Free()
	counts := []int{5, 1000, 300000}
	if *short {
		counts = []int{5, 1000, 140000}
	}
	comms := []*mpi.Comm{w, d}
	for ci, c := range comms {
		for _, cnt := range counts {
			for _, root := range []int{0, n - 1} {
				for _, longer := range []bool{false, true} {
					what := fmt.Sprintf("comm %d Bcast of %d from root %d (longer %v)", ci, cnt, root, longer)
					if err := mismatchBcast(c, cnt, root, longer); err != nil {
						return fmt.Errorf("%s: %w", what, err)
					}
					if err := mismatchAfter(c, what); err != nil {
						return err
					}
				}
			}
		}
	}
	// The message algorithms (a duplicate's collectives): sizes on both
	// sides of Allreduce's 16 KiB threshold, and zero against some.
	for _, cnt := range []int{5, 1000, 1500, 2048, 100000} {
		for _, longer := range []bool{false, true} {
			what := fmt.Sprintf("message collectives of %d (longer %v)", cnt, longer)
			if err := mismatchMsg(d, cnt, longer); err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			if err := mismatchAfter(d, what); err != nil {
				return err
			}
		}
	}
	// Reductions and Alltoall with counts that disagree: on the boards
	// (netvm's MPI_COMM_WORLD with native collectives, on one host) every
	// rank sees every count.
	if mpi.DeviceName() != "netvm" || os.Getenv("ADIMPI_NATIVE_COLL") == "off" || os.Getenv("ADIMPI_PRETEND_HOSTS") != "" {
		return nil
	}
	if local, _, err := sameHost(w); err != nil || local != n {
		return err // boards are per host: across hosts a mismatch is the program's error, undetected
	}
	for _, cnt := range []int{5, 1000, 2000, 300000} {
		for _, longer := range []bool{false, true} {
			what := fmt.Sprintf("reductions of %d (longer %v)", cnt, longer)
			if err := mismatchReduce(w, cnt, longer); err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			if err := mismatchAfter(w, what); err != nil {
				return err
			}
		}
	}
	return nil
}

// mismatchCount is rank me's count when odd ranks (relative to root) pass
// half, or with longer twice, the others' cnt.
func mismatchCount(me, root, n, cnt int, longer bool) int {
	if (me-root+n)%n%2 == 0 {
		return cnt
	}
	if longer {
		return 2 * cnt
	}
	return cnt / 2
}

// wantMismatch checks err of a rank that passed mine bytes where peers
// passed other: ErrTruncate when other is more, ErrCount when less.
func wantMismatch(err error, mine, other int) error {
	switch {
	case other > mine && !errors.Is(err, mpi.ErrTruncate):
		return fmt.Errorf("a peer passes %d, this rank %d: got %v, want ErrTruncate", other, mine, err)
	case other < mine && !errors.Is(err, mpi.ErrCount):
		return fmt.Errorf("a peer passes %d, this rank %d: got %v, want ErrCount", other, mine, err)
	case other == mine && err != nil:
		return fmt.Errorf("counts agree (%d): %v", mine, err)
	}
	return nil
}

func mismatchBcast(c *mpi.Comm, cnt, root int, longer bool) error {
	n, me := c.Size(), c.Rank()
	buf := make([]float64, mismatchCount(me, root, n, cnt, longer))
	for i := range buf {
		buf[i] = -1
		if me == root {
			buf[i] = val(root, i)
		}
	}
	err := mpi.Bcast(c, buf, root)
	if me == root {
		return err
	}
	if err := wantMismatch(err, len(buf), cnt); err != nil {
		return err
	}
	for i := range buf {
		want := -1.0
		if i < cnt {
			want = val(root, i)
		}
		if buf[i] != want {
			return fmt.Errorf("element %d of %d is %v, want %v", i, len(buf), buf[i], want)
		}
	}
	return nil
}

// mismatchReduce runs Allreduce, Reduce and Alltoall with odd ranks'
// counts off (board paths: every process that waits for every count sees
// the mismatch).
func mismatchReduce(c *mpi.Comm, cnt int, longer bool) error {
	n, me := c.Size(), c.Rank()
	mine := mismatchCount(me, 0, n, cnt, longer)
	other := mismatchCount(1-me%2, 0, n, cnt, longer) // the other parity's
	in, out := make([]float64, mine), make([]float64, mine)
	err := mpi.Allreduce(c, in, out, mpi.Sum)
	if err := wantMismatch(err, mine*8, other*8); err != nil {
		return fmt.Errorf("Allreduce: %w", err)
	}
	for _, root := range []int{0, n - 1} {
		err = mpi.Reduce(c, in, out, mpi.Sum, root)
		if me == root {
			if err := wantMismatch(err, mine*8, other*8); err != nil {
				return fmt.Errorf("Reduce at root %d: %w", root, err)
			}
		} else if err != nil && !errors.Is(err, mpi.ErrTruncate) && !errors.Is(err, mpi.ErrCount) {
			return fmt.Errorf("Reduce at root %d, rank %d: %w", root, me, err)
		}
	}
	bs := max(1, mine/n)
	obs := max(1, other/n)
	err = mpi.Alltoall(c, make([]float64, bs*n), make([]float64, bs*n))
	if err := wantMismatch(err, bs*n, obs*n); err != nil {
		return fmt.Errorf("Alltoall: %w", err)
	}
	return nil
}

// isMismatch says whether err is the error of a count mismatch.
func isMismatch(err error) bool {
	return errors.Is(err, mpi.ErrTruncate) || errors.Is(err, mpi.ErrCount)
}

// mismatchMsg runs the collectives of the message algorithms with odd
// ranks' counts half (or with longer twice) the even ranks' (zero when cnt
// is 5 and the count is halved twice, see below). A rank whose result
// depends on a peer whose count differs must fail with ErrTruncate or
// ErrCount (for the reductions: ErrTruncate when a peer passes more, as a
// truncated receive, ErrCount when one passes fewer), and a rank that
// returns nil must hold the right data; nobody may hang.
func mismatchMsg(c *mpi.Comm, cnt int, longer bool) error {
	n, me := c.Size(), c.Rank()
	mine := mismatchCount(me, 0, n, cnt, longer)
	other := mismatchCount(1-me%2, 0, n, cnt, longer)
	if cnt == 5 && !longer {
		// Zero against five: a rank with nothing to send must still take
		// part, or its peers wait for it.
		if mine != cnt {
			mine = 0
		} else {
			other = 0
		}
	}
	in := make([]float64, mine)
	for i := range in {
		in[i] = val(me, i)
	}
	out := make([]float64, mine)
	if err := wantMismatch(mpi.Allreduce(c, in, out, mpi.Sum), mine*8, other*8); err != nil {
		return fmt.Errorf("Allreduce: %w", err)
	}
	req, err := mpi.Iallreduce(c, in, out, mpi.Max)
	if err == nil {
		_, err = req.Wait()
	}
	if err := wantMismatch(err, mine*8, other*8); err != nil {
		return fmt.Errorf("Iallreduce: %w", err)
	}
	// A persistent Allreduce, started twice: a mismatch in one run leaves
	// the next one to run (and fail) alike.
	preq, err := mpi.AllreduceInit(c, in, out, mpi.Sum)
	if err != nil {
		return fmt.Errorf("AllreduceInit: %w", err)
	}
	for run := 0; run < 2; run++ {
		err := preq.Start()
		if err == nil {
			_, err = preq.Wait()
		}
		if err := wantMismatch(err, mine*8, other*8); err != nil {
			return fmt.Errorf("persistent Allreduce, run %d: %w", run, err)
		}
	}
	for _, root := range []int{0, n - 1} {
		err := mpi.Reduce(c, in, out, mpi.Sum, root)
		if me == root {
			if err := wantMismatch(err, mine*8, other*8); err != nil {
				return fmt.Errorf("Reduce at root %d: %w", root, err)
			}
		} else if err != nil && !isMismatch(err) {
			return fmt.Errorf("Reduce at root %d, rank %d: %w", root, me, err)
		}
	}
	// A prefix reduction's result on rank r depends on ranks 0..r: from
	// rank 1 on, both counts are among them.
	err = mpi.Scan(c, in, out, mpi.Sum)
	if me > 0 {
		if err := wantMismatch(err, mine*8, other*8); err != nil {
			return fmt.Errorf("Scan: %w", err)
		}
	} else if err != nil && !isMismatch(err) {
		return fmt.Errorf("Scan: %w", err)
	}
	err = mpi.Exscan(c, in, out, mpi.Sum)
	if me > 0 {
		if err := wantMismatch(err, mine*8, other*8); err != nil {
			return fmt.Errorf("Exscan: %w", err)
		}
	} else if err != nil && !isMismatch(err) {
		return fmt.Errorf("Exscan: %w", err)
	}
	// The data collectives: blocks of mine elements (a tenth of the large
	// count), whose totals straddle the sizes at which Allgather once
	// changed algorithm (80 KiB at np 3, 512 KiB at np 8).
	blocks := func(k int) int {
		if cnt > 2048 {
			return k / 10
		}
		return k
	}
	bs, obs := blocks(mine), blocks(other)
	blk := make([]float64, bs)
	for i := range blk {
		blk[i] = val(me, i)
	}
	all := make([]float64, n*bs)
	if err := mpi.Allgather(c, blk, all); !isMismatch(err) {
		return fmt.Errorf("Allgather with blocks of %d and %d: got %v, want a count mismatch", bs, obs, err)
	}
	if err := mpi.Alltoall(c, all, make([]float64, n*bs)); !isMismatch(err) {
		return fmt.Errorf("Alltoall with blocks of %d and %d: got %v, want a count mismatch", bs, obs, err)
	}
	if err := mpi.ReduceScatterBlock(c, all, make([]float64, bs), mpi.Sum); !isMismatch(err) {
		return fmt.Errorf("ReduceScatterBlock with blocks of %d and %d: got %v, want a count mismatch", bs, obs, err)
	}
	if bs > 0 && obs > 0 {
		// The v forms, with every rank's counts its own block size: a
		// peer of the other parity sends another (a count of zero would
		// make the ranks skip messages their peers send or wait for).
		counts, displs := make([]int, n), make([]int, n)
		for i := range counts {
			counts[i], displs[i] = bs, i*bs
		}
		if err := mpi.Allgatherv(c, blk, all, counts, displs); !isMismatch(err) {
			return fmt.Errorf("Allgatherv with blocks of %d and %d: got %v, want a count mismatch", bs, obs, err)
		}
		if err := mpi.Alltoallv(c, all, counts, displs, make([]float64, n*bs), counts, displs); !isMismatch(err) {
			return fmt.Errorf("Alltoallv with blocks of %d and %d: got %v, want a count mismatch", bs, obs, err)
		}
	}
	for _, root := range []int{0, n - 1} {
		rootBs := blocks(mismatchCount(root, 0, n, cnt, longer))
		if cnt == 5 && !longer && rootBs != cnt {
			rootBs = 0
		}
		err := mpi.Gather(c, blk, all, root)
		if me == root && !isMismatch(err) {
			return fmt.Errorf("Gather at root %d with blocks of %d and %d: got %v, want a count mismatch", root, bs, obs, err)
		}
		if me != root && err != nil && !isMismatch(err) {
			return fmt.Errorf("Gather at root %d: %w", root, err)
		}
		src := make([]float64, n*bs)
		for i := range src {
			src[i] = val(root, i)
		}
		got := make([]float64, bs)
		err = mpi.Scatter(c, src, got, root)
		switch {
		case bs != rootBs && bs > 0 && !isMismatch(err):
			// (A rank of no elements may not see a mismatch upstream:
			// the empty messages that tell it are what it expects; it
			// gets no data, so none wrong.)
			return fmt.Errorf("Scatter from root %d of blocks of %d into %d: got %v, want a count mismatch", root, rootBs, bs, err)
		case err != nil && !isMismatch(err):
			return fmt.Errorf("Scatter from root %d: %w", root, err)
		case err == nil:
			for i := range got {
				if want := val(root, me*bs+i); got[i] != want {
					return fmt.Errorf("Scatter from root %d: element %d is %v, want %v, and no error", root, i, got[i], want)
				}
			}
		}
	}
	return nil
}

// mismatchAfter checks that c still works after a mismatched collective.
func mismatchAfter(c *mpi.Comm, what string) error {
	one, sum := []int64{1}, []int64{0}
	if err := mpi.Allreduce(c, one, sum, mpi.Sum); err != nil {
		return fmt.Errorf("Allreduce after %s: %w", what, err)
	}
	if sum[0] != int64(c.Size()) {
		return fmt.Errorf("Allreduce after %s gives %d, want %d", what, sum[0], c.Size())
	}
	return nil
}

// subcommChecks are the checks checkSubcomms runs on each communicator.
var subcommChecks = []runner.NamedFunc{
	{Name: "barrier", Fn: checkBarrier},
	{Name: "bcast", Fn: checkBcast},
	{Name: "reduce", Fn: checkReduce},
	{Name: "allreduce", Fn: checkAllreduce},
	{Name: "alltoall", Fn: checkAlltoall},
	{Name: "gather", Fn: checkGather},
	{Name: "allgather", Fn: checkAllgather},
	{Name: "scan", Fn: checkScan},
	{Name: "noncommutative", Fn: checkNonCommutative},
	{Name: "inplace", Fn: checkInPlace},
	{Name: "nbc", Fn: checkNBC},
	{Name: "mismatch", Fn: checkMismatch},
}

// checkSubcomms runs the collectives checks (subcommChecks) on
// communicators other than MPI_COMM_WORLD: a Dup, the halves of a Split
// with the ranks reversed, the SplitTypeShared communicator, a Create of
// the odd ranks, and an Idup, whose first collective is non-blocking.
// Where a communicator's ranks share a host each gets a board of its own at
// its first blocking collective, on every device, and its non-blocking and
// persistent collectives use it from then on; across (pretend) hosts the
// ones within a host do.
func checkSubcomms(w *mpi.Comm) error {
	n, me := w.Size(), w.Rank()
	subs := []struct {
		name string
		make func() (*mpi.Comm, error)
	}{
		{"dup", w.Dup},
		{"split", func() (*mpi.Comm, error) { return w.Split(me%2, -me) }},
		{"splittype", func() (*mpi.Comm, error) { return w.SplitType(mpi.SplitTypeShared, me) }},
		{"create", func() (*mpi.Comm, error) {
			g, err := w.Group()
			if err != nil || n < 2 {
				return nil, err
			}
			odd, err := g.RangeIncl([][3]int{{1, n - 1, 2}})
			if err != nil {
				return nil, err
			}
			return w.Create(odd)
		}},
		{"idup", func() (*mpi.Comm, error) {
			c, q, err := w.Idup()
			if err != nil {
				return nil, err
			}
			_, err = q.Wait()
			return c, err
		}},
	}
	for _, s := range subs {
		c, err := s.make()
		if err != nil {
			return fmt.Errorf("%s: %v", s.name, err)
		}
		if c == nil {
			continue // not a member (Create's even ranks)
		}
		for _, f := range subcommChecks {
			if err := f.Fn(c); err != nil {
				return fmt.Errorf("%s (size %d, rank %d): %s: %w", s.name, c.Size(), c.Rank(), f.Name, err)
			}
		}
		// Free with a non-blocking collective still running on the
		// board: it completes normally.
		in, out := []int64{int64(c.Rank() + 1)}, []int64{0}
		q, err := mpi.Iallreduce(c, in, out, mpi.Sum)
		if err != nil {
			return fmt.Errorf("%s: iallreduce before free: %v", s.name, err)
		}
		if err := c.Free(); err != nil {
			return fmt.Errorf("%s: free: %v", s.name, err)
		}
		if _, err := q.Wait(); err != nil {
			return fmt.Errorf("%s: iallreduce across free: %v", s.name, err)
		}
		if m := int64(c.Size()); out[0] != m*(m+1)/2 {
			return fmt.Errorf("%s: iallreduce across free gave %d, want %d", s.name, out[0], m*(m+1)/2)
		}
	}
	return nil
}
