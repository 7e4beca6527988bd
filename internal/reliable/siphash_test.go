package reliable

import (
	"bytes"
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
// message pays on each side: with the peer's prefix state kept (what the
// transport does), hashed from the start, with a selective
// acknowledgement, and GMAC.
func BenchmarkTagHeader(b *testing.B) {
	for _, c := range []struct {
		name        string
		whole, sack bool
		cached      bool
	}{{"header", false, false, true}, {"header-uncached", false, false, false}, {"header-sack", false, true, true}, {"GMAC", true, false, false}} {
		b.Run(c.name, func(b *testing.B) {
			a := newAuthenticator(testSecret, c.whole)
			f := make([]byte, hdrLen+8+tagLen)
			if c.sack {
				f[offFlags] |= flagSack
			}
			var pre *sipPrefix
			if c.cached {
				pre = &sipPrefix{}
			}
			for range b.N {
				a.sign(f, hdrLen+8, pre)
			}
		})
	}
}

// tagTestFrame is a frame of 8 payload bytes with every byte set, with or
// without flagSack.
func tagTestFrame(sack bool) ([]byte, int) {
	f := make([]byte, hdrLen+8+tagLen)
	for i := range f {
		f[i] = byte(i * 7)
	}
	f[offFlags] &^= flagSack
	if sack {
		f[offFlags] |= flagSack
	}
	return f, hdrLen + 8
}

// TestHeaderTagCoversHeader checks that the tag catches a change to any
// byte it covers, and to any byte of the tag, in both modes: with the tag
// over the header, every header byte from the source MAC on but the count
// (which SipHash does not need) and, without flagSack, the selective
// acknowledgement (which the receiver then does not read); with the tag
// over the frame, every byte. Clearing or setting flagSack is caught too.
func TestHeaderTagCoversHeader(t *testing.T) {
	for _, whole := range []bool{false, true} {
		for _, sack := range []bool{false, true} {
			a := newAuthenticator(testSecret, whole)
			f, n := tagTestFrame(sack)
			a.sign(f, n, nil)
			if !a.verify(f, nil) || (!whole && !a.verifyHeader(f[:hdrLen], f[n:], nil)) {
				t.Fatalf("whole=%v sack=%v: a genuine frame fails its check", whole, sack)
			}
			for i := offSrc; i < len(f); i++ {
				covered := whole || i >= n || (i < offSack || (sack && i < offSack+sackLen))
				f[i] ^= 0x10
				if ok := a.verify(f, nil); ok == covered {
					t.Errorf("whole=%v sack=%v: a frame changed at byte %d: passes %v, want %v", whole, sack, i, ok, !covered)
				}
				f[i] ^= 0x10
			}
			f[offFlags] ^= flagSack
			if a.verify(f, nil) {
				t.Errorf("whole=%v sack=%v: a frame with flagSack flipped passes", whole, sack)
			}
		}
	}
}

// TestSackTagged checks the selective acknowledgement's cover: a frame
// with one is tagged over its bitmap (each bit changed is caught, and the
// tag differs from the same frame's without flagSack); a frame without
// one is tagged the same whatever its bitmap bytes hold, and parses with
// an empty one.
func TestSackTagged(t *testing.T) {
	a := newAuthenticator(testSecret, false)
	f, n := tagTestFrame(true)
	var m sackMap
	m.set(0)
	m.set(200)
	m.put(f)
	a.sign(f, n, nil)
	if h := parse(f); h.sack != m {
		t.Fatalf("parsed selective acknowledgement %x, want %x", h.sack, m)
	}
	for bit := range Window {
		i := offSack + bit/8
		f[i] ^= 1 << (bit % 8)
		if a.verify(f, nil) {
			t.Fatalf("a frame with selective acknowledgement bit %d flipped passes", bit)
		}
		f[i] ^= 1 << (bit % 8)
	}
	withSack := append([]byte(nil), f[n:]...)
	g, _ := tagTestFrame(false)
	copy(g[offSack:offSack+sackLen], f[offSack:offSack+sackLen])
	a.sign(g, n, nil)
	if bytes.Equal(g[n:], withSack) {
		t.Fatal("the same header with and without flagSack has the same tag")
	}
	other := append([]byte(nil), g...)
	clear(other[offSack : offSack+sackLen])
	a.sign(other, n, nil)
	if !bytes.Equal(g[n:], other[n:]) || parse(g).sack != (sackMap{}) {
		t.Fatal("without flagSack the bitmap's bytes change the tag or are read")
	}
}

// TestPrefixTag checks the tag resumed from a peer's prefix state against
// SipHash over the whole covered header: equal for frames that share the
// prefix (with and without a selective acknowledgement), and, for a frame
// that starts otherwise (another rank, another job, another MAC), its own
// full tag, not the kept state's, after which the state is that frame's.
func TestPrefixTag(t *testing.T) {
	a := newAuthenticator(testSecret, false)
	full := func(f []byte) [tagLen]byte {
		var tag [tagLen]byte
		lo, hi := sipHash(a.k0, a.k1, f[offSrc:headerEnd(f)], true)
		binary.LittleEndian.PutUint64(tag[:], lo)
		binary.LittleEndian.PutUint64(tag[8:], hi)
		return tag
	}
	var pre sipPrefix
	check := func(what string, f []byte, n int) {
		t.Helper()
		a.sign(f, n, &pre)
		if want := full(f); !bytes.Equal(f[n:n+tagLen], want[:]) {
			t.Errorf("%s: tag % x from the kept state, want % x", what, f[n:n+tagLen], want)
		}
		if !a.verify(f, &pre) || !a.verify(f, nil) {
			t.Errorf("%s: its tag fails its check", what)
		}
	}
	f, n := tagTestFrame(false)
	check("first frame", f, n)
	if !pre.ok {
		t.Fatal("no prefix state kept")
	}
	kept := pre
	binary.LittleEndian.PutUint32(f[offSeq:], 12345)
	check("next frame", f, n)
	f[offFlags] |= flagSack
	check("with a selective acknowledgement", f, n)
	if pre != kept {
		t.Fatal("the kept state changed for frames of the same prefix")
	}
	for _, change := range []struct {
		what string
		at   int
	}{{"another source rank", offFrom}, {"another destination rank", offTo}, {"another job", offJob + 7}, {"another MAC", offSrc}} {
		g := append([]byte(nil), f...)
		g[change.at] ^= 1
		check(change.what, g, n)
		if pre.w == kept.w {
			t.Errorf("%s: the kept state is still the other prefix's", change.what)
		}
		check("back to the first prefix", f, n)
	}
}
