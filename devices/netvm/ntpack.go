package netvm

import (
	"time"

	"github.com/adimpi/adimpi/devices/netvm/internal/nt"
)

// A stream's chunks are packed by the sender into ring lines that the
// receiver read one ring earlier, so every such line may still sit in the
// receiver core's cache when the sender stores into it, and each store waits
// for that copy to be invalidated. When that is slow, non-temporal stores,
// which need no line from the other core, pack faster; when it is fast, plain
// stores win because they leave the lines in cache for the receiver. So the
// sender times its plain packing (packer.pack): once ntSlowPacks chunks in a
// row (each timed over at least ntMeasure bytes) pack slower than the ntpack
// option's MB/s, the following chunks go with non-temporal stores (nt.Copy,
// SFENCE before the chunk's control message publishes it), and every
// ntRecheck the first ntMeasure bytes of a chunk are packed plainly again and
// timed, to return to plain stores when the machine is fast again. The
// receiver is unchanged. The measurements behind the thresholds are in
// docs/performance-netvm.md.

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
// the stream switches to non-temporal stores: single slow packs happen when
// the sender loses its CPU for a moment, and switching on each of them costs
// more than it gains (docs/performance-netvm.md).
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
