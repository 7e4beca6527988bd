package datatype

import "testing"

// vector1K is 1024 blocks of 1 KiB, 2 KiB apart: 1 MiB of data in 2 MiB.
func vector1K(b *testing.B) (*Type, []byte, []byte) {
	ty, err := Vector(1024, 1024, 2048, Byte)
	if err != nil {
		b.Fatal(err)
	}
	if err := ty.Commit(); err != nil {
		b.Fatal(err)
	}
	mem := make([]byte, ty.Span(1))
	for i := range mem {
		mem[i] = byte(i)
	}
	return ty, mem, make([]byte, ty.Size())
}

func BenchmarkPackVector1K(b *testing.B) {
	ty, mem, buf := vector1K(b)
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		if _, err := Pack(buf, 0, mem, 1, ty); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkUnpackVector1K(b *testing.B) {
	ty, mem, buf := vector1K(b)
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		if _, err := Unpack(buf, 0, mem, 1, ty); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCopySameBytes copies as many bytes as BenchmarkPackVector1K
// packs, contiguously: the bandwidth Pack is measured against.
func BenchmarkCopySameBytes(b *testing.B) {
	_, mem, buf := vector1K(b)
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		copy(buf, mem[:len(buf)])
	}
}

// BenchmarkCopyStrided is the hand-written gather of the same vector.
func BenchmarkCopyStrided(b *testing.B) {
	_, mem, buf := vector1K(b)
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		for i := range 1024 {
			copy(buf[i*1024:(i+1)*1024], mem[i*2048:i*2048+1024])
		}
	}
}

// BenchmarkPackVector8 packs 8-byte blocks: the per-block cost.
func BenchmarkPackVector8(b *testing.B) {
	ty, err := Vector(1<<17, 1, 2, Float64)
	if err != nil {
		b.Fatal(err)
	}
	_ = ty.Commit()
	mem, buf := make([]byte, ty.Span(1)), make([]byte, ty.Size())
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		if _, err := Pack(buf, 0, mem, 1, ty); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSegmentVector1K moves the vector in 64 KiB packets with Segment.
func BenchmarkSegmentVector1K(b *testing.B) {
	ty, mem, buf := vector1K(b)
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		s, _ := NewSegment(ty, 1)
		k := 0
		for {
			p, ok := s.Next(mem, 64<<10)
			if !ok {
				break
			}
			k += copy(buf[k:], p)
		}
	}
}
