package mpi

import (
	"testing"

	"github.com/adimpi/adimpi/datatype"
)

// TestPlainArgsNeverAcceptsWhatP2PArgsRejects checks the blocking calls'
// cheap argument test against the full one over every kind of bad and
// special argument: whatever plainArgs accepts, p2pArgs must accept too, and
// it must name an ordinary peer (no ProcNull or wildcard); and plainArgs
// must accept the ordinary calls, or the fast path would never run.
func TestPlainArgsNeverAcceptsWhatP2PArgsRejects(t *testing.T) {
	w := World()
	freed, err := w.Dup()
	if err != nil {
		t.Fatal(err)
	}
	if err := freed.Free(); err != nil {
		t.Fatal(err)
	}
	vec, _ := datatype.Vector(2, 1, 2, datatype.Float64) // never committed
	gone, _ := datatype.Contiguous(2, datatype.Float64)
	gone.Commit()
	gone.Free()
	mem := make([]byte, 64)
	bufs := []Buffer{
		Typed(mem, 8, datatype.Float64), Typed(mem, 0, datatype.Float64), Typed(nil, 0, datatype.Byte),
		Typed(mem, 9, datatype.Float64), Typed(mem, -1, datatype.Float64), Typed(mem, 1, nil),
		Typed(mem, 1, vec), Typed(mem, 1, gone),
	}
	accepted := 0
	for _, c := range []*Comm{w, nil, freed} {
		for _, b := range bufs {
			for _, peer := range []int{0, 1, -5, ProcNull, AnySource, 1 << 40} {
				for _, tag := range []int{0, 7, TagUB, TagUB + 1, -3, AnyTag} {
					if !plainArgs(c, b, peer, tag) {
						continue
					}
					accepted++
					for _, recv := range []bool{false, true} {
						if _, err := p2pArgs("test", c, b, peer, tag, recv); err != nil {
							t.Errorf("plainArgs accepted (comm %v, count %d of %v in %d bytes, peer %d, tag %d), p2pArgs says %v", c, b.Count, b.Type, len(b.Mem), peer, tag, err)
						}
					}
					if peer < 0 {
						t.Errorf("plainArgs accepted the special peer %d", peer)
					}
				}
			}
		}
	}
	// The world, three good buffers, peer 0, tags 0, 7 and TagUB.
	if accepted != 9 {
		t.Errorf("plainArgs accepted %d ordinary calls, want 9", accepted)
	}
}
