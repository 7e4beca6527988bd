package fm

import (
	"fmt"
	"testing"

	"github.com/adimpi/adimpi/adi"
	"github.com/adimpi/adimpi/datatype"
)

// BenchmarkSelfStream is the device's CPU cost per byte for 1 MiB messages
// to itself, contiguous and strided (a Vector of blocks with stride
// 2×block, the VIRTUS pattern): both copies, no second process and no
// scheduling in the way. The strided/contiguous ratio of MB/s is the
// per-block overhead of walking the datatype. "packets": eager, one
// SendPiece per block into 1.5 KiB packets and one Receive per block out;
// "bulk": rendezvous, the data through the bulk lane's 64 KiB chunks, one
// copy call per block on either side.
func BenchmarkSelfStream(b *testing.B) {
	for _, path := range []string{"packets", "bulk"} {
		b.Run(path, func(b *testing.B) { benchSelfStream(b, path) })
	}
}

func benchSelfStream(b *testing.B, path string) {
	const total = 1 << 20
	opts := map[string]string{"rndv": fmt.Sprint(total)}
	if path == "bulk" {
		opts["rndv"] = "0"
	}
	d := new(Device)
	if err := d.Init(adi.Config{Rank: 0, Size: 1, KVS: memKVS{}, Options: opts}); err != nil {
		b.Fatal(err)
	}
	defer d.Finalize()
	run := func(b *testing.B, sb, rb adi.Buffer) {
		b.SetBytes(total)
		for i := 0; i < b.N; i++ {
			r := &adi.Request{Op: adi.OpRecv, Context: 4, Peer: 0, Tag: 1, Buf: rb}
			s := &adi.Request{Op: adi.OpSend, Context: 4, Peer: 0, Tag: 1, Buf: sb}
			d.Irecv(r)
			d.Isend(s)
			for !(r.Done() && s.Done()) {
				if _, err := d.Progress(); err != nil {
					b.Fatal(err)
				}
			}
			if r.Status.Err != nil || r.Status.Bytes != total {
				b.Fatalf("status %+v", r.Status)
			}
		}
	}
	b.Run("contig", func(b *testing.B) {
		run(b, adi.Bytes(make([]byte, total)), adi.Bytes(make([]byte, total)))
	})
	for _, block := range []int{128, 1024, 4096, 8192} {
		vt, _ := datatype.Vector(total/block, block, 2*block, datatype.Byte)
		vt.Commit()
		b.Run(fmt.Sprintf("strided-%d", block), func(b *testing.B) {
			run(b, adi.Buffer{Mem: make([]byte, vt.Span(1)), Count: 1, Type: vt}, adi.Buffer{Mem: make([]byte, vt.Span(1)), Count: 1, Type: vt})
		})
	}
}

// BenchmarkDeviceSelf8B is the device's own cost of one 8-byte eager
// message to itself (Irecv, Isend, Progress until both complete), to set
// against the core's BenchmarkSelfSendRecv8B in package mpi run with
// ADIMPI_DEVICE=fm: the difference is the MPI core's share.
func BenchmarkDeviceSelf8B(b *testing.B) {
	d := new(Device)
	if err := d.Init(adi.Config{Rank: 0, Size: 1, KVS: memKVS{}}); err != nil {
		b.Fatal(err)
	}
	defer d.Finalize()
	out, in := make([]byte, 8), make([]byte, 8)
	var r, s adi.Request
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		r = adi.Request{Op: adi.OpRecv, Context: 4, Peer: 0, Tag: 1, Buf: adi.Bytes(in)}
		s = adi.Request{Op: adi.OpSend, Context: 4, Peer: 0, Tag: 1, Buf: adi.Bytes(out)}
		d.Irecv(&r)
		d.Isend(&s)
		for !r.Done() {
			d.Progress()
		}
	}
}

// BenchmarkRawSelf0B is raw FM's own cost of one empty message to itself
// (BeginMessage, EndMessage, Extract running the handler), the floor under
// BenchmarkDeviceSelf8B: the difference is what the MPI layer adds.
func BenchmarkRawSelf0B(b *testing.B) {
	e, err := New(Config{Rank: 0, Size: 1, KVS: memKVS{}})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Release()
	got := 0
	e.SetHandler(1, func(e *Endpoint, s *Stream) { got++ })
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		s, err := e.BeginMessage(0, 0, 1)
		if err != nil {
			b.Fatal(err)
		}
		if err := e.EndMessage(s); err != nil {
			b.Fatal(err)
		}
		for got <= i {
			if _, err := e.Extract(); err != nil {
				b.Fatal(err)
			}
		}
	}
}
