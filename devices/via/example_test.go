package via_test

import (
	"fmt"
	"time"

	"github.com/adimpi/adimpi/devices/via"
)

// Two VIs of one NIC connected to each other (loopback): a send with
// immediate data into a posted receive, an RDMA write and an RDMA read,
// completions found through a completion queue.
func Example() {
	nic, err := via.OpenNIC(via.DefaultOptions())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer nic.Close()
	cq, _ := nic.CreateCQ()
	a, _ := nic.CreateVI(nil, cq)
	b, _ := nic.CreateVI(nil, cq)
	if err := a.Connect(nic.Address(), b.ID()); err != nil {
		fmt.Println(err)
		return
	}
	_ = b.Connect(nic.Address(), a.ID())

	src := []byte("hello, VIA")
	dst := make([]byte, 64)
	hs, _ := nic.RegisterMem(src)
	hd, _ := nic.RegisterMem(dst)

	// b posts a receive descriptor: one scatter segment.
	recv := &via.Descriptor{DS: []via.DataSegment{via.Seg(hd, dst)}}
	if err := b.PostRecv(recv); err != nil {
		fmt.Println(err)
		return
	}
	// a sends with immediate data.
	send := &via.Descriptor{Control: via.OpSend | via.FlagImmediate, Imm: 42, DS: []via.DataSegment{via.Seg(hs, src)}}
	if err := a.PostSend(send); err != nil {
		fmt.Println(err)
		return
	}
	vi, isRecv, err := cq.Wait(time.Second)
	if err != nil || vi != b || !isRecv {
		fmt.Println("CQ:", vi == b, isRecv, err)
		return
	}
	got := b.RecvDone()
	fmt.Printf("received %q imm=%d err=%v\n", dst[:got.Length], got.Imm, got.Err())
	if _, err := a.SendWait(time.Second); err != nil {
		fmt.Println(err)
	}

	// RDMA write: a's bytes straight into b's registered buffer at offset 32.
	w := &via.Descriptor{Control: via.OpRDMAWrite, RemoteHandle: hd, RemoteAddr: via.Addr(dst[32:]), DS: []via.DataSegment{via.Seg(hs, src[:5])}}
	_ = a.PostSend(w)
	d, _ := a.SendWait(time.Second)
	fmt.Printf("rdma write: %q err=%v\n", dst[32:37], d.Err())

	// RDMA read: b's bytes back into a's buffer.
	r := &via.Descriptor{Control: via.OpRDMARead, RemoteHandle: hd, RemoteAddr: via.Addr(dst[7:]), DS: []via.DataSegment{via.Seg(hs, src[:3])}}
	_ = a.PostSend(r)
	d, _ = a.SendWait(time.Second)
	fmt.Printf("rdma read: %q err=%v\n", src, d.Err())

	// A descriptor may name registered memory only.
	other := make([]byte, 8)
	err = a.PostSend(&via.Descriptor{Control: via.OpSend, DS: []via.DataSegment{via.Seg(hs, other)}})
	fmt.Println(err != nil)
	// Output:
	// received "hello, VIA" imm=42 err=<nil>
	// rdma write: "hello" err=<nil>
	// rdma read: "VIAlo, VIA" err=<nil>
	// true
}
