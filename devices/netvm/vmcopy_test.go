package netvm

import (
	"bytes"
	"math/rand"
	"os"
	"testing"
	"unsafe"

	"github.com/adimpi/adimpi/adi"
	"github.com/adimpi/adimpi/datatype"
)

// layoutOf returns the packed bytes [off, off+n) of b as a remote layout
// (absolute addresses) and the reference list of its pieces.
func layoutOf(b adi.Buffer, off, n int) []vrun {
	runs := localRuns(b, off, n, nil)
	base := uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b.Mem))))
	return decodeRuns(encodeRuns(nil, runs, base), nil)
}

func randomType(t *testing.T, rng *rand.Rand) (*datatype.Type, int) {
	t.Helper()
	var ty *datatype.Type
	var err error
	switch rng.Intn(3) {
	case 0:
		blk := 1 + rng.Intn(300)
		ty, err = datatype.Vector(1+rng.Intn(40), blk, blk+rng.Intn(100), datatype.Byte)
	case 1:
		n := 1 + rng.Intn(20)
		lens, disps := make([]int, n), make([]int, n)
		at := 0
		for i := range lens {
			lens[i] = rng.Intn(200) // zero-length blocks too
			at += rng.Intn(64)
			disps[i] = at
			at += lens[i]
		}
		ty, err = datatype.Indexed(lens, disps, datatype.Byte)
	default:
		blk := 1 + rng.Intn(50)
		ty, err = datatype.Vector(1+rng.Intn(30), blk, -(blk + rng.Intn(40)), datatype.Int32)
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := ty.Commit(); err != nil {
		t.Fatal(err)
	}
	return ty, 1 + rng.Intn(3)
}

// TestVMCopy moves random non-contiguous layouts into other random layouts
// of the same process (process_vm_writev/readv to oneself), at random byte
// offsets on both sides, and compares with a copy through Pack/Unpack.
func TestVMCopy(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	pid := os.Getpid()
	sink := make([]byte, 100)
	for iter := 0; iter < 1000; iter++ {
		st, sc := randomType(t, rng)
		rt, rc := randomType(t, rng)
		src := adi.Buffer{Mem: make([]byte, st.Span(sc)), Count: sc, Type: st}
		dst := adi.Buffer{Mem: make([]byte, rt.Span(rc)), Count: rc, Type: rt}
		rng.Read(src.Mem)
		n := min(src.Size(), dst.Size())
		if n == 0 {
			continue
		}
		lo := rng.Intn(n)
		k := rng.Intn(n-lo) + 1
		want := append([]byte(nil), dst.Mem...)
		tmp := make([]byte, k)
		src.CopyOut(lo, tmp)
		adi.Buffer{Mem: want, Count: rc, Type: rt}.CopyIn(lo, tmp)
		write := iter%2 == 0
		var err error
		if write { // local = src, remote = dst
			err = vmCopy(pid, true, src.Mem, localRuns(src, lo, k, nil), 0, layoutOf(dst, 0, n), uint64(lo), uint64(k), nil)
		} else if rl := layoutOf(src, 0, n); iter%4 == 1 && len(rl) == 1 { // a regular remote run, perhaps through bounce
			err = readRemote(pid, dst.Mem, localRuns(dst, 0, n, nil), uint64(lo), rl[0], uint64(lo), uint64(k), make([]byte, 1000), sink)
		} else { // local = dst, remote = src
			err = vmCopy(pid, false, dst.Mem, localRuns(dst, 0, n, nil), uint64(lo), layoutOf(src, lo, k), 0, uint64(k), sink)
		}
		if err != nil {
			t.Fatalf("iter %d: %v", iter, err)
		}
		if !bytes.Equal(dst.Mem, want) {
			t.Fatalf("iter %d (write %v, %s x%d -> %s x%d, bytes [%d,%d)): wrong result", iter, write, st, sc, rt, rc, lo, lo+k)
		}
	}
}

// TestRunsCompact checks that a Vector's layout is one run.
func TestRunsCompact(t *testing.T) {
	vt, _ := datatype.Vector(8192, 128, 256, datatype.Byte)
	if err := vt.Commit(); err != nil {
		t.Fatal(err)
	}
	b := adi.Buffer{Mem: make([]byte, vt.Span(1)), Count: 1, Type: vt}
	if runs := localRuns(b, 0, b.Size(), nil); len(runs) != 1 || runs[0].count != 8192 || runs[0].stride != 256 {
		t.Fatalf("runs of a vector: %+v", runs)
	}
	if runs := localRuns(b, 100, 1000, nil); runsBytes(runs) != 1000 {
		t.Fatalf("runs of bytes [100,1100) cover %d bytes: %+v", runsBytes(runs), runs)
	}
}

func benchVirtus(b *testing.B, block int, how string) {
	const total = 1 << 20
	vt, _ := datatype.Vector(total/block, block, 2*block, datatype.Byte)
	_ = vt.Commit()
	src := adi.Buffer{Mem: make([]byte, vt.Span(1)), Count: 1, Type: vt}
	dst := adi.Buffer{Mem: make([]byte, vt.Span(1)), Count: 1, Type: vt}
	pid := os.Getpid()
	tmp := make([]byte, 64<<10)
	sink := make([]byte, 8192)
	b.SetBytes(total)
	for b.Loop() {
		switch how {
		case "cma":
			if err := vmCopy(pid, true, src.Mem, localRuns(src, 0, total, nil), 0, layoutOf(dst, 0, total), 0, total, nil); err != nil {
				b.Fatal(err)
			}
		case "read": // the receiver reads, taking the sender's gaps along
			if err := vmCopy(pid, false, dst.Mem, localRuns(dst, 0, total, nil), 0, layoutOf(src, 0, total), 0, total, sink); err != nil {
				b.Fatal(err)
			}
		case "bounce": // the receiver reads whole spans into a bounce buffer and scatters them
			run := layoutOf(src, 0, total)[0]
			local := localRuns(dst, 0, total, nil)
			bounce := make([]byte, 256<<10)
			for pos := uint64(0); pos < total; {
				k, err := vmReadBounce(pid, dst.Mem, local, pos, run, pos, total-pos, bounce)
				if err != nil || k == 0 {
					b.Fatal(err, k)
				}
				pos += k
			}
		case "runs": // the chunk pipeline's two copies by regular runs (copyRuns), on one core
			sr, dr := regularRuns(src), regularRuns(dst)
			for off := 0; off < total; off += len(tmp) {
				copyRuns(src.Mem, sr, off, tmp, false)
				copyRuns(dst.Mem, dr, off, tmp, true)
			}
		case "pack": // the chunk pipeline's two copies through Buffer.CopyOut/CopyIn, on one core
			for off := 0; off < total; off += len(tmp) {
				src.CopyOut(off, tmp)
				dst.CopyIn(off, tmp)
			}
		case "contig":
			if err := vmCopy(pid, true, src.Mem[:total], []vrun{{n: total, count: 1}}, 0, layoutOf(adi.Bytes(dst.Mem[:total]), 0, total), 0, total, nil); err != nil {
				b.Fatal(err)
			}
		}
	}
}

func BenchmarkVirtus(b *testing.B) {
	for _, how := range []string{"contig", "cma", "read", "bounce", "runs", "pack"} {
		for _, block := range []int{128, 512, 2048, 8192} {
			b.Run(how+"/"+itoa(block), func(b *testing.B) { benchVirtus(b, block, how) })
		}
	}
}

func itoa(n int) string {
	s := ""
	for ; n > 0; n /= 10 {
		s = string(rune('0'+n%10)) + s
	}
	return s
}

// TestRegularRuns checks the layout computed from Vector/Hvector arguments
// against the type's own walk, and chunk copies by runs against CopyIn/CopyOut.
func TestRegularRuns(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	for iter := 0; iter < 300; iter++ {
		old := []*datatype.Type{datatype.Byte, datatype.Int32, datatype.Float64}[rng.Intn(3)]
		count, blen := 1+rng.Intn(50), 1+rng.Intn(20)
		stride := blen + rng.Intn(10)
		if rng.Intn(4) == 0 {
			stride = -stride
		}
		var ty *datatype.Type
		var err error
		if rng.Intn(2) == 0 {
			ty, err = datatype.Vector(count, blen, stride, old)
		} else {
			ty, err = datatype.Hvector(count, blen, stride*old.Size()+rng.Intn(3)*old.Size(), old)
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := ty.Commit(); err != nil {
			t.Fatal(err)
		}
		n := 1 + rng.Intn(3)
		b := adi.Buffer{Mem: make([]byte, ty.Span(n)), Count: n, Type: ty}
		runs := regularRuns(b)
		if runs == nil {
			t.Fatalf("iter %d: %s x%d: no regular runs", iter, ty, n)
		}
		if got, want := runsBytes(runs), uint64(b.Size()); got != want {
			t.Fatalf("iter %d: runs cover %d bytes, want %d", iter, got, want)
		}
		walk := localRuns(b, 0, b.Size(), nil)
		var a, c cursor
		a.runs, c.runs = runs, walk
		for {
			x, k, _ := a.next(1 << 30)
			y, l, _ := c.next(k)
			if k == 0 || l == 0 {
				if k != l {
					t.Fatalf("iter %d: layouts end differently", iter)
				}
				break
			}
			if x != y || l != k { // (the walk's pieces may be longer: adjacent blocks merge)
				t.Fatalf("iter %d: %s x%d: piece at %d (%d bytes), walk says %d (%d bytes)", iter, ty, n, x, k, y, l)
			}
		}
		src := make([]byte, b.Size())
		rng.Read(src)
		off := rng.Intn(b.Size())
		k := rng.Intn(b.Size()-off) + 1
		want := append([]byte(nil), b.Mem...)
		adi.Buffer{Mem: want, Count: n, Type: ty}.CopyIn(off, src[:k])
		copyRuns(b.Mem, runs, off, src[:k], true)
		if !bytes.Equal(b.Mem, want) {
			t.Fatalf("iter %d: copyRuns in differs from CopyIn", iter)
		}
		out1, out2 := make([]byte, k), make([]byte, k)
		b.CopyOut(off, out1)
		copyRuns(b.Mem, runs, off, out2, false)
		if !bytes.Equal(out1, out2) {
			t.Fatalf("iter %d: copyRuns out differs from CopyOut", iter)
		}
	}
}
