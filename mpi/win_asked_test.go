package mpi

import "testing"

// winView is rank's view of a two-rank window of flavor: whether it maps
// the peer's control block (ctl: the peer is on this host), reaches the
// peer's memory with the device's remote memory access (remote: netvm's
// process_vm_*, via's RDMA) and maps the peer's memory (mapped: an
// allocated window).
func winView(rank int, flavor WinFlavor, ctl, remote, mapped bool) *Win {
	w := &Win{comm: &Comm{rank: rank, world: []int{0, 1}}, flavor: flavor,
		direct: make([][]byte, 2), remote: make([]bool, 2), ctls: make([]*winCtl, 2)}
	w.direct[rank] = make([]byte, 8)
	w.ctls[rank] = &winCtl{}
	peer := 1 - rank
	if ctl {
		w.ctls[peer] = &winCtl{}
	}
	w.remote[peer] = remote
	if mapped {
		w.direct[peer] = make([]byte, 8)
	}
	return w
}

// TestWinAsked checks which windows count as asking their ranks' agents
// (Win.asked, which keeps a board wait polling instead of sleeping): only
// those some origin reaches through the target's agent. A netvm WinCreate
// window on one host is reached natively by every origin (process_vm_*
// under the lock words of the target's control block), so a Barrier loop
// of a program holding one spun instead of sleeping while it was open.
func TestWinAsked(t *testing.T) {
	for _, c := range []struct {
		name                string
		flavor              WinFlavor
		ctl, remote, mapped bool
		asked               bool
	}{
		{"netvm WinCreate, one host", FlavorCreate, true, true, false, false},
		{"WinAllocate, one host", FlavorAllocate, true, false, true, false},
		{"fm WinCreate, one host (no remote memory access)", FlavorCreate, true, false, false, true},
		{"via WinCreate across hosts (RDMA, no control block)", FlavorCreate, false, true, false, true},
		{"dynamic window", FlavorDynamic, true, false, false, true},
	} {
		// What mapSegments's allreduce (minimum) gives each rank.
		v0 := winView(0, c.flavor, c.ctl, c.remote, c.mapped).nativeTargets()
		v1 := winView(1, c.flavor, c.ctl, c.remote, c.mapped).nativeTargets()
		for r := range 2 {
			if asked := min(v0[r], v1[r]) == 0; asked != c.asked {
				t.Errorf("%s: rank %d's agent asked = %v, want %v", c.name, r, asked, c.asked)
			}
		}
	}
	// One origin that cannot reach the target natively is enough.
	v0 := winView(0, FlavorCreate, true, true, false).nativeTargets()
	v1 := winView(1, FlavorCreate, true, false, false).nativeTargets()
	if min(v0[0], v1[0]) != 0 {
		t.Errorf("rank 0's agent is not asked although rank 1 reaches it only through the agent")
	}
	if min(v0[1], v1[1]) != 1 {
		t.Errorf("rank 1's agent is asked although rank 0 reaches it natively")
	}
}
