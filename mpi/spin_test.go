package mpi

import (
	"testing"
	"time"
)

// TestAdaptSpin: a rank alone on its host whose waits end only after their
// sleep halves its spin down to spinMin, so that it stops holding a CPU
// its peer may need; waits that end within their spin double it back to
// the full spin; a wait that its free polls ended changes nothing; ranks
// sharing a host keep the fixed spin.
func TestAdaptSpin(t *testing.T) {
	r := &runtime{spin: time.Millisecond, poll: time.Millisecond, hosts: []int{0, 1}}
	r.spinNow.Store(int64(r.spin))
	r.adapt = r.aloneOnHost()
	if !r.adapt {
		t.Fatal("rank 0 of hosts [0 1] is alone on its host, aloneOnHost says not")
	}
	now := func() time.Duration { return time.Duration(r.spinNow.Load()) }
	for range 20 {
		r.adaptSpin(now(), true, true)
	}
	if now() != spinMin {
		t.Fatalf("after 20 waits that slept the spin is %v, want spinMin %v", now(), spinMin)
	}
	r.adaptSpin(now(), false, false)
	if now() != spinMin {
		t.Fatalf("a wait its free polls ended moved the spin to %v", now())
	}
	for range 20 {
		r.adaptSpin(now(), false, true)
	}
	if now() != r.spin {
		t.Fatalf("after 20 waits that ended within their spin it is %v, want the full %v", now(), r.spin)
	}

	shared := &runtime{spin: time.Millisecond, poll: time.Millisecond, hosts: []int{0, 0, 1}}
	shared.spinNow.Store(int64(shared.spin))
	shared.adapt = shared.aloneOnHost()
	shared.adaptSpin(shared.spin, true, true)
	if got := time.Duration(shared.spinNow.Load()); shared.adapt || got != shared.spin {
		t.Fatalf("rank 0 of hosts [0 0 1] adapts (%v) its spin to %v; want the fixed %v", shared.adapt, got, shared.spin)
	}
}
