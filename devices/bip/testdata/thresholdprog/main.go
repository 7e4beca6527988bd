// Command thresholdprog sends MPI messages of every size around the bip
// device's protocol thresholds (±1 byte): 0, 1, the eager limit (short −
// header), the staging chunk and twice it, and the 1 MiB remote-write
// window; in standard and synchronous mode; received exactly, truncated
// (nothing may be written past the buffer), and all at once as pending
// non-blocking operations received in reverse order (more long operations
// than BIP's maxlong). Ranks pair up (0-1, 2-3, ...; an odd last rank
// talks to itself). Rank 0 prints "PASS thresholds".
package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/adimpi/adimpi/mpi"
)

func opt(key string, def int) int {
	for kv := range strings.SplitSeq(os.Getenv("ADIMPI_DEVICE_OPT"), ",") {
		if k, v, ok := strings.Cut(kv, "="); ok && strings.TrimSpace(k) == key {
			if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil {
				return n
			}
		}
	}
	return def
}

func sizes() []int {
	short := (opt("short", 4096) + 63) &^ 63
	chunk := (opt("chunk", 32768) + 63) &^ 63
	out := []int{0, 1}
	for _, t := range []int{short - 40, chunk, 2 * chunk, 1 << 20} {
		out = append(out, t-1, t, t+1)
	}
	return out
}

func pattern(n, salt int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + salt)
	}
	return b
}

func main() {
	must(mpi.Init())
	w := mpi.World()
	rank := w.Rank()
	peer := rank ^ 1
	if peer >= w.Size() {
		peer = rank
	}
	first := rank <= peer
	for k, n := range sizes() {
		for mode := 0; mode < 2; mode++ {
			send := func(salt int) {
				b := pattern(n, salt)
				if mode == 0 {
					must(mpi.Send(w, b, peer, k))
				} else {
					must(mpi.Ssend(w, b, peer, k))
				}
			}
			// exact receive
			recvExact := func(salt int) {
				buf := make([]byte, n)
				st, err := mpi.Recv(w, buf, peer, k)
				must(err)
				if st.Bytes() != n || string(buf) != string(pattern(n, salt)) {
					fail("size %d mode %d: received %d bytes, data equal %v", n, mode, st.Bytes(), string(buf) == string(pattern(n, salt)))
				}
			}
			// truncated receive: half the bytes, and a guard after them
			recvShort := func(salt int) {
				h := n / 2
				mem := make([]byte, h+64)
				st, err := mpi.Recv(w, mem[:h], peer, k)
				if n > h && !errors.Is(err, mpi.ErrTruncate) {
					fail("size %d into %d bytes: err %v, want MPI_ERR_TRUNCATE", n, h, err)
				}
				if n == h {
					must(err)
				}
				if string(mem[:h]) != string(pattern(n, salt)[:h]) {
					fail("size %d truncated to %d: data wrong", n, h)
				}
				for i := h; i < len(mem); i++ {
					if mem[i] != 0 {
						fail("size %d truncated to %d: byte %d past the buffer written", n, h, i)
					}
				}
				_ = st
			}
			if peer == rank {
				r, err := mpi.Irecv(w, make([]byte, n), rank, k)
				must(err)
				send(1)
				_, err = r.Wait()
				must(err)
				continue
			}
			if first {
				send(1)
				recvShort(2)
			} else {
				recvExact(1)
				send(2)
			}
		}
	}
	// Everything at once, received in reverse order.
	sz := sizes()
	var reqs []*mpi.Request
	bufs := make([][]byte, len(sz))
	for k := len(sz) - 1; k >= 0; k-- {
		bufs[k] = make([]byte, sz[k])
		r, err := mpi.Irecv(w, bufs[k], peer, 100+k)
		must(err)
		reqs = append(reqs, r)
	}
	for k, n := range sz {
		r, err := mpi.Isend(w, pattern(n, k), peer, 100+k)
		must(err)
		reqs = append(reqs, r)
	}
	_, err := mpi.Waitall(reqs)
	must(err)
	for k, n := range sz {
		if string(bufs[k]) != string(pattern(n, k)) {
			fail("pending message %d of %d bytes: data wrong", k, n)
		}
	}
	must(mpi.Barrier(w))
	if rank == 0 {
		fmt.Println("PASS thresholds")
	}
	must(mpi.Finalize())
}

func must(err error) {
	if err != nil {
		fail("%v", err)
	}
}

func fail(format string, args ...any) {
	fmt.Printf("FAIL rank %d: "+format+"\n", append([]any{mpi.World().Rank()}, args...)...)
	os.Exit(1)
}
