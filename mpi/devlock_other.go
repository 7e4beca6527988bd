//go:build !amd64 || race

package mpi

import "sync"

// devLock is sync.Mutex where no release store is at hand (devlock.go):
// on other architectures and under the race detector, which does not see
// a store made in assembly.
type devLock struct{ sync.Mutex }
