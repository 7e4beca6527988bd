package netvm

import (
	"bytes"
	"math/rand"
	"testing"

	"github.com/adimpi/adimpi/adi"
	"github.com/adimpi/adimpi/datatype"
	"github.com/adimpi/adimpi/devices/netvm/internal/nt"
)

// TestCopyOutNT packs random layouts (and Vectors of blocks large enough
// for the direct path) at random offsets into misaligned ring positions
// with non-temporal stores and compares with plain packing.
func TestCopyOutNT(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	k := new(packer)
	for i := 0; i < 300; i++ {
		var ty *datatype.Type
		count := 1
		if i%3 == 0 {
			blk := ntDirect + rng.Intn(3000)
			var err error
			if ty, err = datatype.Vector(1+rng.Intn(20), blk, blk+rng.Intn(5000), datatype.Byte); err != nil {
				t.Fatal(err)
			}
			if err := ty.Commit(); err != nil {
				t.Fatal(err)
			}
		} else {
			ty, count = randomType(t, rng)
		}
		mem := make([]byte, ty.Span(count))
		rng.Read(mem)
		buf := adi.Buffer{Mem: mem, Count: count, Type: ty}
		m := &outMsg{data: buf, runs: regularRuns(buf)}
		size := buf.Size()
		if size == 0 {
			continue
		}
		off := rng.Intn(size)
		n := 1 + rng.Intn(size-off)
		want := make([]byte, n)
		m.copyOut(off, want)
		ring := make([]byte, n+128)
		at := rng.Intn(64)
		k.copyOutNT(m, off, ring[at:at+n])
		nt.Fence()
		if !bytes.Equal(ring[at:at+n], want) {
			t.Fatalf("layout %d (%s x%d), bytes [%d,%d): non-temporal pack differs", i, ty, count, off, off+n)
		}
		for j, b := range ring {
			if (j < at || j >= at+n) && b != 0 {
				t.Fatalf("layout %d: ring byte %d outside the chunk written", i, j)
			}
		}
	}
}

// TestPackSwitches checks that timed plain packs switch a stream to
// non-temporal stores only after ntSlowPacks slow ones in a row, and that
// the bytes are right either way.
func TestPackSwitches(t *testing.T) {
	ty, err := datatype.Vector(256, 1024, 2048, datatype.Byte)
	if err != nil {
		t.Fatal(err)
	}
	if err := ty.Commit(); err != nil {
		t.Fatal(err)
	}
	mem := make([]byte, ty.Span(1))
	rand.New(rand.NewSource(3)).Read(mem)
	buf := adi.Buffer{Mem: mem, Count: 1, Type: ty}
	m := &outMsg{data: buf, runs: regularRuns(buf)}
	want := make([]byte, buf.Size())
	m.copyOut(0, want)
	for _, c := range []struct {
		rate int  // ntpack, MB/s
		on   bool // non-temporal after ntSlowPacks chunks
	}{{1, false}, {1 << 30, true}} {
		pk := &packer{rate: c.rate}
		for k := 0; k < ntSlowPacks+2; k++ {
			dst := make([]byte, len(want))
			pk.pack(m, 0, dst)
			pk.fence()
			if !bytes.Equal(dst, want) {
				t.Fatalf("ntpack=%d, chunk %d: bytes differ", c.rate, k)
			}
			if on := c.on && k+1 >= ntSlowPacks; pk.on != on {
				t.Fatalf("ntpack=%d, after chunk %d: non-temporal %v, want %v", c.rate, k, pk.on, on)
			}
		}
	}
}
