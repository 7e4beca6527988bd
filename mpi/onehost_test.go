package mpi

import (
	"strings"
	"testing"

	"github.com/adimpi/adimpi/adi"
)

// sharedOnly is a device that reaches its own host only (no adi.CrossHost).
type sharedOnly struct{ adi.Device }

// crossing is one that reaches other hosts.
type crossing struct{ adi.Device }

func (crossing) CrossHost() bool { return true }

// TestOneHost: a job spanning hosts is refused on a device without
// adi.CrossHost, with both hosts named, and accepted on one with it.
func TestOneHost(t *testing.T) {
	r := &runtime{rank: 0, devName: "shm", hosts: []int{0, 1}, hostNames: []string{"h1", "h2"}}
	err := r.oneHost(sharedOnly{})
	if err == nil || !strings.Contains(err.Error(), "rank 0 runs on host h1, rank 1 on host h2") {
		t.Fatalf("oneHost on a shared-memory-only device: %v", err)
	}
	if err := r.oneHost(crossing{}); err != nil {
		t.Fatalf("oneHost on a device that crosses hosts: %v", err)
	}
	r.hosts = []int{0, 0}
	if err := r.oneHost(sharedOnly{}); err != nil {
		t.Fatalf("oneHost on one host: %v", err)
	}
}
