package mpi

import (
	"sync"
	"testing"
	"time"
)

// devLock excludes: goroutines that take it at once, some holding it long
// enough that the others reach its yielding and sleeping waits, never
// overlap, and every increment made under it survives.
func TestDevLockExcludes(t *testing.T) {
	var l devLock
	const workers, rounds = 8, 2000
	var inside, count int
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < rounds; i++ {
				l.Lock()
				inside++
				if inside != 1 {
					t.Errorf("%d goroutines hold the lock", inside)
				}
				if i%500 == 0 {
					time.Sleep(200 * time.Microsecond) // a long hold: waiters yield and sleep
				}
				count++
				inside--
				l.Unlock()
			}
		}()
	}
	wg.Wait()
	if count != workers*rounds {
		t.Fatalf("count %d, want %d", count, workers*rounds)
	}
}

// A goroutine may release the lock that another took, as with sync.Mutex
// (a waiter woken by the holder's Unlock on another goroutine).
func TestDevLockHandOver(t *testing.T) {
	var l devLock
	l.Lock()
	got := make(chan struct{})
	go func() {
		l.Lock()
		close(got)
		l.Unlock()
	}()
	select {
	case <-got:
		t.Fatal("a second Lock returned while the lock was held")
	case <-time.After(20 * time.Millisecond):
	}
	done := make(chan struct{})
	go func() { l.Unlock(); close(done) }()
	<-done
	select {
	case <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter did not get the lock within 10 s of its release")
	}
}
