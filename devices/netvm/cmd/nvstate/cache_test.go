package main

import "testing"

// TestFlushPrefetch checks that the cache-control routines leave the data
// alone at every alignment of the start, whether or not the CPU has them.
func TestFlushPrefetch(t *testing.T) {
	b := make([]byte, 4096)
	for i := range b {
		b[i] = byte(i)
	}
	for _, off := range []int{0, 1, 63, 100} {
		flush(b[off : off+1000])
		prefetchW(b[off : off+1000])
		prefetchNTA(b[off : off+1000])
	}
	for i := range b {
		if b[i] != byte(i) {
			t.Fatalf("byte %d changed", i)
		}
	}
	t.Logf("hasFlush %v hasPrefetchW %v hasPrefetchNTA %v", hasFlush, hasPrefetchW, hasPrefetchNTA)
}
