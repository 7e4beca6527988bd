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
// So the sender times its plain packing (packChunk): once ntSlowPacks
// chunks in a row (each timed over at least ntMeasure bytes) pack slower
// than Device.ntPack MB/s, the following chunks go with non-temporal stores
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
// Device.stage first, so that the ring gets whole lines.
const ntDirect = 512

// ntStage is the size of the staging buffer for small pieces: well inside L1.
const ntStage = 8 << 10

// packChunk gathers the chunk bytes [off, off+len(dst)) of m into the ring
// at dst, with plain or non-temporal stores as the measured pack rate says.
func (d *Device) packChunk(m *outMsg, off int, dst []byte) {
	if d.ntPack == 0 || !nt.HasCopy || len(dst) < ntMeasure {
		m.copyOut(off, dst)
		return
	}
	now := time.Now()
	if d.ntOn && now.Sub(d.ntChecked) < ntRecheck {
		d.copyOutNT(m, off, dst)
		return
	}
	k := len(dst)
	if d.ntOn {
		k = ntMeasure
	}
	m.copyOut(off, dst[:k])
	el := time.Since(now)
	d.ntChecked = now
	// k bytes in el: k*1000/el.ns MB/s
	switch slow := int64(k)*1000 < int64(d.ntPack)*el.Nanoseconds(); {
	case !slow:
		d.ntSlow = 0
		if d.ntOn {
			d.ntOn = false
			d.cnt.ntSwitches++
		}
	case !d.ntOn:
		if d.ntSlow++; d.ntSlow >= ntSlowPacks {
			d.ntOn = true
			d.cnt.ntSwitches++
		}
	}
	if k < len(dst) {
		if d.ntOn {
			d.copyOutNT(m, off+k, dst[k:])
		} else {
			m.copyOut(off+k, dst[k:])
		}
	}
}

// copyOutNT is copyOut with non-temporal stores into dst; the caller fences
// (Device.ntDirty) before it publishes them.
func (d *Device) copyOutNT(m *outMsg, off int, dst []byte) {
	d.ntDirty = true
	d.cnt.ntChunks++
	if m.runs != nil && !m.data.Contiguous() && m.runs[0].n >= ntDirect {
		c := cursor{runs: m.runs}
		c.seek(uint64(off))
		for len(dst) > 0 {
			a, k, _ := c.next(uint64(len(dst)))
			if k == 0 {
				return
			}
			nt.Copy(dst[:k], m.data.Mem[a:a+k])
			dst = dst[k:]
		}
		return
	}
	if d.stage == nil {
		d.stage = make([]byte, ntStage)
	}
	for len(dst) > 0 {
		n := min(len(dst), len(d.stage))
		m.copyOut(off, d.stage[:n])
		nt.Copy(dst[:n], d.stage[:n])
		dst, off = dst[n:], off+n
	}
}
