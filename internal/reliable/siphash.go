package reliable

import (
	"encoding/binary"
	"math/bits"
)

// sipState is SipHash-2-4's state (from "SipHash: a fast short-input PRF"
// by Aumasson and Bernstein) after some whole 8-byte words of a message:
// the state after a prefix that many messages share can be kept and
// resumed (see sipPrefix).
type sipState struct{ v0, v1, v2, v3 uint64 }

// sipStart is the state before the first word under the key k0, k1; wide
// chooses the 128-bit output mode.
func sipStart(k0, k1 uint64, wide bool) sipState {
	s := sipState{k0 ^ 0x736f6d6570736575, k1 ^ 0x646f72616e646f6d, k0 ^ 0x6c7967656e657261, k1 ^ 0x7465646279746573}
	if wide {
		s.v1 ^= 0xee
	}
	return s
}

// word absorbs the next 8-byte word of the message, x (little-endian).
func (s *sipState) word(x uint64) {
	v0, v1, v2, v3 := s.v0, s.v1, s.v2, s.v3
	v3 ^= x
	v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
	v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
	v0 ^= x
	s.v0, s.v1, s.v2, s.v3 = v0, v1, v2, v3
}

// finish absorbs m, the rest of a message of n bytes in all, and returns
// the output: (lo, hi) in the 128-bit mode, (lo, 0) in the 64-bit one.
func (s sipState) finish(m []byte, n int, wide bool) (lo, hi uint64) {
	v0, v1, v2, v3 := s.v0, s.v1, s.v2, s.v3
	for ; len(m) >= 8; m = m[8:] {
		x := binary.LittleEndian.Uint64(m)
		v3 ^= x
		v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
		v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
		v0 ^= x
	}
	x := uint64(n) << 56
	for i, b := range m {
		x |= uint64(b) << (8 * i)
	}
	v3 ^= x
	v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
	v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
	v0 ^= x
	if wide {
		v2 ^= 0xee
	} else {
		v2 ^= 0xff
	}
	for range 4 {
		v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
	}
	lo = v0 ^ v1 ^ v2 ^ v3
	if !wide {
		return lo, 0
	}
	v1 ^= 0xdd
	for range 4 {
		v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
	}
	return lo, v0 ^ v1 ^ v2 ^ v3
}

// sipHash is SipHash-2-4 of m under the key k0, k1: a keyed function
// built for short inputs, which a job's frame headers are. With wide set
// it is the 128-bit output mode (lo, hi); otherwise hi is 0 and lo the
// 64-bit output.
func sipHash(k0, k1 uint64, m []byte, wide bool) (lo, hi uint64) {
	return sipStart(k0, k1, wide).finish(m, len(m), wide)
}

// sipRound is SipHash's round function.
func sipRound(v0, v1, v2, v3 uint64) (uint64, uint64, uint64, uint64) {
	v0 += v1
	v1 = bits.RotateLeft64(v1, 13)
	v1 ^= v0
	v0 = bits.RotateLeft64(v0, 32)
	v2 += v3
	v3 = bits.RotateLeft64(v3, 16)
	v3 ^= v2
	v0 += v3
	v3 = bits.RotateLeft64(v3, 21)
	v3 ^= v0
	v2 += v1
	v1 = bits.RotateLeft64(v1, 17)
	v1 ^= v2
	v2 = bits.RotateLeft64(v2, 32)
	return v0, v1, v2, v3
}
