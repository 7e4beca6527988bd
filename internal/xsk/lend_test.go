package xsk

import "testing"

// TestLenderAccounting checks the bookkeeping of lent runs: a run is free
// again only when it has been returned and the kernel has completed every
// descriptor of every transmission of it, in either order, and a run
// returned twice is not freed twice.
func TestLenderAccounting(t *testing.T) {
	var l lender
	const frame = 4096
	l.init(1<<20, 3, 4, frame)
	addr := func(r, piece int) uint64 { return l.base + uint64(r)*l.size + uint64(piece)*frame }
	var runs []int
	for range 4 {
		runs = append(runs, l.take())
	}
	if l.take() != -1 {
		t.Fatal("a fifth run lent out of four")
	}
	a, b := runs[0], runs[1]
	// a: sent twice (a retransmission), returned before the kernel is done.
	l.sent(a, 3)
	l.sent(a, 3)
	l.giveBack(a)
	l.giveBack(a) // twice: no effect
	for i := range 5 {
		l.completed(addr(a, i%3))
	}
	if len(l.free) != 0 {
		t.Fatalf("run %d free with one descriptor still in the kernel", a)
	}
	l.completed(addr(a, 2))
	if len(l.free) != 1 || int(l.free[0]) != a {
		t.Fatalf("free %v: want run %d back once completed and returned", l.free, a)
	}
	// b: completed before it is returned.
	l.sent(b, 2)
	l.completed(addr(b, 0))
	l.completed(addr(b, 1))
	if len(l.free) != 1 {
		t.Fatalf("run %d free while still lent", b)
	}
	l.giveBack(b)
	if len(l.free) != 2 {
		t.Fatalf("run %d not free once returned", b)
	}
	if r := l.take(); r != b {
		t.Fatalf("took run %d, want the last freed %d", r, b)
	}
}
