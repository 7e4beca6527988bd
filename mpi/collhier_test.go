package mpi

import (
	"slices"
	"testing"
)

// TestPretendHosts: each form of ADIMPI_PRETEND_HOSTS places the ranks as
// documented, and a malformed one is an error.
func TestPretendHosts(t *testing.T) {
	for _, c := range []struct {
		spec string
		size int
		want []int
	}{
		{"block:3", 6, []int{0, 0, 1, 1, 2, 2}},
		{"block:3", 7, []int{0, 0, 0, 1, 1, 2, 2}},
		{"block:4", 3, []int{0, 1, 2}},
		{"rr:3", 7, []int{0, 1, 2, 0, 1, 2, 0}},
		{"map:5,5,1", 7, []int{5, 5, 1, 5, 5, 1, 5}},
	} {
		got, err := pretendHosts(c.spec, c.size)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("pretendHosts(%q, %d) = %v, %v; want %v", c.spec, c.size, got, err, c.want)
		}
	}
	for _, spec := range []string{"3", "block:0", "rr:x", "map:", "map:1,-1", "ring:2"} {
		if got, err := pretendHosts(spec, 4); err == nil {
			t.Errorf("pretendHosts(%q) = %v, want an error", spec, got)
		}
	}
}

// TestSetPlace: the pretend placement refines the real one (ranks on
// different real hosts stay apart) and numbers hosts by their lowest rank;
// spread says whether the ranks lie on more than one host.
func TestSetPlace(t *testing.T) {
	r := &runtime{size: 6, hosts: []int{0, 0, 0, 1, 1, 1}}
	if err := r.setPlace("map:7,3"); err != nil {
		t.Fatal(err)
	}
	if want := []int{0, 1, 0, 2, 3, 2}; !slices.Equal(r.place, want) || !r.spread {
		t.Fatalf("place %v spread %v, want %v true", r.place, r.spread, want)
	}
	r = &runtime{size: 3, hosts: []int{0, 0, 0}}
	if err := r.setPlace(""); err != nil || r.spread || !slices.Equal(r.place, r.hosts) {
		t.Fatalf("one real host, no knob: place %v spread %v err %v", r.place, r.spread, err)
	}
	if err := r.setPlace("block:2"); err == nil && !r.spread {
		t.Fatalf("block:2 on 3 ranks: place %v, not spread", r.place)
	}
	if err := r.setPlace("bad"); err == nil {
		t.Fatal("a malformed knob was accepted")
	}
}

// TestNewHierarchy: node groups, leaders and contiguity for a block, a
// round-robin and an uneven placement, a communicator on one host, one
// rank per host, and an intercommunicator.
func TestNewHierarchy(t *testing.T) {
	place := []int{0, 0, 1, 1, 1, 2, 0} // world rank -> host
	h := newHierarchy(place, []int{0, 1, 2, 3, 4, 5}, nil, false)
	if !h.tiered() || !h.contiguous || !slices.Equal(h.leaders, []int{0, 2, 5}) ||
		!slices.Equal(h.nodes[1], []int{2, 3, 4}) || h.hostOf[4] != 1 || h.nodeRank[4] != 2 {
		t.Fatalf("block: %+v", h)
	}
	// Communicator ranks 0..4 are world ranks 6, 2, 0, 3, 5: hosts 0, 1, 0, 1, 2.
	h = newHierarchy(place, []int{6, 2, 0, 3, 5}, nil, false)
	if !h.tiered() || h.contiguous || !slices.Equal(h.leaders, []int{6, 2, 5}) ||
		!slices.Equal(h.nodes[0], []int{0, 2}) || !slices.Equal(h.nodeWorld[0], []int{6, 0}) || h.nodeRank[2] != 1 {
		t.Fatalf("interleaved: %+v", h)
	}
	if h := newHierarchy(place, []int{2, 3, 4}, nil, false); h.crosses() || h.tiered() {
		t.Fatalf("one host: %+v", h)
	}
	if h := newHierarchy(place, []int{0, 2, 5}, nil, false); !h.crosses() || h.tiered() {
		t.Fatalf("one rank per host: %+v", h)
	}
	if h := newHierarchy(place, []int{2, 3}, []int{0, 1}, true); !h.crosses() || h.tiered() {
		t.Fatalf("intercommunicator across hosts: %+v", h)
	}
	if h := newHierarchy(place, []int{2, 3}, []int{4}, true); h.crosses() {
		t.Fatalf("intercommunicator on one host: %+v", h)
	}
}
