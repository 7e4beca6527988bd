package order

import (
	"fmt"
	"sync/atomic"
	"testing"
	"unsafe"
)

// A value published with StoreRelease32 carries what was written before
// it to a goroutine that loads the flag: the reader never sees the flag
// without the data.
func TestStoreReleasePublishes(t *testing.T) {
	const rounds = 20000
	var data [8]uint64
	var flag uint32
	done := make(chan error)
	go func() {
		for i := uint32(1); i <= rounds; i++ {
			for atomic.LoadUint32(&flag) != i {
			}
			for k := range data {
				if got := atomic.LoadUint64(&data[k]); got != uint64(i) {
					done <- fmt.Errorf("round %d: word %d is %d", i, k, got)
					return
				}
			}
			atomic.StoreUint32(&flag, i|1<<31) // the writer may go on
		}
		done <- nil
	}()
	for i := uint32(1); i <= rounds; i++ {
		for k := range data {
			atomic.StoreUint64(&data[k], uint64(i))
		}
		StoreRelease32(&flag, i)
		for atomic.LoadUint32(&flag) != i|1<<31 {
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// StoreRelease64 publishes as StoreRelease32 does.
func TestStoreRelease64Publishes(t *testing.T) {
	const rounds = 20000
	var data [8]uint64
	var flag uint64
	done := make(chan error)
	go func() {
		for i := uint64(1); i <= rounds; i++ {
			for atomic.LoadUint64(&flag) != i<<32 {
			}
			for k := range data {
				if got := atomic.LoadUint64(&data[k]); got != i {
					done <- fmt.Errorf("round %d: word %d is %d", i, k, got)
					return
				}
			}
			atomic.StoreUint64(&flag, i<<32|1) // the writer may go on
		}
		done <- nil
	}()
	for i := uint64(1); i <= rounds; i++ {
		for k := range data {
			atomic.StoreUint64(&data[k], i)
		}
		StoreRelease64(&flag, i<<32) // the high half: a 32-bit store would not make it
		for atomic.LoadUint64(&flag) != i<<32|1 {
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// StoreRelease32 writes the value, and PrefetchW leaves memory as it was.
func TestStoreAndPrefetch(t *testing.T) {
	buf := make([]uint32, 32)
	buf[5] = 7
	PrefetchW(unsafe.Pointer(&buf[16]))
	StoreRelease32(&buf[3], 42)
	for i, v := range buf {
		want := uint32(0)
		switch i {
		case 3:
			want = 42
		case 5:
			want = 7
		}
		if v != want {
			t.Fatalf("buf[%d] = %d, want %d", i, v, want)
		}
	}
}
