package reliable

import (
	"encoding/binary"
	"testing"
)

// TestSipHashVectors checks sipHash against the test vectors of the
// SipHash paper's reference code: key 00 01 .. 0f, message 00 01 .. (n-1).
func TestSipHashVectors(t *testing.T) {
	k0, k1 := uint64(0x0706050403020100), uint64(0x0f0e0d0c0b0a0908)
	msg := func(n int) []byte {
		m := make([]byte, n)
		for i := range m {
			m[i] = byte(i)
		}
		return m
	}
	for _, c := range []struct {
		n    int
		want uint64
	}{{0, 0x726fdb47dd0e0e31}, {15, 0xa129ca6149be45e5}} {
		if lo, _ := sipHash(k0, k1, msg(c.n), false); lo != c.want {
			t.Errorf("64-bit, %d bytes: %#x, want %#x", c.n, lo, c.want)
		}
	}
	lo, hi := sipHash(k0, k1, nil, true)
	var got [16]byte
	binary.LittleEndian.PutUint64(got[:], lo)
	binary.LittleEndian.PutUint64(got[8:], hi)
	want := [16]byte{0xa3, 0x81, 0x7f, 0x04, 0xba, 0x25, 0xa8, 0xe6, 0x6d, 0xf6, 0x72, 0x14, 0xc7, 0x55, 0x02, 0x93}
	if got != want {
		t.Errorf("128-bit, empty: % x, want % x", got, want)
	}
}

// BenchmarkTagHeader times the tag of one frame header, what every small
// message pays on each side.
func BenchmarkTagHeader(b *testing.B) {
	for _, whole := range []bool{false, true} {
		name := "header"
		if whole {
			name = "GMAC"
		}
		b.Run(name, func(b *testing.B) {
			a := newAuthenticator(testSecret, whole)
			f := make([]byte, hdrLen+8+tagLen)
			for range b.N {
				a.sign(f, hdrLen+8)
			}
		})
	}
}

// TestHeaderTagCoversHeader checks that the header tag catches a change to
// any byte of the header from the source MAC on (the selective
// acknowledgement included) and to any byte of the tag, in both modes.
func TestHeaderTagCoversHeader(t *testing.T) {
	for _, whole := range []bool{false, true} {
		a := newAuthenticator(testSecret, whole)
		f := make([]byte, hdrLen+8+tagLen)
		for i := range f {
			f[i] = byte(i * 7)
		}
		n := hdrLen + 8
		a.sign(f, n)
		if !a.verify(f) || (!whole && !a.verifyHeader(f[:hdrLen], f[n:])) {
			t.Fatalf("whole=%v: a genuine frame fails its check", whole)
		}
		for i := offSrc; i < len(f); i++ {
			if i >= hdrLen && i < n {
				continue // the payload: whole mode only, TestStrangers
			}
			f[i] ^= 0x10
			if a.verify(f) {
				t.Errorf("whole=%v: a frame changed at byte %d passes", whole, i)
			}
			f[i] ^= 0x10
		}
	}
}
