package via

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkDesign measures the NIC itself, in one process: an 8-byte send
// into a posted receive, completion found through the CQ, and a 1 MiB RDMA
// write (256 pages to translate), under each design option, with 2, 4, 6
// or 32 connected VIs on one CQ (D1 polls every VI's doorbell queue; CQ2
// polls every work queue of the CQ; 2-6 receive queues per CQ bracket the
// seed's Table 3, 2-6.5). Besides the wall time per operation (which includes
// the engine's futex wake-ups, i.e. scheduling noise) it reports the parts
// the seed compares: host time in posts, engine time per descriptor, and
// time per CQ check.
//
//	go test -run '^$' -bench Design ./devices/via
func BenchmarkDesign(b *testing.B) {
	type variant struct {
		name string
		set  func(*Options)
	}
	variants := []variant{
		{"default", func(*Options) {}},
		{"doorbell=d2", func(o *Options) { o.Doorbell = D2 }},
		{"cq=cq2", func(o *Options) { o.CQ = CQ2 }},
		{"desccache=off", func(o *Options) { o.DescCache = false }},
		{"at=at1", func(o *Options) { o.AT = AT1 }},
		{"at=at2", func(o *Options) { o.AT = AT2 }},
		{"at=at3,tlbsize=64", func(o *Options) { o.TLBSize = 64 }},
		{"at=at3,tlbsize=4096", func(o *Options) { o.TLBSize = 4096 }},
	}
	for _, vis := range []int{2, 4, 6, 32} {
		for _, v := range variants {
			o := DefaultOptions()
			o.Timers = true
			v.set(&o)
			b.Run(fmt.Sprintf("vis=%d/%s/send8B", vis, v.name), func(b *testing.B) { benchSend(b, o, vis) })
			b.Run(fmt.Sprintf("vis=%d/%s/rdma1MiB", vis, v.name), func(b *testing.B) { benchRDMA(b, o, vis) })
		}
	}
}

// nicPair opens a NIC with vis VIs connected in pairs (loopback), all on
// one CQ; the first pair carries the traffic.
func nicPair(b *testing.B, o Options, vis int) (*NIC, *VI, *VI, *CQ) {
	n, err := OpenNIC(o)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { n.Close() })
	cq, _ := n.CreateCQ()
	all := make([]*VI, vis)
	for i := range all {
		if all[i], err = n.CreateVI(cq, cq); err != nil {
			b.Fatal(err)
		}
	}
	for i := 0; i < vis; i += 2 {
		all[i].Connect(n.Address(), i+1)
		all[i+1].Connect(n.Address(), i)
	}
	return n, all[0], all[1], cq
}

func takeCQ(b *testing.B, cq *CQ, want int) {
	for got := 0; got < want; {
		vi, recv, err := cq.Wait(10 * time.Second)
		if err != nil {
			b.Fatal(err)
		}
		var d *Descriptor
		if recv {
			d = vi.RecvDone()
		} else {
			d = vi.SendDone()
		}
		if d == nil || d.Err() != nil {
			b.Fatalf("completion %v", d)
		}
		got++
	}
}

func benchSend(b *testing.B, o Options, vis int) {
	n, a, c, cq := nicPair(b, o, vis)
	src, dst := make([]byte, 8), make([]byte, 64)
	hs, _ := n.RegisterMem(src)
	hd, _ := n.RegisterMem(dst)
	r := &Descriptor{DS: []DataSegment{Seg(hd, dst)}}
	s := &Descriptor{Control: OpSend, DS: []DataSegment{Seg(hs, src)}}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := c.PostRecv(r); err != nil {
			b.Fatal(err)
		}
		if err := a.PostSend(s); err != nil {
			b.Fatal(err)
		}
		takeCQ(b, cq, 2)
	}
	b.StopTimer()
	report(b, n)
}

func benchRDMA(b *testing.B, o Options, vis int) {
	n, a, _, cq := nicPair(b, o, vis)
	src, dst := make([]byte, 1<<20), make([]byte, 1<<20)
	hs, _ := n.RegisterMem(src)
	hd, _ := n.RegisterMem(dst)
	w := &Descriptor{Control: OpRDMAWrite, RemoteHandle: hd, RemoteAddr: Addr(dst), DS: []DataSegment{Seg(hs, src)}}
	b.SetBytes(1 << 20)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := a.PostSend(w); err != nil {
			b.Fatal(err)
		}
		takeCQ(b, cq, 1)
	}
	b.StopTimer()
	report(b, n)
}

func report(b *testing.B, n *NIC) {
	c := n.Counters()
	if h, m := c["tlb_hits"], c["tlb_misses"]; h+m > 0 {
		b.ReportMetric(float64(h)/float64(h+m), "tlb-hit-rate")
	}
	b.ReportMetric(float64(c["nic_kernel_crossings"])/float64(b.N), "syscalls/op")
	b.ReportMetric(float64(c["nic_desc_fetches"])/float64(b.N), "fetches/op")
	b.ReportMetric(float64(c["host_post_ns"])/float64(b.N), "post-ns/op")
	b.ReportMetric(float64(c["nic_exec_ns"])/float64(b.N), "nic-ns/op")
	if k := c["cq_done_calls"]; k > 0 {
		b.ReportMetric(float64(c["cq_done_ns"])/float64(k), "ns/cq-check")
	}
}
