package nt

import (
	"bytes"
	"testing"
)

func TestCopy(t *testing.T) {
	src := make([]byte, 8192)
	for i := range src {
		src[i] = byte(i*7 + 3)
	}
	for _, n := range []int{0, 1, 63, 64, 127, 128, 129, 191, 192, 1000, 1024, 4096 + 65} {
		for _, d := range []int{0, 1, 15, 16, 33, 63} {
			for _, s := range []int{0, 5, 32} {
				dst := make([]byte, n+d+64)
				got := Copy(dst[d:d+n], src[s:s+n])
				Fence()
				if got != n || !bytes.Equal(dst[d:d+n], src[s:s+n]) {
					t.Fatalf("n=%d dst+%d src+%d: copied %d, bytes differ", n, d, s, got)
				}
				for i, b := range dst {
					if (i < d || i >= d+n) && b != 0 {
						t.Fatalf("n=%d dst+%d src+%d: byte %d outside the copy written", n, d, s, i)
					}
				}
			}
		}
	}
}
