// Command nvstate tells which state this project's 2-vCPU machine is in
// (the vCPUs move between host cores, and the cost of handing a cache line
// from one to the other changes several-fold) so that benchmark rounds can
// be tagged with it. It pins two threads to CPUs 0 and 1 and measures the
// one-way latency of a cache line bounced between them, and a pipeline
// like netvm's eager-ring stream: one thread packs 1 KiB blocks (stride 2
// KiB) into a 1 MiB ring in 256 KiB chunks, the other unpacks them into a
// strided buffer. With -modes it also runs the pipeline with the sender's
// non-temporal stores (nt), with the receiver flushing the lines it has
// read (flush), and with the sender prefetching the chunk's lines for
// ownership, all at once (pfw) or 4-8 KiB ahead (pfwd), and with the receiver reading with the non-temporal
// prefetch hint (nta).
//
// It prints one line: state=fast|slow (slow: one-way latency over slowPP),
// then pp=one-way ns, and per mode pack=GB/s of the sender's packing and
// pipe=GB/s of the whole pipeline (medians of -reps runs). Pack rates vary
// within a state too, and the state can flip within a second, so tag a
// benchmark run with probes before and after it (docs/performance.md has
// the figures of both states).
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/adimpi/adimpi/devices/netvm/internal/nt"
)

const (
	block   = 1024
	ringSz  = 1 << 20
	chunkSz = 256 << 10
	msg     = 1 << 20
)

// slowPP is the one-way cache-line latency (ns) over which the state counts
// as slow: it lies between the two states' latencies (docs/performance.md).
const slowPP = 100

func pin(cpu int) {
	runtime.LockOSThread()
	var set unix.CPUSet
	set.Set(cpu)
	_ = unix.SchedSetaffinity(0, &set)
}

type line struct {
	v atomic.Int64
	_ [56]byte
}

// pingPong returns the one-way latency of a cache line between CPUs 0 and 1, ns.
func pingPong(iters int) float64 {
	var f line
	var wg sync.WaitGroup
	wg.Add(2)
	var t time.Duration
	go func() {
		defer wg.Done()
		pin(1)
		for i := int64(0); i < int64(iters); i++ {
			for f.v.Load() != 2*i+1 {
			}
			f.v.Store(2*i + 2)
		}
	}()
	go func() {
		defer wg.Done()
		pin(0)
		t0 := time.Now()
		for i := int64(0); i < int64(iters); i++ {
			f.v.Store(2*i + 1)
			for f.v.Load() != 2*i+2 {
			}
		}
		t = time.Since(t0)
	}()
	wg.Wait()
	return float64(t.Nanoseconds()) / float64(iters) / 2
}

// pipe runs msgs messages of 1 MiB of 1 KiB blocks through the ring in the
// given mode and returns the pack rate and the pipeline's rate, GB/s.
func pipe(mode string, msgs int) (pack, rate float64) {
	src := make([]byte, 2*msg)
	dst := make([]byte, 2*msg)
	ring := make([]byte, ringSz+64)
	for i := range src {
		src[i] = byte(i)
	}
	ring = ring[64-int(unsafeAddr(ring)&63):][:ringSz]
	var tail, head line
	var wg sync.WaitGroup
	wg.Add(2)
	total := int64(msgs) * msg
	var packT time.Duration
	var all time.Duration
	go func() { // sender
		defer wg.Done()
		pin(0)
		t0 := time.Now()
		for pos := int64(0); pos < total; pos += chunkSz {
			for pos+chunkSz-head.v.Load() > ringSz {
			}
			r := ring[pos%ringSz:][:chunkSz]
			p0 := time.Now()
			if mode == "pfw" {
				prefetchW(r)
			}
			off := int(pos % msg)
			for k := 0; k < chunkSz; k += block {
				b := (off + k) / block
				s := src[2*b*block:][:block]
				if mode == "pfwd" && k+8*block <= chunkSz {
					prefetchW(r[k+4*block : k+8*block])
				}
				if mode == "nt" {
					nt.Copy(r[k:k+block], s)
				} else {
					copy(r[k:k+block], s)
				}
			}
			if mode == "nt" {
				nt.Fence()
			}
			packT += time.Since(p0)
			tail.v.Store(pos + chunkSz)
		}
		for head.v.Load() != total {
		}
		all = time.Since(t0)
	}()
	go func() { // receiver
		defer wg.Done()
		pin(1)
		for pos := int64(0); pos < total; pos += chunkSz {
			for tail.v.Load() <= pos {
			}
			r := ring[pos%ringSz:][:chunkSz]
			off := int(pos % msg)
			for k := 0; k < chunkSz; k += block {
				b := (off + k) / block
				if mode == "nta" && k+2*block <= chunkSz {
					prefetchNTA(r[k+block : k+2*block])
				}
				copy(dst[2*b*block:][:block], r[k:k+block])
			}
			if mode == "flush" {
				flush(r)
				nt.Fence()
			}
			head.v.Store(pos + chunkSz)
		}
	}()
	wg.Wait()
	return float64(total) / float64(packT.Nanoseconds()), float64(total) / float64(all.Nanoseconds())
}

func median(x []float64) float64 {
	slices.Sort(x)
	return x[len(x)/2]
}

func main() {
	modes := flag.String("modes", "", "also run the pipeline in these modes (comma list of nt, flush, pfw, pfwd, nta)")
	reps := flag.Int("reps", 5, "repetitions; medians are printed")
	msgs := flag.Int("msgs", 16, "1 MiB messages per pipeline repetition")
	flag.Parse()
	if runtime.NumCPU() < 2 {
		fmt.Fprintln(os.Stderr, "nvstate: needs 2 CPUs")
		os.Exit(2)
	}
	runtime.GOMAXPROCS(max(runtime.GOMAXPROCS(0), 3))
	list := []string{"plain"}
	if *modes != "" {
		list = append(list, strings.Split(*modes, ",")...)
	}
	pp := make([]float64, *reps)
	packs := map[string][]float64{}
	rates := map[string][]float64{}
	pipe("plain", 2) // warm up: fault the pages in
	for r := 0; r < *reps; r++ {
		pp[r] = pingPong(20000)
		for _, m := range list {
			p, q := pipe(m, *msgs)
			packs[m] = append(packs[m], p)
			rates[m] = append(rates[m], q)
		}
	}
	state := "fast"
	if median(slices.Clone(pp)) > slowPP {
		state = "slow"
	}
	fmt.Printf("state=%s pp=%.0fns", state, median(pp))
	for _, m := range list {
		fmt.Printf(" %s:pack=%.1f,pipe=%.1f", m, median(packs[m]), median(rates[m]))
	}
	fmt.Println()
}

func unsafeAddr(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }
