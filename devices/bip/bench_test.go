package bip

import (
	"testing"

	"github.com/adimpi/adimpi/adi"
)

// BenchmarkEagerWindow is the device's CPU cost of osu_mbw_mr's pattern
// with no scheduler in the way: both ranks in this goroutine, a window of
// 64 eager Isends of 8 B, then the receiver's 64 Irecvs and its Progress
// until all are done, then the sender's Progress (credits). ns/op is per
// message, both sides together.
func BenchmarkEagerWindow(b *testing.B) {
	devs := devJob(b, 2, map[string]string{"queue": "66"})
	snd, rcv := devs[0], devs[1]
	const win = 64
	data := make([]byte, 8)
	got := make([]byte, 8)
	sends := make([]adi.Request, win)
	recvs := make([]adi.Request, win)
	b.ResetTimer()
	for i := 0; i < b.N; i += win {
		for w := range sends {
			sends[w] = adi.Request{Op: adi.OpSend, Context: 3, Peer: 1, Tag: 5, Buf: adi.Bytes(data)}
			if err := snd.Isend(&sends[w]); err != nil {
				b.Fatal(err)
			}
		}
		for w := range recvs {
			recvs[w] = adi.Request{Op: adi.OpRecv, Context: 3, Peer: 0, Tag: 5, Buf: adi.Bytes(got)}
			if err := rcv.Irecv(&recvs[w]); err != nil {
				b.Fatal(err)
			}
		}
		for !recvs[win-1].Done() {
			if _, err := rcv.Progress(); err != nil {
				b.Fatal(err)
			}
		}
		for k := 0; k < 2; k++ {
			if _, err := snd.Progress(); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkIdleProgress is one Progress pass of the MPI device with
// nothing to do: the poll that a waiter repeats until its message lands,
// whose length bounds how soon it sees the message.
func BenchmarkIdleProgress(b *testing.B) {
	devs := devJob(b, 2, nil)
	for b.Loop() {
		if _, err := devs[0].Progress(); err != nil {
			b.Fatal(err)
		}
	}
}
