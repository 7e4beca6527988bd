package netvm

import (
	"time"

	"github.com/adimpi/adimpi/devices/netvm/internal/nt"
)

// A stream's chunks are packed by the sender into ring lines that the
// receiver read one ring earlier, so on this project's 2-vCPU machine every
// such line is still in the receiver core's cache when the sender stores
// into it, and each store waits for that copy to be invalidated. In the
// machine's fast state (devices/netvm/cmd/nvstate measures a one-way
// cache-line latency of 25-45 ns) that costs little, and plain stores keep
// the ring lines in cache for the receiver: nvstate's ring pipeline of 1 KiB
// blocks runs 15-27 GB/s, against 5-12 GB/s with non-temporal stores, whose
// lines the receiver then reads from memory. In the slow state (150-200 ns)
// the plain pack falls to 1-3 GB/s while non-temporal stores, which need no
// line from the other core, pack at 3-22 GB/s.
//
// So the sender times its plain packing (packer.pack): once ntSlowPacks
// chunks in a row (each timed over at least ntMeasure bytes) pack slower
// than the ntpack option's MB/s, the following chunks go with non-temporal stores
// (nt.Copy, SFENCE before the chunk's control message publishes it), and
// every ntRecheck the first ntMeasure bytes of a chunk are packed plainly
// again and timed, to return to plain stores when the machine is back in
// its fast state. The receiver is unchanged.
//
// VIRTUS, 1 MiB messages in windows of 64, strided (Vector, stride 2x
// block) GB/s, medians [ranges] of rounds taken only on an idle machine,
// alternating with the previous build (ntpack=0), each tagged by nvstate
// probes before and after it:
//
//	                 slow state                      fast state
//	block  ntpack=0          default          ntpack=0          default
//	1 KiB  3.1 [3.1-4.1] n=3  5.3 [4.7-6.2] n=3  16.1 [3.6-21] n=19  15.3 [1.4-22] n=21
//	8 KiB  5.1 [2.9-6.5] n=9  9.6 [2.5-23] n=10  21.5 [17-23] n=12   20.1 [14-27] n=12
//
// Always non-temporal (ntpack=1000000) loses in the fast state, 1 KiB: 6.3
// [3.2-11.7] GB/s against 15.8 (n=13). Flushing the consumed ring lines at
// the receiver (CLFLUSHOPT) instead lost too: VIRTUS ratio 0.43 against 0.95
// at 1 KiB in the fast state (n=8/9), and nvstate's slow-state pipeline
// gained less than with non-temporal stores.

// packer packs stream chunks into the eager rings, with plain or
// non-temporal stores as the measured pack rate says; one per device,
// shared by its rings.
type packer struct {
	rate     int       // plain pack rate, MB/s, under which chunks go with non-temporal stores (0: never)
	on       bool      // chunks go with non-temporal stores
	slow     int       // timed plain packs in a row slower than rate
	checked  time.Time // the last timed plain pack
	dirty    bool      // non-temporal stores are not fenced yet
	stage    []byte    // gathers small pieces for non-temporal stores
	chunks   int64     // chunks packed with non-temporal stores (counter nt_chunks)
	switches int64     // switches between plain and non-temporal stores (counter nt_switches)
}

// defaultNTPack is the plain pack rate, MB/s, under which chunks are packed
// with non-temporal stores (option ntpack=N; 0: never).
const defaultNTPack = 4000

// ntSlowPacks is how many timed plain packs in a row must be slow before
// the stream switches to non-temporal stores: in the fast state 1-3% of the
// chunks pack slower than 6 GB/s (the sender lost its CPU, or the machine
// flipped for a moment), and switching on each single one (threshold 6000
// MB/s) sent 25-35% of the chunks non-temporal and cost 20-25% of VIRTUS'
// strided bandwidth (1 KiB: 16.7 against 21.4 GB/s, n=8/7).
const ntSlowPacks = 3

// ntMeasure is the least a timed plain pack covers, bytes; ntRecheck how
// often a non-temporal stream tries plain stores again.
const (
	ntMeasure = 32 << 10
	ntRecheck = 2 * time.Millisecond
)

// ntDirect is the smallest piece of a regular layout that goes straight to
// the ring with non-temporal stores; smaller pieces are gathered in
// packer.stage first, so that the ring gets whole lines.
const ntDirect = 512

// ntStage is the size of the staging buffer for small pieces: well inside L1.
const ntStage = 8 << 10

// pack gathers the chunk bytes [off, off+len(dst)) of m into the ring at
// dst, with plain or non-temporal stores as the measured pack rate says.
func (k *packer) pack(m *outMsg, off int, dst []byte) {
	if k.rate == 0 || !nt.HasCopy || len(dst) < ntMeasure {
		m.copyOut(off, dst)
		return
	}
	now := time.Now()
	if k.on && now.Sub(k.checked) < ntRecheck {
		k.copyOutNT(m, off, dst)
		return
	}
	n := len(dst)
	if k.on {
		n = ntMeasure
	}
	m.copyOut(off, dst[:n])
	el := time.Since(now)
	k.checked = now
	// n bytes in el: n*1000/el.ns MB/s
	switch slow := int64(n)*1000 < int64(k.rate)*el.Nanoseconds(); {
	case !slow:
		k.slow = 0
		if k.on {
			k.on = false
			k.switches++
		}
	case !k.on:
		if k.slow++; k.slow >= ntSlowPacks {
			k.on = true
			k.switches++
		}
	}
	if n < len(dst) {
		if k.on {
			k.copyOutNT(m, off+n, dst[n:])
		} else {
			m.copyOut(off+n, dst[n:])
		}
	}
}

// fence orders the non-temporal stores of a chunk before the stores that
// publish it.
func (k *packer) fence() {
	if k.dirty {
		nt.Fence()
		k.dirty = false
	}
}

// copyOutNT is copyOut with non-temporal stores into dst; the caller fences
// (packer.fence) before it publishes them.
func (k *packer) copyOutNT(m *outMsg, off int, dst []byte) {
	k.dirty = true
	k.chunks++
	if m.runs != nil && !m.data.Contiguous() && m.runs[0].n >= ntDirect {
		c := cursor{runs: m.runs}
		c.seek(uint64(off))
		for len(dst) > 0 {
			a, n, _ := c.next(uint64(len(dst)))
			if n == 0 {
				return
			}
			nt.Copy(dst[:n], m.data.Mem[a:a+n])
			dst = dst[n:]
		}
		return
	}
	if k.stage == nil {
		k.stage = make([]byte, ntStage)
	}
	for len(dst) > 0 {
		n := min(len(dst), len(k.stage))
		m.copyOut(off, k.stage[:n])
		nt.Copy(dst[:n], k.stage[:n])
		dst, off = dst[n:], off+n
	}
}
