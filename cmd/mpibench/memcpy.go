package main

import (
	"math"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// memcpyBench is the machine's floor, measured in one process: copy()
// bandwidth with one reused source and destination (as the MPI bandwidth test
// reuses its buffers), copy() bandwidth over buffers far larger than the last
// level cache, and the one-way latency of a cache line bounced between two
// threads.
func memcpyBench(cfg *config) []row {
	var rows []row
	for _, n := range sizes(cfg, false) {
		rows = append(rows, row{"memcpy", "go", 1, n, copyHot(cfg, n), "MB/s"})
	}
	arena := 4 * lastLevelCache()
	for _, n := range sizes(cfg, false) {
		rows = append(rows, row{"memcpy_cold", "go", 1, n, copyCold(cfg, n, arena), "MB/s"})
	}
	if runtime.NumCPU() >= 2 {
		rows = append(rows, row{"cacheline", "go", 2, 64, cacheLine(cfg), "us"})
	}
	return rows
}

// timeBest runs f(iters) cfg.reps times after a warm-up that picks iters,
// and returns iters and the best time in seconds.
func timeBest(cfg *config, warm int, f func(iters int)) (int, float64) {
	f(1)
	t0 := time.Now()
	f(warm)
	iters := autoIters(cfg, time.Since(t0).Seconds()/float64(warm))
	best := math.Inf(1)
	for r := 0; r < cfg.reps; r++ {
		t0 := time.Now()
		f(iters)
		best = min(best, time.Since(t0).Seconds())
	}
	return iters, best
}

// copyHot copies between the same two n-byte buffers; MB/s.
func copyHot(cfg *config, n int) float64 {
	src, dst := make([]byte, n), make([]byte, n)
	fill(src, n)
	iters, best := timeBest(cfg, warmCopies(n), func(iters int) {
		for i := 0; i < iters; i++ {
			copy(dst, src)
		}
	})
	return float64(n) * float64(iters) / best / 1e6
}

// copyCold copies n bytes at a time between two arenas of the given size,
// moving on through them so that every copy misses the cache; MB/s.
func copyCold(cfg *config, n, arena int) float64 {
	stride := (n + 63) &^ 63
	arena = max(arena, 2*stride)
	slots := arena / stride
	src, dst := make([]byte, slots*stride), make([]byte, slots*stride)
	fill(src, n)
	fill(dst, n) // fault the pages in
	slot := 0
	iters, best := timeBest(cfg, warmCopies(n), func(iters int) {
		for i := 0; i < iters; i++ {
			off := slot * stride
			copy(dst[off:off+n], src[off:off+n])
			if slot++; slot == slots {
				slot = 0
			}
		}
	})
	return float64(n) * float64(iters) / best / 1e6
}

// warmCopies is the number of untimed copies that estimate a copy's time.
func warmCopies(n int) int {
	return max(2, min(10000, (64<<20)/n))
}

// lastLevelCache is the size of the largest CPU cache in bytes (32 MiB if
// sysfs does not say).
func lastLevelCache() int {
	best := 0
	for i := 0; i < 8; i++ {
		b, err := os.ReadFile("/sys/devices/system/cpu/cpu0/cache/index" + strconv.Itoa(i) + "/size")
		if err != nil {
			continue
		}
		s := strings.TrimSpace(string(b))
		mult := 1
		switch {
		case strings.HasSuffix(s, "K"):
			mult, s = 1<<10, strings.TrimSuffix(s, "K")
		case strings.HasSuffix(s, "M"):
			mult, s = 1<<20, strings.TrimSuffix(s, "M")
		}
		if v, err := strconv.Atoi(s); err == nil {
			best = max(best, v*mult)
		}
	}
	if best == 0 {
		best = 32 << 20
	}
	return best
}

// paddedFlag is an atomic word alone on its cache line.
type paddedFlag struct {
	_ [64]byte
	v atomic.Int64
	_ [56]byte
}

// cacheLine bounces one cache line between two goroutines locked to OS
// threads on different CPUs: each waits, spinning, for the other's store.
// It returns the one-way latency in µs, the floor under any shared-memory
// message.
func cacheLine(cfg *config) float64 {
	var flag paddedFlag
	run := func(iters int) {
		flag.v.Store(0)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			pinThread(1)
			for i := int64(0); i < int64(iters); i++ {
				for flag.v.Load() != 2*i+1 {
				}
				flag.v.Store(2*i + 2)
			}
		}()
		done := make(chan struct{})
		go func() {
			defer close(done)
			pinThread(0)
			for i := int64(0); i < int64(iters); i++ {
				flag.v.Store(2*i + 1)
				for flag.v.Load() != 2*i+2 {
				}
			}
		}()
		<-done
		wg.Wait()
	}
	iters, best := timeBest(cfg, 10000, run)
	return best / float64(iters) / 2 * 1e6
}

// pinThread locks the calling goroutine to its OS thread and binds the thread
// to one CPU where allowed. The thread is never unlocked, so it ends with the
// goroutine rather than returning to the scheduler pinned.
func pinThread(cpu int) {
	runtime.LockOSThread()
	var set unix.CPUSet
	set.Set(cpu)
	_ = unix.SchedSetaffinity(0, &set) // best effort: a sandbox may refuse
}
