// Command viaping exercises the VIA API across processes without MPI: run
// it under mpirun (any -np). Every rank connects one VI to every rank
// (itself included), sends a message with immediate data around a ring,
// exchanges registered-window addresses, RDMA-writes its rank into every
// peer's window (the last write with immediate data, which consumes a
// receive descriptor there), and RDMA-reads the windows back. It prints
// "viaping ok" on rank 0 when every rank passed.
package main

import (
	"encoding/binary"
	"fmt"
	"os"
	"time"

	"github.com/adimpi/adimpi/devices/via"
)

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "viaping: "+format+"\n", args...)
	os.Exit(1)
}

func must(err error, what string) {
	if err != nil {
		fail("%s: %v", what, err)
	}
}

func main() {
	job, err := via.Open(nil)
	must(err, "Open")
	nic, rank, size := job.NIC, job.Rank, job.Size
	cq, err := nic.CreateCQ()
	must(err, "CreateCQ")
	vis := make([]*via.VI, size)
	for r := range vis {
		vis[r], err = nic.CreateVI(nil, cq)
		must(err, "CreateVI")
	}
	for r, vi := range vis {
		must(job.Connect(vi, r, rank), fmt.Sprintf("Connect to rank %d", r))
	}
	const msgLen = 64
	inbox := make([]byte, size*msgLen)
	outbox := make([]byte, size*msgLen)
	hin, err := nic.RegisterMem(inbox)
	must(err, "RegisterMem")
	hout, err := nic.RegisterMem(outbox)
	must(err, "RegisterMem")
	recvs := make([]*via.Descriptor, size)
	for r, vi := range vis {
		recvs[r] = &via.Descriptor{DS: []via.DataSegment{via.Seg(hin, inbox[r*msgLen:(r+1)*msgLen])}}
		must(vi.PostRecv(recvs[r]), "PostRecv")
	}
	must(job.Barrier(), "Barrier") // every receive is posted

	// 1. Send/receive with immediate data to the right neighbour; the
	// window's address travels in the message.
	window := make([]byte, size*8)
	hw, err := nic.RegisterMem(window)
	must(err, "RegisterMem window")
	right, left := (rank+1)%size, (rank+size-1)%size
	msg := outbox[right*msgLen : right*msgLen+20]
	binary.LittleEndian.PutUint64(msg, via.Addr(window))
	binary.LittleEndian.PutUint32(msg[8:], uint32(hw))
	copy(msg[12:], "from")
	must(vis[right].PostSend(&via.Descriptor{Control: via.OpSend | via.FlagImmediate, Imm: uint32(1000 + rank), DS: []via.DataSegment{via.Seg(hout, msg)}}), "PostSend")
	got := 0
	for got < 2 { // our send's completion is not on the CQ; the receive is
		vi, isRecv, err := cq.Wait(30 * time.Second)
		must(err, "CQ wait")
		if vi != vis[left] || !isRecv {
			fail("CQ reported VI %d (recv %v), want the receive queue of VI %d", vi.ID(), isRecv, left)
		}
		d := vi.RecvDone()
		if d != recvs[left] || d.Length != 20 || d.Imm != uint32(1000+left) || d.Err() != nil {
			fail("receive from %d: length %d imm %d err %v", left, d.Length, d.Imm, d.Err())
		}
		got = 2
	}
	_, err = vis[right].SendWait(30 * time.Second)
	must(err, "SendWait")
	in := inbox[left*msgLen:]
	leftAddr, leftH := binary.LittleEndian.Uint64(in), via.MemHandle(binary.LittleEndian.Uint32(in[8:]))

	// 2. RDMA write with immediate data into the left neighbour's window,
	// slot rank; it consumes the receive descriptor posted for us there.
	must(vis[left].PostRecv(recvs[left]), "PostRecv again")
	must(job.Barrier(), "Barrier")
	val := outbox[:8]
	binary.LittleEndian.PutUint64(val, uint64(rank*7+1))
	w := &via.Descriptor{Control: via.OpRDMAWrite | via.FlagImmediate, Imm: 77, RemoteHandle: leftH, RemoteAddr: leftAddr + uint64(rank*8), DS: []via.DataSegment{via.Seg(hout, val)}}
	must(vis[left].PostSend(w), "PostSend RDMA write")
	d, err := vis[left].SendWait(30 * time.Second)
	must(err, "SendWait RDMA write")
	must(d.Err(), "RDMA write")
	rd, err := vis[right].RecvWait(30 * time.Second)
	must(err, "RecvWait (RDMA write with immediate)")
	if rd.Imm != 77 || rd.Length != 8 {
		fail("RDMA write with immediate: imm %d length %d", rd.Imm, rd.Length)
	}
	if v := binary.LittleEndian.Uint64(window[right*8:]); v != uint64(right*7+1) {
		fail("window slot %d = %d, want %d", right, v, right*7+1)
	}

	// 3. RDMA read of that slot back from the left neighbour.
	back := outbox[8:16]
	r := &via.Descriptor{Control: via.OpRDMARead, RemoteHandle: leftH, RemoteAddr: leftAddr + uint64(rank*8), DS: []via.DataSegment{via.Seg(hout, back)}}
	must(vis[left].PostSend(r), "PostSend RDMA read")
	d, err = vis[left].SendWait(30 * time.Second)
	must(err, "SendWait RDMA read")
	if d.Err() != nil || binary.LittleEndian.Uint64(back) != uint64(rank*7+1) {
		fail("RDMA read: %v, got %d", d.Err(), binary.LittleEndian.Uint64(back))
	}

	// 4. An RDMA write outside the peer's registered window fails at the NIC.
	bad := &via.Descriptor{Control: via.OpRDMAWrite, RemoteHandle: leftH, RemoteAddr: leftAddr + uint64(size*8), DS: []via.DataSegment{via.Seg(hout, val)}}
	must(vis[left].PostSend(bad), "PostSend bad RDMA write")
	d, err = vis[left].SendWait(30 * time.Second)
	must(err, "SendWait bad RDMA write")
	if d.Err() == nil {
		fail("an RDMA write past the peer's registered region succeeded")
	}
	// 5. A descriptor naming unregistered memory is refused at post time.
	if err := vis[left].PostSend(&via.Descriptor{Control: via.OpSend, DS: []via.DataSegment{via.Seg(hout, make([]byte, 8))}}); err == nil {
		fail("a send from unregistered memory was accepted")
	}
	c := nic.Counters()
	must(job.Close(), "Close")
	if rank == 0 {
		fmt.Printf("viaping ok np=%d %s tlb hits %d misses %d\n", size, nic.Options(), c["tlb_hits"], c["tlb_misses"])
	}
}
