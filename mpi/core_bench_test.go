package mpi

import (
	"testing"
	"time"

	"github.com/adimpi/adimpi/adi"
)

// nullDevice completes every operation at once: it isolates the core's own
// per-call cost (arguments, requests, lock, waits, status) from any device.
type nullDevice struct{}

func (nullDevice) Init(adi.Config) error { return nil }
func (nullDevice) Isend(r *adi.Request) error {
	r.Complete(adi.Status{Bytes: r.Buf.Size()})
	return nil
}
func (nullDevice) Irecv(r *adi.Request) error {
	r.Complete(adi.Status{Source: max(r.Peer, 0), Tag: max(r.Tag, 0)})
	return nil
}
func (nullDevice) Iprobe(uint32, int, int) (adi.Status, bool, error) { return adi.Status{}, false, nil }
func (nullDevice) CancelRecv(*adi.Request) bool                      { return false }
func (nullDevice) Progress() (bool, error)                           { return false, nil }
func (nullDevice) Seq() uint32                                       { return 0 }
func (nullDevice) Sleep(uint32, time.Duration)                       {}
func (nullDevice) Wake()                                             {}
func (nullDevice) Finalize() error                                   { return nil }
func (nullDevice) Counters() map[string]int64                        { return nil }

// withNullRuntime runs fn with a runtime of one rank over nullDevice in
// place of the live one.
func withNullRuntime(tb testing.TB, fn func(w *Comm)) {
	r := &runtime{dev: nullDevice{}, devName: "null", size: 1, poll: time.Millisecond, spin: time.Millisecond}
	r.world = newComm("MPI_COMM_WORLD", 0, 0, identity(1))
	r.resume = make(chan struct{}, 1)
	prev := live.Swap(r)
	defer live.Store(prev)
	if b, ok := tb.(*testing.B); ok {
		b.ReportAllocs()
	}
	fn(r.world)
}

// BenchmarkCoreSendRecv is the core's overhead of one blocking Send and one
// blocking Recv, over a device that costs nothing.
func BenchmarkCoreSendRecv(b *testing.B) {
	withNullRuntime(b, func(w *Comm) {
		buf := make([]byte, 8)
		for i := 0; i < b.N; i++ {
			if err := Send(w, buf, 0, 1); err != nil {
				b.Fatal(err)
			}
			if _, err := Recv(w, buf, 0, 1); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkCoreIsendIrecvWait is the same with Isend, Irecv and two Waits.
func BenchmarkCoreIsendIrecvWait(b *testing.B) {
	withNullRuntime(b, func(w *Comm) {
		buf := make([]byte, 8)
		for i := 0; i < b.N; i++ {
			rq, err := Irecv(w, buf, 0, 1)
			if err != nil {
				b.Fatal(err)
			}
			sq, err := Isend(w, buf, 0, 1)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := sq.Wait(); err != nil {
				b.Fatal(err)
			}
			if _, err := rq.Wait(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkCoreWindow64 is bw's inner loop over a device that costs
// nothing: 64 Irecv, 64 Isend, then WaitallInto on both; per message.
func BenchmarkCoreWindow64(b *testing.B) {
	withNullRuntime(b, func(w *Comm) {
		const win = 64
		buf := make([]byte, 8)
		rr, sr := make([]*Request, win), make([]*Request, win)
		sts := make([]Status, win)
		for i := 0; i < b.N; i += win {
			for k := range rr {
				rr[k], _ = Irecv(w, buf, 0, 1)
			}
			for k := range sr {
				sr[k], _ = Isend(w, buf, 0, 1)
			}
			if err := WaitallInto(sr, nil); err != nil {
				b.Fatal(err)
			}
			if err := WaitallInto(rr, sts); err != nil {
				b.Fatal(err)
			}
		}
	})
}
