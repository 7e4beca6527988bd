// Strided sends large messages between ranks 0 and 1 with every pairing of
// layouts netvm treats differently (regular runs, contiguous, irregular
// Indexed blocks), in windows of non-blocking operations both ways, and
// checks every received byte and every gap byte. With -want-counter NAME
// rank 1 also checks that the device counter NAME moved (the test uses it to
// prove that an option's path was taken).
package main

import (
	"flag"
	"fmt"
	"log"

	"github.com/adimpi/adimpi/datatype"
	"github.com/adimpi/adimpi/mpi"
)

const total = 288 << 10 // packed bytes per message: several eager-ring chunks (a multiple of every block)

func vector(count, blen, stride int) *datatype.Type {
	t, err := datatype.Vector(count, blen, stride, datatype.Byte)
	must(err)
	must(t.Commit())
	return t
}

// layouts: name → (type, count) covering total packed bytes.
func layouts() map[string]func() (*datatype.Type, int) {
	return map[string]func() (*datatype.Type, int){
		"vec1k":   func() (*datatype.Type, int) { return vector(total/1024, 1024, 2048), 1 },
		"vec96":   func() (*datatype.Type, int) { return vector(total/96, 96, 96+40), 1 },
		"vec8k":   func() (*datatype.Type, int) { return vector(total/8192, 8192, 3*8192), 1 },
		"contig":  func() (*datatype.Type, int) { return datatype.Byte, total },
		"negvec":  func() (*datatype.Type, int) { return vector(total/512, 512, -1024), 1 },
		"indexed": indexed,
	}
}

// indexed is an irregular layout: blocks of varying length and gaps.
func indexed() (*datatype.Type, int) {
	var lens, disps []int
	at, sum := 0, 0
	for i := 0; sum < total; i++ {
		l := min(100+(i*37)%900, total-sum)
		lens, disps = append(lens, l), append(disps, at)
		at += l + 1 + (i*13)%200
		sum += l
	}
	t, err := datatype.Indexed(lens, disps, datatype.Byte)
	must(err)
	must(t.Commit())
	return t, 1
}

func pattern(msg, k int) byte { return byte(k*7 + msg*13 + k>>11 + 1) }

func main() {
	want := flag.String("want-counter", "", "device counter that must be > 0 on rank 1 at the end")
	wantSender := flag.String("want-sender-counter", "", "device counter that must be > 0 on rank 0 at the end")
	flag.Parse()
	must(mpi.Init())
	w := mpi.World()
	rank := w.Rank()
	if w.Size() < 2 {
		log.Fatal("strided: needs 2 ranks")
	}
	ls := layouts()
	names := []string{"vec1k", "vec96", "vec8k", "contig", "negvec", "indexed"}
	const window = 3
	tag := 0
	for _, sn := range names {
		for _, rn := range names {
			if rank > 1 {
				continue
			}
			st, sc := ls[sn]()
			rt, rc := ls[rn]()
			what := fmt.Sprintf("%s -> %s", sn, rn)
			tag++
			reqs := make([]*mpi.Request, window)
			bufs := make([][]byte, window)
			for m := range window {
				packed := make([]byte, total)
				for k := range packed {
					packed[k] = pattern(m+tag, k)
				}
				if rank == 0 {
					bufs[m] = make([]byte, st.Span(sc))
					_, err := datatype.Unpack(packed, 0, bufs[m], sc, st)
					must(err)
					reqs[m], err = mpi.IsendBuf(w, mpi.Typed(bufs[m], sc, st), 1, tag)
					must(err)
				} else {
					bufs[m] = make([]byte, rt.Span(rc))
					for i := range bufs[m] {
						bufs[m][i] = 0xEE
					}
					var err error
					reqs[m], err = mpi.IrecvBuf(w, mpi.Typed(bufs[m], rc, rt), 0, tag)
					must(err)
				}
			}
			sts, err := mpi.Waitall(reqs)
			must(err)
			if rank == 1 {
				for m := range window {
					if sts[m].Bytes() != total {
						log.Fatalf("%s: message %d brought %d bytes, want %d", what, m, sts[m].Bytes(), total)
					}
					exp := make([]byte, len(bufs[m]))
					for i := range exp {
						exp[i] = 0xEE
					}
					packed := make([]byte, total)
					for k := range packed {
						packed[k] = pattern(m+tag, k)
					}
					_, err := datatype.Unpack(packed, 0, exp, rc, rt)
					must(err)
					for i := range exp {
						if exp[i] != bufs[m][i] {
							log.Fatalf("%s: message %d: byte %d of the receive buffer is %#x, want %#x", what, m, i, bufs[m][i], exp[i])
						}
					}
				}
			}
		}
	}
	must(mpi.Barrier(w))
	if rank == 1 && *want != "" {
		if c := mpi.Counters()[*want]; c <= 0 {
			log.Fatalf("strided: device counter %s = %d on rank 1, want > 0 (counters %v)", *want, c, mpi.Counters())
		}
	}
	if rank == 0 && *wantSender != "" {
		if c := mpi.Counters()[*wantSender]; c <= 0 {
			log.Fatalf("strided: device counter %s = %d on rank 0, want > 0 (counters %v)", *wantSender, c, mpi.Counters())
		}
	}
	if rank == 0 {
		fmt.Printf("strided: %d layout pairs ok on %s\n", tag, mpi.DeviceName())
	}
	must(mpi.Finalize())
}

func must(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
