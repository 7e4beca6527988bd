// Command p2p is adimpi's point-to-point conformance program: one MPI
// program holding many named checks of MPI point-to-point semantics
// (ordering, wildcards, truncation, send modes, probe, cancel, persistent
// requests, the Wait/Test families, error classes, ...).
//
//	mpirun -np 4 ./p2p order    # run one check
//	p2p -list                   # print the names of every check
//
// A check runs on any number of ranks ≥ 1. On success rank 0 prints exactly
// "PASS <check>" on standard output after MPI_Finalize (so every rank got
// there). A check that needs more ranks than it was given prints
// "UNSUPPORTED <check>: needs N ranks" and exits 0. On any failure a rank
// prints "FAIL <check>: rank R of N: <reason with values>" on standard error
// and exits 1.
//
// The check exit-early is meant to fail: its last rank exits with status 3
// right after MPI_Init while the others wait for a message from it.
package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"sync"
	"unsafe"

	"github.com/adimpi/adimpi/conformance/internal/runner"
	"github.com/adimpi/adimpi/datatype"
	"github.com/adimpi/adimpi/mpi"
)

// check is one named conformance check.
type check = runner.Check

var checks = []check{
	{Name: "order", MinRanks: 2, Run: checkOrder},
	{Name: "anysource", MinRanks: 2, Run: checkAnySource},
	{Name: "anytag", MinRanks: 2, Run: checkAnyTag},
	{Name: "truncate", MinRanks: 1, Run: checkTruncate},
	{Name: "zero", MinRanks: 1, Run: checkZero},
	{Name: "self", MinRanks: 1, Run: checkSelf},
	{Name: "procnull", MinRanks: 1, Run: checkProcNull},
	{Name: "ssend", MinRanks: 2, Run: checkSsend},
	{Name: "bsend", MinRanks: 2, Run: checkBsend},
	{Name: "rsend", MinRanks: 2, Run: checkRsend},
	{Name: "probe", MinRanks: 1, Run: checkProbe},
	{Name: "cancel", MinRanks: 1, Run: checkCancel},
	{Name: "persistent", MinRanks: 1, Run: checkPersistent},
	{Name: "waitany", MinRanks: 1, Run: checkWaitany},
	{Name: "alltoall", MinRanks: 1, Run: checkAlltoall},
	{Name: "errors", MinRanks: 1, Run: checkErrors},
	{Name: "exit-early", MinRanks: 1, Run: checkExitEarly},
	{Name: "many-pending", MinRanks: 1, Run: checkManyPending},
	{Name: "anysource-race", MinRanks: 2, Run: checkAnySourceRace},
}

var (
	unsupported string // set when the device refuses an operation the check needs
	world       *mpi.Comm
	rank, size  int
)

func main() {
	runner.Program{Name: "p2p", Checks: checks, Setup: setup,
		Unsupported: func() string { return unsupported }}.Main()
}

// setup runs before each check; a refusal belongs to the check it stopped.
func setup(w *mpi.Comm) { world, rank, size, unsupported = w, w.Rank(), w.Size(), "" }

// ---------------------------------------------------------------------------
// Failure reporting.

var (
	failf = runner.Failf
	must  = runner.Must
)

func mustSt(st mpi.Status, err error) func(format string, args ...any) mpi.Status {
	return func(format string, args ...any) mpi.Status {
		must(err, format, args...)
		return st
	}
}

func mustReq(q *mpi.Request, err error) func(format string, args ...any) *mpi.Request {
	return func(format string, args ...any) *mpi.Request {
		must(err, format, args...)
		return q
	}
}

func waitall(reqs []*mpi.Request, format string, args ...any) []mpi.Status {
	sts, err := mpi.Waitall(reqs)
	must(err, format, args...)
	return sts
}

// wantStatus checks a receive's source, tag and byte count.
func wantStatus(st mpi.Status, src, tag, nbytes int, what string) {
	if st.Source != src || st.Tag != tag || st.Bytes() != nbytes {
		failf("%s: status source=%d tag=%d bytes=%d, want source=%d tag=%d bytes=%d", what, st.Source, st.Tag, st.Bytes(), src, tag, nbytes)
	}
	if st.Cancelled {
		failf("%s: status says cancelled", what)
	}
	if st.Err != nil {
		failf("%s: status error %v", what, st.Err)
	}
}

// ---------------------------------------------------------------------------
// Deterministic payloads.

func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

func seedOf(vals ...int) uint64 {
	h := uint64(0x6a09e667f3bcc908)
	for _, v := range vals {
		h = mix(h ^ uint64(v))
	}
	return h
}

// fillBytes writes a pseudo-random pattern determined by seed.
func fillBytes(b []byte, seed uint64) {
	i := 0
	for ; i+8 <= len(b); i += 8 {
		binary.LittleEndian.PutUint64(b[i:], mix(seed+uint64(i)))
	}
	if i < len(b) {
		var w [8]byte
		binary.LittleEndian.PutUint64(w[:], mix(seed+uint64(i)))
		copy(b[i:], w[:])
	}
}

// badByte returns the index of the first byte of b that differs from
// fillBytes(b, seed), or -1.
func badByte(b []byte, seed uint64) int {
	var w [8]byte
	for i := 0; i < len(b); i += 8 {
		binary.LittleEndian.PutUint64(w[:], mix(seed+uint64(i)))
		end := min(i+8, len(b))
		if !bytes.Equal(b[i:end], w[:end-i]) {
			for j := i; j < end; j++ {
				if b[j] != w[j-i] {
					return j
				}
			}
		}
	}
	return -1
}

const hdrLen = 12

// makeMsg builds an n-byte message from src to dst with sequence number seq:
// seq (uint32) when n ≥ 4, src and dst too when n ≥ 12, then bytes that are a
// deterministic function of (src, dst, seq).
func makeMsg(src, dst, seq, n int) []byte {
	b := make([]byte, n)
	fillBytes(b, seedOf(src, dst, seq))
	if n >= 4 {
		binary.LittleEndian.PutUint32(b, uint32(seq))
	}
	if n >= hdrLen {
		binary.LittleEndian.PutUint32(b[4:], uint32(src))
		binary.LittleEndian.PutUint32(b[8:], uint32(dst))
	}
	return b
}

// msgSeq reads the sequence number of a message of at least 4 bytes.
func msgSeq(b []byte) int { return int(binary.LittleEndian.Uint32(b)) }

// msgSrc reads the sender of a message of at least 12 bytes.
func msgSrc(b []byte) int { return int(binary.LittleEndian.Uint32(b[4:])) }

// verifyMsg reports how b differs from makeMsg(src, dst, seq, len(b)), or "".
func verifyMsg(b []byte, src, dst, seq int) string {
	want := makeMsg(src, dst, seq, len(b))
	if bytes.Equal(b, want) {
		return ""
	}
	for i := range b {
		if b[i] != want[i] {
			return fmt.Sprintf("message (src %d, dst %d, seq %d, %d bytes) differs at byte %d: got %#02x, want %#02x", src, dst, seq, len(b), i, b[i], want[i])
		}
	}
	return ""
}

func mustMsg(b []byte, src, dst, seq int, what string) {
	if d := verifyMsg(b, src, dst, seq); d != "" {
		failf("%s: %s", what, d)
	}
}

func filled(n int, v byte) []byte { return bytes.Repeat([]byte{v}, n) }

func allEqual(b []byte, v byte) int {
	for i, x := range b {
		if x != v {
			return i
		}
	}
	return -1
}

func neighbours() (left, right int) { return (rank + size - 1) % size, (rank + 1) % size }

// ---------------------------------------------------------------------------
// order: non-overtaking per (source, tag, comm).

const orderTag = 7

var orderSizes = []int{8, 100 << 10, 8, 16 << 10, 16<<10 + 8, 100 << 10, 8, 64}

func orderLen(seq int) int { return orderSizes[seq%len(orderSizes)] }

// orderSend sends messages first..first+n-1 to dst, mixing Send, Isend, Ssend
// and Issend.
func orderSend(dst, first, n int) {
	var reqs []*mpi.Request
	for j := first; j < first+n; j++ {
		m := makeMsg(rank, dst, j, orderLen(j))
		switch j % 5 {
		case 0:
			must(mpi.Send(world, m, dst, orderTag), "MPI_Send seq %d to %d", j, dst)
		case 1, 4:
			reqs = append(reqs, mustReq(mpi.Isend(world, m, dst, orderTag))("MPI_Isend seq %d to %d", j, dst))
		case 2:
			must(mpi.Ssend(world, m, dst, orderTag), "MPI_Ssend seq %d to %d", j, dst)
		case 3:
			reqs = append(reqs, mustReq(mpi.Issend(world, m, dst, orderTag))("MPI_Issend seq %d to %d", j, dst))
		}
	}
	waitall(reqs, "MPI_Waitall on sends to %d", dst)
}

// orderRecv receives messages first..first+n-1 from src, mixing Recv and
// Irecv, and checks that they arrive in sequence.
func orderRecv(src, first, n int) {
	maxLen := 0
	for _, s := range orderSizes {
		maxLen = max(maxLen, s)
	}
	verify := func(st mpi.Status, buf []byte, want int, how string) {
		got := buf[:st.Bytes()]
		if st.Bytes() < 4 {
			failf("%s from %d: %d bytes, want seq %d of %d bytes", how, src, st.Bytes(), want, orderLen(want))
		}
		if seq := msgSeq(got); seq != want {
			failf("%s from %d: got seq %d (%d bytes), want seq %d (%d bytes): a message overtook another", how, src, seq, len(got), want, orderLen(want))
		}
		wantStatus(st, src, orderTag, orderLen(want), fmt.Sprintf("%s seq %d from %d", how, want, src))
		mustMsg(got, src, rank, want, how)
	}
	type pend struct {
		seq int
		buf []byte
	}
	var reqs []*mpi.Request
	var pends []pend
	for j := first; j < first+n; j++ {
		buf := make([]byte, maxLen)
		if j%3 == 0 {
			st := mustSt(mpi.Recv(world, buf, src, orderTag))("MPI_Recv seq %d from %d", j, src)
			verify(st, buf, j, "MPI_Recv")
			continue
		}
		reqs = append(reqs, mustReq(mpi.Irecv(world, buf, src, orderTag))("MPI_Irecv seq %d from %d", j, src))
		pends = append(pends, pend{j, buf})
	}
	sts := waitall(reqs, "MPI_Waitall on receives from %d", src)
	for i, p := range pends {
		verify(sts[i], p.buf, p.seq, "MPI_Irecv")
	}
}

// partner is rank r's partner in round k of a round-robin tournament of m
// (even) players.
func partner(r, k, m int) int {
	if r == m-1 {
		return k
	}
	if r == k {
		return m - 1
	}
	return ((2*k-r)%(m-1) + (m - 1)) % (m - 1)
}

func checkOrder() {
	n := max(24, 240/(size-1))
	// Phase A, single-threaded: pairs from a round-robin schedule; the lower
	// rank sends first, the higher receives first.
	m := size + size%2
	for k := 0; k < m-1; k++ {
		p := partner(rank, k, m)
		if p >= size {
			continue
		}
		if rank < p {
			orderSend(p, 0, n)
			orderRecv(p, 0, n)
		} else {
			orderRecv(p, 0, n)
			orderSend(p, 0, n)
		}
	}
	// Phase B: every rank sends to and receives from every other at once,
	// one goroutine per peer and direction; sequence numbers go on from
	// phase A on the same tag.
	var wg sync.WaitGroup
	for p := 0; p < size; p++ {
		if p == rank {
			continue
		}
		wg.Add(2)
		go func() { defer wg.Done(); orderSend(p, n, n) }()
		go func() { defer wg.Done(); orderRecv(p, n, n) }()
	}
	wg.Wait()
}

// ---------------------------------------------------------------------------
// anysource: rank 0 receives from everyone with MPI_ANY_SOURCE.

func asLen(src, seq int) int {
	if seq%5 == 4 {
		return 30000 + src
	}
	return 16 + (seq%3)*8
}

func checkAnySource() {
	const tag = 9
	n := max(50, 1500/(size-1))
	if rank != 0 {
		var reqs []*mpi.Request
		for j := 0; j < n; j++ {
			m := makeMsg(rank, 0, j, asLen(rank, j))
			switch j % 3 {
			case 0:
				must(mpi.Send(world, m, 0, tag), "MPI_Send seq %d", j)
			case 1:
				reqs = append(reqs, mustReq(mpi.Isend(world, m, 0, tag))("MPI_Isend seq %d", j))
			case 2:
				must(mpi.Ssend(world, m, 0, tag), "MPI_Ssend seq %d", j)
			}
		}
		waitall(reqs, "MPI_Waitall")
		return
	}
	next := make([]int, size)
	got := func(st mpi.Status, buf []byte, how string) {
		if st.Source < 1 || st.Source >= size {
			failf("%s: status source %d out of [1, %d)", how, st.Source, size)
		}
		if st.Bytes() < hdrLen {
			failf("%s: %d bytes from %d, too short", how, st.Bytes(), st.Source)
		}
		b := buf[:st.Bytes()]
		src, seq := msgSrc(b), msgSeq(b)
		if src != st.Source {
			failf("%s: status.Source = %d but the message was sent by %d (seq %d)", how, st.Source, src, seq)
		}
		if seq != next[src] {
			failf("%s: from %d got seq %d, want %d (duplicate, loss or overtaking)", how, src, seq, next[src])
		}
		wantStatus(st, src, tag, asLen(src, seq), how)
		mustMsg(b, src, 0, seq, how)
		next[src]++
	}
	total := n * (size - 1)
	maxLen := 30000 + size
	for i := 0; i < total; {
		if (i/8)%2 == 0 {
			w := min(8, total-i)
			reqs := make([]*mpi.Request, w)
			bufs := make([][]byte, w)
			for k := range reqs {
				bufs[k] = make([]byte, maxLen)
				reqs[k] = mustReq(mpi.Irecv(world, bufs[k], mpi.AnySource, tag))("MPI_Irecv(ANY_SOURCE) #%d", i+k)
			}
			sts := waitall(reqs, "MPI_Waitall")
			for k := range reqs {
				got(sts[k], bufs[k], fmt.Sprintf("MPI_Irecv(ANY_SOURCE) #%d", i+k))
			}
			i += w
			continue
		}
		buf := make([]byte, maxLen)
		st := mustSt(mpi.Recv(world, buf, mpi.AnySource, tag))("MPI_Recv(ANY_SOURCE) #%d", i)
		got(st, buf, fmt.Sprintf("MPI_Recv(ANY_SOURCE) #%d", i))
		i++
	}
	for src := 1; src < size; src++ {
		if next[src] != n {
			failf("received %d messages from %d, want %d", next[src], src, n)
		}
	}
}

// ---------------------------------------------------------------------------
// anytag: MPI_ANY_TAG receives, alone and with MPI_ANY_SOURCE.

func checkAnyTag() {
	// Part 1: rank 1 sends M messages with distinct, unordered tags; rank 0
	// first takes the last one by its tag, then the rest with ANY_TAG, which
	// must come in send order.
	const M = 40
	tag1 := func(j int) int { return 1 + (j*37)%200 }
	len1 := func(j int) int {
		if j%4 == 3 {
			return 40000
		}
		return hdrLen + j
	}
	switch rank {
	case 1:
		reqs := make([]*mpi.Request, M)
		for j := range reqs {
			reqs[j] = mustReq(mpi.Isend(world, makeMsg(1, 0, j, len1(j)), 0, tag1(j)))("MPI_Isend #%d", j)
		}
		waitall(reqs, "MPI_Waitall")
	case 0:
		buf := make([]byte, 40000)
		st := mustSt(mpi.Recv(world, buf, 1, tag1(M-1)))("MPI_Recv(1, tag %d)", tag1(M-1))
		wantStatus(st, 1, tag1(M-1), len1(M-1), "MPI_Recv by tag")
		mustMsg(buf[:st.Bytes()], 1, 0, M-1, "MPI_Recv by tag")
		for j := 0; j < M-1; j++ {
			buf := make([]byte, 40000)
			var st mpi.Status
			if j%2 == 0 {
				st = mustSt(mpi.Recv(world, buf, 1, mpi.AnyTag))("MPI_Recv(1, ANY_TAG) #%d", j)
			} else {
				q := mustReq(mpi.Irecv(world, buf, 1, mpi.AnyTag))("MPI_Irecv(1, ANY_TAG) #%d", j)
				st = mustSt(q.Wait())("MPI_Wait(1, ANY_TAG) #%d", j)
			}
			if st.Bytes() < 4 || msgSeq(buf) != j {
				failf("ANY_TAG receive #%d from 1: got %d bytes, seq %d (tag %d), want seq %d (tag %d)", j, st.Bytes(), msgSeq(buf), st.Tag, j, tag1(j))
			}
			wantStatus(st, 1, tag1(j), len1(j), fmt.Sprintf("ANY_TAG receive #%d", j))
			mustMsg(buf[:st.Bytes()], 1, 0, j, "ANY_TAG receive")
		}
	}
	// Part 2: every rank ≥ 1 sends to rank 0, which receives with both
	// wildcards.
	const M2 = 20
	tag2 := func(src, j int) int { return 1 + (src*13+j*7)%300 }
	len2 := func(src, j int) int {
		if (src+j)%6 == 0 {
			return 20000
		}
		return hdrLen + 4*j
	}
	if rank != 0 {
		var reqs []*mpi.Request
		for j := 0; j < M2; j++ {
			m := makeMsg(rank, 0, j, len2(rank, j))
			if j%2 == 0 {
				must(mpi.Send(world, m, 0, tag2(rank, j)), "MPI_Send #%d", j)
			} else {
				reqs = append(reqs, mustReq(mpi.Isend(world, m, 0, tag2(rank, j)))("MPI_Isend #%d", j))
			}
		}
		waitall(reqs, "MPI_Waitall")
		return
	}
	next := make([]int, size)
	for i := 0; i < M2*(size-1); i++ {
		buf := make([]byte, 20000)
		st := mustSt(mpi.Recv(world, buf, mpi.AnySource, mpi.AnyTag))("MPI_Recv(ANY_SOURCE, ANY_TAG) #%d", i)
		if st.Bytes() < hdrLen {
			failf("MPI_Recv(ANY_SOURCE, ANY_TAG) #%d: %d bytes from %d tag %d", i, st.Bytes(), st.Source, st.Tag)
		}
		src, seq := msgSrc(buf), msgSeq(buf)
		if src < 1 || src >= size || src != st.Source || seq != next[src] {
			failf("MPI_Recv(ANY_SOURCE, ANY_TAG) #%d: status source %d tag %d, message from %d seq %d; want seq %d from that sender", i, st.Source, st.Tag, src, seq, next[max(0, min(src, size-1))])
		}
		wantStatus(st, src, tag2(src, seq), len2(src, seq), "MPI_Recv(ANY_SOURCE, ANY_TAG)")
		mustMsg(buf[:st.Bytes()], src, 0, seq, "MPI_Recv(ANY_SOURCE, ANY_TAG)")
		next[src]++
	}
}

// ---------------------------------------------------------------------------
// truncate: a receive buffer too small for the message.

func checkTruncate() {
	sender, receiver := 0, 1%size
	const sentinel = -7.25
	const big = 64 << 10
	floats := func(tag int) []float64 {
		f := make([]float64, 100)
		for i := range f {
			f[i] = float64(i)*1.5 + float64(1000*tag)
		}
		return f
	}
	wantTrunc := func(st mpi.Status, err error, tag, nbytes int, what string) {
		if !errors.Is(err, mpi.ErrTruncate) {
			failf("%s: error %v, want MPI_ERR_TRUNCATE", what, err)
		}
		if !errors.Is(st.Err, mpi.ErrTruncate) {
			failf("%s: status.Err %v, want MPI_ERR_TRUNCATE", what, st.Err)
		}
		if st.Source != sender || st.Tag != tag {
			failf("%s: status source %d tag %d, want %d and %d", what, st.Source, st.Tag, sender, tag)
		}
		if st.Bytes() > nbytes {
			failf("%s: status says %d bytes received into a %d-byte buffer", what, st.Bytes(), nbytes)
		}
	}
	// The first 10 elements hold the message's first 10; the guard elements
	// after the receive buffer (fb[:10] of a longer slice) are untouched.
	checkFloats := func(b []float64, tag int, what string) {
		want := floats(tag)
		for i := 0; i < 10; i++ {
			if b[i] != want[i] {
				failf("%s: element %d = %v, want %v", what, i, b[i], want[i])
			}
		}
		for i := 10; i < len(b); i++ {
			if b[i] != sentinel {
				failf("%s: guard element %d after the 10-element receive buffer was overwritten: %v", what, i, b[i])
			}
		}
	}
	guarded := func() []float64 {
		fb := make([]float64, 40)
		for i := range fb {
			fb[i] = sentinel
		}
		return fb
	}
	checkGuard := func(bb []byte, what string) {
		if i := allEqual(bb[1024:], 0xEE); i >= 0 {
			failf("%s: guard byte %d after the 1 KiB receive buffer was overwritten (%#02x)", what, 1024+i, bb[1024+i])
		}
		mustMsg(bb[:1024], sender, receiver, 0, what+": the first 1 KiB")
	}
	msg := func() []byte { return makeMsg(sender, receiver, 0, big) }

	// Step 1 (sender): messages that will be unexpected at the receiver,
	// then a marker behind them.
	var sreqs []*mpi.Request
	if rank == sender {
		sreqs = append(sreqs,
			mustReq(mpi.Isend(world, floats(20), receiver, 20))("MPI_Isend tag 20"),
			mustReq(mpi.Isend(world, msg(), receiver, 21))("MPI_Isend tag 21"),
			mustReq(mpi.Isend(world, []byte{1}, receiver, 29))("MPI_Isend marker"))
	}
	// Step 2 (receiver): once the marker is in, 20 and 21 have arrived
	// unmatched; receive them truncated.
	var goReq *mpi.Request
	var fb2, fb5 []float64
	var bb3 []byte
	var r22, r23 *mpi.Request
	if rank == receiver {
		mustSt(mpi.Recv(world, make([]byte, 1), sender, 29))("MPI_Recv marker")
		fb := guarded()
		st, err := mpi.Recv(world, fb[:10], sender, 20)
		wantTrunc(st, err, 20, 80, "MPI_Recv of an arrived 100 float64 into 10")
		checkFloats(fb, 20, "MPI_Recv of an arrived 100 float64 into 10")
		bb := filled(4096, 0xEE)
		st, err = mpi.Recv(world, bb[:1024], sender, 21)
		wantTrunc(st, err, 21, 1024, "MPI_Recv of an arrived 64 KiB into 1 KiB")
		checkGuard(bb, "MPI_Recv of an arrived 64 KiB into 1 KiB")
		// Step 3: receives posted before their messages are sent.
		fb2, bb3 = guarded(), filled(4096, 0xEE)
		r22 = mustReq(mpi.Irecv(world, fb2[:10], sender, 22))("MPI_Irecv tag 22")
		r23 = mustReq(mpi.Irecv(world, bb3[:1024], mpi.AnySource, 23))("MPI_Irecv(ANY_SOURCE) tag 23")
		goReq = mustReq(mpi.Isend(world, []byte("go"), sender, 28))("MPI_Isend go")
	}
	// Step 4 (sender): the messages for the posted receives.
	if rank == sender {
		mustSt(mpi.Recv(world, make([]byte, 2), receiver, 28))("MPI_Recv go")
		sreqs = append(sreqs,
			mustReq(mpi.Isend(world, floats(22), receiver, 22))("MPI_Isend tag 22"),
			mustReq(mpi.Isend(world, msg(), receiver, 23))("MPI_Isend tag 23"),
			mustReq(mpi.Isend(world, makeMsg(sender, receiver, 24, big), receiver, 24))("MPI_Isend tag 24"),
			mustReq(mpi.Isend(world, floats(25), receiver, 25))("MPI_Isend tag 25"))
	}
	// Step 5 (receiver).
	if rank == receiver {
		st, err := r22.Wait()
		wantTrunc(st, err, 22, 80, "MPI_Irecv+MPI_Wait of 100 float64 into 10")
		checkFloats(fb2, 22, "MPI_Irecv+MPI_Wait of 100 float64 into 10")
		st, err = r23.Wait()
		wantTrunc(st, err, 23, 1024, "MPI_Irecv(ANY_SOURCE)+MPI_Wait of 64 KiB into 1 KiB")
		checkGuard(bb3, "MPI_Irecv(ANY_SOURCE)+MPI_Wait of 64 KiB into 1 KiB")
		// The job goes on: the next message on the same pair is intact.
		full := make([]byte, big+100)
		st = mustSt(mpi.Recv(world, full, sender, 24))("MPI_Recv tag 24 after truncations")
		wantStatus(st, sender, 24, big, "MPI_Recv tag 24 after truncations")
		mustMsg(full[:big], sender, receiver, 24, "MPI_Recv tag 24 after truncations")
		// Waitall reports a truncated receive as MPI_ERR_IN_STATUS.
		fb5 = guarded()
		q := mustReq(mpi.Irecv(world, fb5[:10], sender, 25))("MPI_Irecv tag 25")
		sts, err := mpi.Waitall([]*mpi.Request{q})
		if !errors.Is(err, mpi.ErrInStatus) || !errors.Is(sts[0].Err, mpi.ErrTruncate) {
			failf("MPI_Waitall on a truncated receive: error %v, status.Err %v; want MPI_ERR_IN_STATUS and MPI_ERR_TRUNCATE", err, sts[0].Err)
		}
		checkFloats(fb5, 25, "MPI_Waitall of 100 float64 into 10")
		mustSt(goReq.Wait())("MPI_Wait go")
	}
	// Step 6 (sender): truncation is the receiver's error; the sends succeed.
	if rank == sender {
		waitall(sreqs, "MPI_Waitall on the sends of truncated messages")
	}
}

// ---------------------------------------------------------------------------
// zero: zero-length messages.

func checkZero() {
	sender, receiver := 0, 1%size
	var sreqs []*mpi.Request
	if rank == sender {
		sreqs = append(sreqs,
			mustReq(mpi.Isend(world, []float64(nil), receiver, 30))("MPI_Isend nil"),
			mustReq(mpi.Isend(world, []float64{}, receiver, 31))("MPI_Isend empty"),
			mustReq(mpi.Isend(world, []byte(nil), receiver, 32))("MPI_Isend nil bytes"),
			mustReq(mpi.Isend(world, []int32{}, receiver, 33))("MPI_Isend empty int32"),
		)
		if sender != receiver {
			must(mpi.Ssend(world, []byte(nil), receiver, 34), "MPI_Ssend of 0 bytes")
		} else {
			sreqs = append(sreqs, mustReq(mpi.Issend(world, []byte(nil), receiver, 34))("MPI_Issend of 0 bytes"))
		}
		sreqs = append(sreqs, mustReq(mpi.IsendBuf(world, mpi.Typed(nil, 0, datatype.Byte), receiver, 35))("MPI_Isend Typed(nil, 0)"))
	}
	if rank == receiver {
		zero := func(st mpi.Status, tag int, what string) {
			wantStatus(st, sender, tag, 0, what)
			if c := st.Count(datatype.Float64); c != 0 {
				failf("%s: Count(float64) = %d, want 0", what, c)
			}
			if c := mpi.CountOf[byte](st); c != 0 {
				failf("%s: CountOf[byte] = %d, want 0", what, c)
			}
		}
		zero(mustSt(mpi.Recv(world, []float64(nil), sender, 30))("MPI_Recv into nil"), 30, "MPI_Recv into nil")
		zero(mustSt(mpi.Recv(world, []float64{}, sender, 31))("MPI_Recv into empty"), 31, "MPI_Recv into empty")
		b := filled(16, 0x5A)
		zero(mustSt(mpi.Recv(world, b, sender, 32))("MPI_Recv of 0 bytes into 16"), 32, "MPI_Recv of 0 bytes into 16")
		if i := allEqual(b, 0x5A); i >= 0 {
			failf("MPI_Recv of a 0-byte message wrote byte %d of the buffer", i)
		}
		zero(mustSt(mpi.Recv(world, []int32(nil), mpi.AnySource, mpi.AnyTag))("MPI_Recv(ANY_SOURCE, ANY_TAG) into nil"), 33, "MPI_Recv(ANY_SOURCE, ANY_TAG) of 0 bytes")
		zero(mustSt(mpi.Recv(world, []byte{}, sender, 34))("MPI_Recv of the Ssend"), 34, "MPI_Recv of a 0-byte Ssend")
		q := mustReq(mpi.Irecv(world, []byte(nil), sender, 35))("MPI_Irecv nil")
		zero(mustSt(q.Wait())("MPI_Wait on a 0-byte Irecv"), 35, "MPI_Irecv of 0 bytes")
	}
	if rank == sender {
		sts := waitall(sreqs, "MPI_Waitall on 0-byte sends")
		for i, st := range sts {
			if st.Err != nil || st.Cancelled {
				failf("0-byte send %d: status %+v", i, st)
			}
		}
	}
}

// ---------------------------------------------------------------------------
// self: messages to one's own rank.

func checkSelf() {
	for i, n := range []int{24, 1 << 20} {
		what := fmt.Sprintf("%d bytes", n)
		// Isend, then Recv.
		q := mustReq(mpi.Isend(world, makeMsg(rank, rank, 40+i, n), rank, 40))("MPI_Isend to self, %s", what)
		buf := make([]byte, n)
		st := mustSt(mpi.Recv(world, buf, rank, 40))("MPI_Recv from self, %s", what)
		wantStatus(st, rank, 40, n, "MPI_Recv from self")
		mustMsg(buf, rank, rank, 40+i, "Isend+Recv to self")
		mustSt(q.Wait())("MPI_Wait on Isend to self, %s", what)
		// Irecv posted first, then a blocking Send.
		buf = make([]byte, n)
		q = mustReq(mpi.Irecv(world, buf, mpi.AnySource, 41))("MPI_Irecv from self, %s", what)
		must(mpi.Send(world, makeMsg(rank, rank, 41+i, n), rank, 41), "MPI_Send to self with the receive posted, %s", what)
		st = mustSt(q.Wait())("MPI_Wait on Irecv from self, %s", what)
		wantStatus(st, rank, 41, n, "Irecv+Send to self")
		mustMsg(buf, rank, rank, 41+i, "Irecv+Send to self")
		// Sendrecv with itself.
		buf = make([]byte, n)
		st = mustSt(mpi.Sendrecv(world, makeMsg(rank, rank, 42+i, n), rank, 42, buf, rank, 42))("MPI_Sendrecv with self, %s", what)
		wantStatus(st, rank, 42, n, "MPI_Sendrecv with self")
		mustMsg(buf, rank, rank, 42+i, "MPI_Sendrecv with self")
		// Sendrecv_replace with itself.
		buf = makeMsg(rank, rank, 43+i, n)
		st = mustSt(mpi.SendrecvReplace(world, buf, rank, 43, rank, 43))("MPI_Sendrecv_replace with self, %s", what)
		wantStatus(st, rank, 43, n, "MPI_Sendrecv_replace with self")
		mustMsg(buf, rank, rank, 43+i, "MPI_Sendrecv_replace with self")
	}
	// MPI_COMM_SELF has its own context: a message sent on it does not match
	// a receive on MPI_COMM_WORLD with the same source and tag.
	self := mpi.Self()
	if self == nil || self.Size() != 1 || self.Rank() != 0 {
		failf("MPI_COMM_SELF: %v size %d rank %d", self, self.Size(), self.Rank())
	}
	qs := mustReq(mpi.Isend(self, makeMsg(rank, rank, 50, 32), 0, 44))("MPI_Isend on MPI_COMM_SELF")
	qw := mustReq(mpi.Isend(world, makeMsg(rank, rank, 51, 32), rank, 44))("MPI_Isend on MPI_COMM_WORLD")
	buf := make([]byte, 32)
	st := mustSt(mpi.Recv(world, buf, mpi.AnySource, 44))("MPI_Recv on MPI_COMM_WORLD")
	wantStatus(st, rank, 44, 32, "MPI_Recv on MPI_COMM_WORLD")
	mustMsg(buf, rank, rank, 51, "MPI_Recv on MPI_COMM_WORLD (must not take the MPI_COMM_SELF message)")
	st = mustSt(mpi.Recv(self, buf, mpi.AnySource, mpi.AnyTag))("MPI_Recv on MPI_COMM_SELF")
	wantStatus(st, 0, 44, 32, "MPI_Recv on MPI_COMM_SELF")
	mustMsg(buf, rank, rank, 50, "MPI_Recv on MPI_COMM_SELF")
	waitall([]*mpi.Request{qs, qw}, "MPI_Waitall")
}

// ---------------------------------------------------------------------------
// procnull: operations with MPI_PROC_NULL complete at once.

func checkProcNull() {
	buf := []int{5, 6, 7}
	untouched := func(what string) {
		if buf[0] != 5 || buf[1] != 6 || buf[2] != 7 {
			failf("%s wrote the buffer: %v", what, buf)
		}
	}
	nullStatus := func(st mpi.Status, what string) {
		if st.Source != mpi.ProcNull || st.Tag != mpi.AnyTag || st.Bytes() != 0 || mpi.CountOf[int](st) != 0 || st.Err != nil || st.Cancelled {
			failf("%s: status source=%d tag=%d bytes=%d count=%d err=%v cancelled=%v; want source=MPI_PROC_NULL (%d) tag=MPI_ANY_TAG (%d) count 0",
				what, st.Source, st.Tag, st.Bytes(), mpi.CountOf[int](st), st.Err, st.Cancelled, mpi.ProcNull, mpi.AnyTag)
		}
	}
	must(mpi.Send(world, buf, mpi.ProcNull, 1), "MPI_Send to MPI_PROC_NULL")
	must(mpi.Ssend(world, buf, mpi.ProcNull, 1), "MPI_Ssend to MPI_PROC_NULL")
	must(mpi.Rsend(world, buf, mpi.ProcNull, 1), "MPI_Rsend to MPI_PROC_NULL")
	st := mustSt(mpi.Recv(world, buf, mpi.ProcNull, 1))("MPI_Recv from MPI_PROC_NULL")
	nullStatus(st, "MPI_Recv from MPI_PROC_NULL")
	untouched("MPI_Recv from MPI_PROC_NULL")
	st = mustSt(mpi.Recv(world, buf, mpi.ProcNull, mpi.AnyTag))("MPI_Recv from MPI_PROC_NULL, ANY_TAG")
	nullStatus(st, "MPI_Recv from MPI_PROC_NULL, ANY_TAG")

	testNow := func(q *mpi.Request, what string) mpi.Status {
		st, done, err := q.Test()
		must(err, "%s: MPI_Test", what)
		if !done {
			failf("%s: the first MPI_Test says not complete", what)
		}
		if q.Active() {
			failf("%s: request still active after MPI_Test returned it", what)
		}
		return st
	}
	testNow(mustReq(mpi.Isend(world, buf, mpi.ProcNull, 2))("MPI_Isend to MPI_PROC_NULL"), "MPI_Isend to MPI_PROC_NULL")
	testNow(mustReq(mpi.Issend(world, buf, mpi.ProcNull, 2))("MPI_Issend to MPI_PROC_NULL"), "MPI_Issend to MPI_PROC_NULL")
	st = testNow(mustReq(mpi.Irecv(world, buf, mpi.ProcNull, 2))("MPI_Irecv from MPI_PROC_NULL"), "MPI_Irecv from MPI_PROC_NULL")
	nullStatus(st, "MPI_Irecv from MPI_PROC_NULL")
	untouched("MPI_Irecv from MPI_PROC_NULL")

	st = mustSt(mpi.Probe(world, mpi.ProcNull, mpi.AnyTag))("MPI_Probe(MPI_PROC_NULL)")
	nullStatus(st, "MPI_Probe(MPI_PROC_NULL)")
	st, ok, err := mpi.Iprobe(world, mpi.ProcNull, 3)
	must(err, "MPI_Iprobe(MPI_PROC_NULL)")
	if !ok {
		failf("MPI_Iprobe(MPI_PROC_NULL) returned flag false")
	}
	nullStatus(st, "MPI_Iprobe(MPI_PROC_NULL)")

	rb := []int{9, 9}
	st = mustSt(mpi.Sendrecv(world, buf, mpi.ProcNull, 4, rb, mpi.ProcNull, 4))("MPI_Sendrecv with MPI_PROC_NULL")
	nullStatus(st, "MPI_Sendrecv with MPI_PROC_NULL")
	if rb[0] != 9 || rb[1] != 9 {
		failf("MPI_Sendrecv from MPI_PROC_NULL wrote the receive buffer: %v", rb)
	}

	// Persistent requests with MPI_PROC_NULL.
	ps := mustReq(mpi.SendInit(world, buf, mpi.ProcNull, 5))("MPI_Send_init to MPI_PROC_NULL")
	pr := mustReq(mpi.RecvInit(world, buf, mpi.ProcNull, 5))("MPI_Recv_init from MPI_PROC_NULL")
	for round := 0; round < 3; round++ {
		must(mpi.Startall([]*mpi.Request{ps, pr}), "MPI_Startall round %d", round)
		sts := waitall([]*mpi.Request{ps, pr}, "MPI_Waitall round %d", round)
		nullStatus(sts[1], "persistent receive from MPI_PROC_NULL")
	}
	untouched("persistent receive from MPI_PROC_NULL")

	// MPI_PROC_NULL on a real exchange: a ring where the ends talk to PROC_NULL.
	left, right := rank-1, rank+1
	if left < 0 {
		left = mpi.ProcNull
	}
	if right >= size {
		right = mpi.ProcNull
	}
	out := []int{rank}
	in := []int{-99}
	st = mustSt(mpi.Sendrecv(world, out, right, 6, in, left, 6))("MPI_Sendrecv in an open chain")
	if left == mpi.ProcNull {
		nullStatus(st, "MPI_Sendrecv from MPI_PROC_NULL at the chain's start")
		if in[0] != -99 {
			failf("receive from MPI_PROC_NULL wrote %d", in[0])
		}
	} else if in[0] != left || st.Source != left {
		failf("MPI_Sendrecv in an open chain: got %d from %d, want %d", in[0], st.Source, left)
	}
}

// ---------------------------------------------------------------------------
// ssend: a synchronous send completes only once the receive has started.

func checkSsend() {
	for i, n := range []int{0, 64, 256 << 10} {
		switch rank {
		case 0:
			q := mustReq(mpi.Issend(world, makeMsg(0, 1, i, n), 1, 1))("MPI_Issend of %d bytes", n)
			for k := 0; k < 2000; k++ {
				_, done, err := q.Test()
				must(err, "MPI_Test #%d on MPI_Issend of %d bytes", k, n)
				if done {
					failf("MPI_Issend of %d bytes completed at MPI_Test #%d, before rank 1 posted its receive", n, k)
				}
			}
			must(mpi.Send(world, []byte("go"), 1, 2), "MPI_Send go")
			st := mustSt(q.Wait())("MPI_Wait on MPI_Issend of %d bytes", n)
			if st.Err != nil || st.Cancelled {
				failf("MPI_Issend of %d bytes: status %+v", n, st)
			}
		case 1:
			gobuf := make([]byte, 2)
			st := mustSt(mpi.Recv(world, gobuf, 0, 2))("MPI_Recv go")
			wantStatus(st, 0, 2, 2, "MPI_Recv go")
			buf := make([]byte, n)
			st = mustSt(mpi.Recv(world, buf, 0, 1))("MPI_Recv of the synchronous message, %d bytes", n)
			wantStatus(st, 0, 1, n, "MPI_Recv of the synchronous message")
			mustMsg(buf, 0, 1, i, "synchronous message")
		}
	}
	// Blocking Ssend against a receive posted late.
	for i, n := range []int{16, 100 << 10} {
		switch rank {
		case 0:
			must(mpi.Ssend(world, makeMsg(0, 1, 10+i, n), 1, 3), "MPI_Ssend of %d bytes", n)
		case 1:
			buf := make([]byte, n)
			st := mustSt(mpi.Recv(world, buf, 0, 3))("MPI_Recv of MPI_Ssend, %d bytes", n)
			wantStatus(st, 0, 3, n, "MPI_Recv of MPI_Ssend")
			mustMsg(buf, 0, 1, 10+i, "MPI_Ssend message")
		}
	}
}

// ---------------------------------------------------------------------------
// bsend: buffered sends.

func checkBsend() {
	sizes := []int{10, 1000, 40000, 0, 20000, 1, 300}
	switch rank {
	case 0:
		need := 0
		for _, n := range sizes {
			need += n + mpi.BsendOverhead
		}
		attached := make([]byte, need)
		must(mpi.BufferAttach(attached), "MPI_Buffer_attach of %d bytes", need)
		for i, n := range sizes {
			m := makeMsg(0, 1, i, n)
			if i == 4 {
				q := mustReq(mpi.Ibsend(world, m, 1, 50+i))("MPI_Ibsend of %d bytes", n)
				// Completes without the receiver: rank 1 posts nothing before "go".
				mustSt(q.Wait())("MPI_Wait on MPI_Ibsend of %d bytes", n)
			} else {
				must(mpi.Bsend(world, m, 1, 50+i), "MPI_Bsend #%d of %d bytes (attached %d)", i, n, need)
			}
			for j := range m {
				m[j] = 0xFF // the data must have been copied out already
			}
		}
		must(mpi.Send(world, []byte("go"), 1, 99), "MPI_Send go")
		got, err := mpi.BufferDetach()
		must(err, "MPI_Buffer_detach")
		if len(got) != len(attached) || unsafe.SliceData(got) != unsafe.SliceData(attached) {
			failf("MPI_Buffer_detach returned %d bytes at %p, want the attached %d bytes at %p", len(got), unsafe.SliceData(got), len(attached), unsafe.SliceData(attached))
		}
		// Too small a buffer.
		small := make([]byte, 100)
		must(mpi.BufferAttach(small), "MPI_Buffer_attach of 100 bytes")
		err = mpi.Bsend(world, make([]byte, 1000), 1, 60)
		if !errors.Is(err, mpi.ErrBuffer) || !strings.Contains(fmt.Sprint(err), "MPI_Bsend") {
			failf("MPI_Bsend of 1000 bytes with 100 bytes attached: error %v, want MPI_ERR_BUFFER from MPI_Bsend", err)
		}
		// One that fits still goes.
		must(mpi.Bsend(world, makeMsg(0, 1, 61, 30), 1, 61), "MPI_Bsend of 30 bytes with 100 bytes attached")
		got, err = mpi.BufferDetach()
		must(err, "MPI_Buffer_detach of the small buffer")
		if len(got) != 100 || unsafe.SliceData(got) != unsafe.SliceData(small) {
			failf("MPI_Buffer_detach returned %d bytes, not the attached 100", len(got))
		}
		// No buffer at all.
		err = mpi.Bsend(world, make([]byte, 10), 1, 62)
		if !errors.Is(err, mpi.ErrBuffer) {
			failf("MPI_Bsend with no buffer attached: error %v, want MPI_ERR_BUFFER", err)
		}
		q, err := mpi.Ibsend(world, make([]byte, 10), 1, 62)
		if !errors.Is(err, mpi.ErrBuffer) || q != nil {
			failf("MPI_Ibsend with no buffer attached: request %v, error %v; want nil and MPI_ERR_BUFFER", q, err)
		}
	case 1:
		gobuf := make([]byte, 2)
		mustSt(mpi.Recv(world, gobuf, 0, 99))("MPI_Recv go")
		for i, n := range sizes {
			buf := make([]byte, n+16)
			st := mustSt(mpi.Recv(world, buf, 0, 50+i))("MPI_Recv of buffered message #%d", i)
			wantStatus(st, 0, 50+i, n, fmt.Sprintf("buffered message #%d", i))
			mustMsg(buf[:n], 0, 1, i, fmt.Sprintf("buffered message #%d", i))
		}
		buf := make([]byte, 30)
		st := mustSt(mpi.Recv(world, buf, 0, 61))("MPI_Recv tag 61")
		wantStatus(st, 0, 61, 30, "buffered message tag 61")
		mustMsg(buf, 0, 1, 61, "buffered message tag 61")
	}
}

// ---------------------------------------------------------------------------
// rsend: ready-mode sends to a posted receive.

func checkRsend() {
	for i, n := range []int{8, 200 << 10, 0, 4096} {
		switch rank {
		case 1:
			buf := make([]byte, n)
			q := mustReq(mpi.Irecv(world, buf, 0, 3))("MPI_Irecv %d bytes", n)
			must(mpi.Send(world, []int32{int32(i)}, 0, 4), "MPI_Send ready")
			st := mustSt(q.Wait())("MPI_Wait on the receive of a ready send, %d bytes", n)
			wantStatus(st, 0, 3, n, "receive of a ready send")
			mustMsg(buf, 0, 1, i, "ready-mode message")
		case 0:
			ready := []int32{-1}
			mustSt(mpi.Recv(world, ready, 1, 4))("MPI_Recv ready")
			if ready[0] != int32(i) {
				failf("ready message %d, want %d", ready[0], i)
			}
			m := makeMsg(0, 1, i, n)
			if i%2 == 0 {
				must(mpi.Rsend(world, m, 1, 3), "MPI_Rsend of %d bytes", n)
			} else {
				q := mustReq(mpi.Irsend(world, m, 1, 3))("MPI_Irsend of %d bytes", n)
				mustSt(q.Wait())("MPI_Wait on MPI_Irsend")
			}
		}
	}
}

// ---------------------------------------------------------------------------
// probe: Probe/Iprobe, then receive exactly the probed message.

var probeLens = []int{0, 1, 3, 7, 100, 4000, 30000, 2, 17, 9000}

func probeLen(src, seq int) int { return probeLens[mix(seedOf(src, seq, 77))%uint64(len(probeLens))] }

func probeMsg(src, seq int) []uint32 {
	n := probeLen(src, seq)
	m := make([]uint32, n)
	s := seedOf(src, seq, 78)
	for i := range m {
		m[i] = uint32(mix(s + uint64(i)))
	}
	if n >= 3 {
		m[0], m[1], m[2] = uint32(src), uint32(seq), uint32(n)
	}
	return m
}

func checkProbe() {
	const tagBase = 1000
	m := 40
	if size > 4 {
		m = 16
	}
	senders := []int{}
	for s := 1; s < size; s++ {
		senders = append(senders, s)
	}
	if size == 1 {
		senders = []int{0}
	}
	var sreqs []*mpi.Request
	isSender := size == 1 || rank != 0
	if isSender {
		for j := 0; j < m; j++ {
			msg := probeMsg(rank, j)
			if size > 1 && j%3 == 0 {
				must(mpi.Send(world, msg, 0, tagBase+j), "MPI_Send #%d", j)
			} else {
				sreqs = append(sreqs, mustReq(mpi.Isend(world, msg, 0, tagBase+j))("MPI_Isend #%d", j))
			}
		}
	}
	if rank == 0 {
		next := make([]int, size)
		rr := 0
		pick := func() int {
			for {
				k := senders[rr%len(senders)]
				rr++
				if next[k] < m {
					return k
				}
			}
		}
		// A device may refuse probing (MPI_ERR_UNSUPPORTED_OPERATION): the
		// check then says so, receives what is left, and does not pass.
		refused := func(err error, how string) bool {
			if errors.Is(err, mpi.ErrNotSupported) {
				unsupported = fmt.Sprintf("%s returned %v", how, err)
				return true
			}
			must(err, "%s", how)
			return false
		}
		total := m * len(senders)
	probing:
		for i := 0; i < total; i++ {
			var st mpi.Status
			var how string
			switch i % 4 {
			case 0:
				how = "MPI_Probe(ANY_SOURCE, ANY_TAG)"
				s, err := mpi.Probe(world, mpi.AnySource, mpi.AnyTag)
				if refused(err, how) {
					break probing
				}
				st = s
			case 1:
				how = "MPI_Iprobe(ANY_SOURCE, ANY_TAG) loop"
				for {
					s, ok, err := mpi.Iprobe(world, mpi.AnySource, mpi.AnyTag)
					if refused(err, how) {
						break probing
					}
					if ok {
						st = s
						break
					}
				}
			case 2:
				k := pick()
				how = fmt.Sprintf("MPI_Probe(%d, ANY_TAG)", k)
				s, err := mpi.Probe(world, k, mpi.AnyTag)
				if refused(err, how) {
					break probing
				}
				st = s
				if st.Source != k {
					failf("%s: status source %d", how, st.Source)
				}
			case 3:
				k := pick()
				how = fmt.Sprintf("MPI_Iprobe(%d, %d) loop", k, tagBase+next[k])
				for {
					s, ok, err := mpi.Iprobe(world, k, tagBase+next[k])
					if refused(err, how) {
						break probing
					}
					if ok {
						st = s
						break
					}
				}
				if st.Source != k || st.Tag != tagBase+next[k] {
					failf("%s: status source %d tag %d", how, st.Source, st.Tag)
				}
			}
			src, tag := st.Source, st.Tag
			if src < 0 || src >= size || (size > 1 && src == 0) {
				failf("%s: status source %d", how, src)
			}
			seq := tag - tagBase
			if seq != next[src] {
				failf("%s: probed seq %d (tag %d) from %d, want seq %d: probe must see the earliest message", how, seq, tag, src, next[src])
			}
			n := mpi.CountOf[uint32](st)
			if n != probeLen(src, seq) || st.Bytes() != 4*n {
				failf("%s: probed message %d from %d: count %d (%d bytes), want %d elements", how, seq, src, n, st.Bytes(), probeLen(src, seq))
			}
			if st.Err != nil || st.Cancelled {
				failf("%s: status %+v", how, st)
			}
			buf := make([]uint32, n)
			var rst mpi.Status
			if i%2 == 0 {
				rst = mustSt(mpi.Recv(world, buf, src, tag))("MPI_Recv(%d, %d) after %s", src, tag, how)
			} else {
				q := mustReq(mpi.Irecv(world, buf, src, tag))("MPI_Irecv(%d, %d) after %s", src, tag, how)
				rst = mustSt(q.Wait())("MPI_Wait(%d, %d) after %s", src, tag, how)
			}
			if rst.Source != src || rst.Tag != tag || mpi.CountOf[uint32](rst) != n || rst.Err != nil {
				failf("receive after %s: status source %d tag %d count %d err %v, want %d %d %d", how, rst.Source, rst.Tag, mpi.CountOf[uint32](rst), rst.Err, src, tag, n)
			}
			want := probeMsg(src, seq)
			for e := range want {
				if buf[e] != want[e] {
					failf("receive after %s: message %d from %d differs at element %d: %d, want %d", how, seq, src, e, buf[e], want[e])
				}
			}
			next[src]++
		}
		if unsupported != "" {
			// Receive what is left, knowing the lengths, so the senders finish.
			for _, s := range senders {
				for seq := next[s]; seq < m; seq++ {
					buf := make([]uint32, probeLen(s, seq))
					st := mustSt(mpi.Recv(world, buf, s, tagBase+seq))("MPI_Recv(%d, %d) without probing", s, tagBase+seq)
					if st.Source != s || mpi.CountOf[uint32](st) != len(buf) {
						failf("MPI_Recv(%d, %d) without probing: source %d count %d", s, tagBase+seq, st.Source, mpi.CountOf[uint32](st))
					}
				}
			}
			if isSender {
				waitall(sreqs, "MPI_Waitall on sends")
			}
			return
		}
		for _, s := range senders {
			if next[s] != m {
				failf("received %d messages from %d, want %d", next[s], s, m)
			}
		}
		// Nothing is left to probe.
		if st, ok, err := mpi.Iprobe(world, mpi.AnySource, mpi.AnyTag); err != nil || ok {
			failf("MPI_Iprobe after every message was received: flag %v status %+v err %v", ok, st, err)
		}
	}
	if isSender {
		waitall(sreqs, "MPI_Waitall on sends")
	}
}

// ---------------------------------------------------------------------------
// cancel: cancelled receives complete as cancelled and steal nothing.

func checkCancel() {
	left, right := neighbours()
	token := func(tag int) {
		// Tell the left neighbour that this rank has cancelled; learn the same
		// of the right one.
		in := []int32{-1}
		st := mustSt(mpi.Sendrecv(world, []int32{int32(rank)}, left, tag, in, right, tag))("MPI_Sendrecv token %d", tag)
		if in[0] != int32(right) || st.Source != right {
			failf("token %d: got %d from %d, want %d", tag, in[0], st.Source, right)
		}
	}
	cancelled := func(st mpi.Status, err error, what string) {
		must(err, "%s", what)
		if !st.Cancelled {
			failf("%s: status.Cancelled false (source %d tag %d bytes %d)", what, st.Source, st.Tag, st.Bytes())
		}
	}
	// 1. Unmatched receives, cancelled: by Wait and by Test.
	b1, b2 := filled(64, 0xC5), filled(64, 0xC5)
	r1 := mustReq(mpi.Irecv(world, b1, mpi.AnySource, 77))("MPI_Irecv(ANY_SOURCE, 77)")
	r2 := mustReq(mpi.Irecv(world, b2, left, 78))("MPI_Irecv(%d, 78)", left)
	must(r1.Cancel(), "MPI_Cancel")
	must(r2.Cancel(), "MPI_Cancel")
	st, err := r1.Wait()
	cancelled(st, err, "MPI_Wait on a cancelled receive")
	for {
		st, done, err := r2.Test()
		if done {
			cancelled(st, err, "MPI_Test on a cancelled receive")
			break
		}
		must(err, "MPI_Test on a cancelled receive")
	}
	if r1.Active() || r2.Active() {
		failf("cancelled requests still active after Wait/Test")
	}
	must(r1.Cancel(), "MPI_Cancel on an inactive request")
	token(1)
	// Real messages with that tag go to new receives, in order, and none to
	// the cancelled one: the first new receive must get the first message.
	sq77 := []*mpi.Request{
		mustReq(mpi.Isend(world, makeMsg(rank, right, 770, 64), right, 77))("MPI_Isend tag 77"),
		mustReq(mpi.Isend(world, makeMsg(rank, right, 771, 64), right, 77))("MPI_Isend tag 77"),
	}
	b3, b3b := make([]byte, 64), make([]byte, 64)
	r3 := mustReq(mpi.Irecv(world, b3, left, 77))("MPI_Irecv(%d, 77)", left)
	r3b := mustReq(mpi.Irecv(world, b3b, left, 77))("MPI_Irecv(%d, 77)", left)
	st = mustSt(r3.Wait())("MPI_Wait on the receive after a cancel")
	wantStatus(st, left, 77, 64, "receive after a cancel")
	if msgSeq(b3) != 770 {
		failf("the first receive posted after a cancel got message %d, want 770: was 770 taken by the cancelled receive?", msgSeq(b3))
	}
	mustMsg(b3, left, rank, 770, "receive after a cancel")
	st = mustSt(r3b.Wait())("MPI_Wait on the second receive after a cancel")
	wantStatus(st, left, 77, 64, "second receive after a cancel")
	mustMsg(b3b, left, rank, 771, "second receive after a cancel")
	if i, j := allEqual(b1, 0xC5), allEqual(b2, 0xC5); i >= 0 || j >= 0 {
		failf("a cancelled receive's buffer was written (bytes %d, %d)", i, j)
	}
	waitall(sq77, "MPI_Waitall on Isends 77")

	// 2. Cancelling a receive that has already matched completes it normally.
	b4 := make([]byte, 48)
	r4 := mustReq(mpi.Irecv(world, b4, left, 79))("MPI_Irecv(%d, 79)", left)
	s79 := mustReq(mpi.Isend(world, makeMsg(rank, right, 79, 48), right, 79))("MPI_Isend 79")
	s80 := mustReq(mpi.Isend(world, makeMsg(rank, right, 80, 8), right, 80))("MPI_Isend 80")
	b5 := make([]byte, 8)
	mustSt(mpi.Recv(world, b5, left, 80))("MPI_Recv 80") // so 79 has matched r4
	must(r4.Cancel(), "MPI_Cancel on a matched receive")
	st = mustSt(r4.Wait())("MPI_Wait on a matched receive after MPI_Cancel")
	if st.Cancelled {
		failf("a receive that had matched a message was reported cancelled")
	}
	wantStatus(st, left, 79, 48, "matched receive after MPI_Cancel")
	mustMsg(b4, left, rank, 79, "matched receive after MPI_Cancel")
	waitall([]*mpi.Request{s79, s80}, "MPI_Waitall 79, 80")

	// 3. A persistent receive: cancel one activation, then restart it.
	b6 := filled(40, 0xC6)
	pr := mustReq(mpi.RecvInit(world, b6, left, 81))("MPI_Recv_init")
	must(pr.Start(), "MPI_Start")
	must(pr.Cancel(), "MPI_Cancel on a persistent receive")
	st, err = pr.Wait()
	cancelled(st, err, "MPI_Wait on a cancelled persistent receive")
	if i := allEqual(b6, 0xC6); i >= 0 {
		failf("cancelled persistent receive wrote byte %d", i)
	}
	token(2)
	sq := mustReq(mpi.Isend(world, makeMsg(rank, right, 81, 40), right, 81))("MPI_Isend 81")
	must(pr.Start(), "MPI_Start after a cancel")
	st = mustSt(pr.Wait())("MPI_Wait on the restarted persistent receive")
	wantStatus(st, left, 81, 40, "restarted persistent receive")
	mustMsg(b6, left, rank, 81, "restarted persistent receive")
	mustSt(sq.Wait())("MPI_Wait on Isend 81")

	// 4. Two receives with one envelope; the first is cancelled, so the
	// second gets the message.
	ba, bb := filled(32, 0xCA), make([]byte, 32)
	ra := mustReq(mpi.Irecv(world, ba, left, 82))("MPI_Irecv a")
	rb := mustReq(mpi.Irecv(world, bb, left, 82))("MPI_Irecv b")
	must(ra.Cancel(), "MPI_Cancel a")
	st, err = ra.Wait()
	cancelled(st, err, "MPI_Wait on the first of two receives")
	token(3)
	sq = mustReq(mpi.Isend(world, makeMsg(rank, right, 82, 32), right, 82))("MPI_Isend 82")
	st = mustSt(rb.Wait())("MPI_Wait on the second of two receives")
	wantStatus(st, left, 82, 32, "second of two receives")
	mustMsg(bb, left, rank, 82, "second of two receives")
	if i := allEqual(ba, 0xCA); i >= 0 {
		failf("the cancelled first receive's buffer was written at byte %d", i)
	}
	mustSt(sq.Wait())("MPI_Wait on Isend 82")
}

// ---------------------------------------------------------------------------
// persistent: SendInit/RecvInit restarted many times.

func checkPersistent() {
	left, right := neighbours()
	const rounds = 1000
	small, rsmall := make([]int64, 8), make([]int64, 8)
	large, rlarge := make([]int64, 2560), make([]int64, 2560) // 20 KiB: rendezvous
	val := func(src, round, i int) int64 { return int64(src)<<40 | int64(round)<<16 | int64(i) }
	ss := mustReq(mpi.SendInit(world, small, right, 11))("MPI_Send_init small")
	rs := mustReq(mpi.RecvInit(world, rsmall, left, 11))("MPI_Recv_init small")
	sl := mustReq(mpi.SendInit(world, large, right, 12))("MPI_Send_init large")
	rl := mustReq(mpi.RecvInit(world, rlarge, left, 12))("MPI_Recv_init large")
	for round := 0; round < rounds; round++ {
		for i := range small {
			small[i] = val(rank, round, i)
		}
		reqs := []*mpi.Request{rs, ss}
		withLarge := round%10 == 0
		if withLarge {
			for i := range large {
				large[i] = val(rank, round, i)
			}
			reqs = append(reqs, rl, sl)
		}
		must(mpi.Startall(reqs), "MPI_Startall round %d", round)
		if round == 0 || round == rounds/2 {
			if err := rs.Start(); !errors.Is(err, mpi.ErrRequest) {
				failf("MPI_Start on an active persistent receive: error %v, want MPI_ERR_REQUEST", err)
			}
			if err := mpi.Startall([]*mpi.Request{ss}); !errors.Is(err, mpi.ErrRequest) {
				failf("MPI_Startall on an active persistent send: error %v, want MPI_ERR_REQUEST", err)
			}
		}
		sts := waitall(reqs, "MPI_Waitall round %d", round)
		wantStatus(sts[0], left, 11, 64, fmt.Sprintf("persistent receive round %d", round))
		for i := range rsmall {
			if w := val(left, round, i); rsmall[i] != w {
				failf("round %d: small element %d = %#x, want %#x", round, i, rsmall[i], w)
			}
		}
		if withLarge {
			wantStatus(sts[2], left, 12, 8*len(rlarge), fmt.Sprintf("persistent large receive round %d", round))
			for i := range rlarge {
				if w := val(left, round, i); rlarge[i] != w {
					failf("round %d: large element %d = %#x, want %#x", round, i, rlarge[i], w)
				}
			}
		}
		for _, q := range reqs {
			if q.Active() {
				failf("round %d: a persistent request is still active after MPI_Waitall", round)
			}
		}
	}
	// An inactive persistent request waits at once with an empty status.
	st := mustSt(rs.Wait())("MPI_Wait on an inactive persistent request")
	if st.Source != mpi.AnySource || st.Tag != mpi.AnyTag || st.Bytes() != 0 {
		failf("MPI_Wait on an inactive request: status %+v, want the empty status", st)
	}
}

// ---------------------------------------------------------------------------
// waitany: Waitany, Waitsome, Testany, Testsome, Testall.

func checkWaitany() {
	left, right := neighbours()
	const K = 12
	wlen := func(i int) int {
		if i == 5 {
			return 20000
		}
		return hdrLen + 3*i
	}
	for round, kind := range []string{"MPI_Waitany", "MPI_Waitsome", "MPI_Testany", "MPI_Testsome", "MPI_Testall"} {
		tagBase := 100 + round*K
		// reqs[0] and reqs[K+1] stay nil (MPI_REQUEST_NULL).
		reqs := make([]*mpi.Request, K+2)
		bufs := make([][]byte, K+2)
		for i := 0; i < K; i++ {
			bufs[i+1] = make([]byte, wlen(i))
			reqs[i+1] = mustReq(mpi.Irecv(world, bufs[i+1], left, tagBase+i))("%s: MPI_Irecv %d", kind, i)
		}
		sreqs := make([]*mpi.Request, K)
		for j := 0; j < K; j++ {
			i := (j*5 + 3) % K // send in a permuted order
			sreqs[j] = mustReq(mpi.Isend(world, makeMsg(rank, right, tagBase+i, wlen(i)), right, tagBase+i))("%s: MPI_Isend %d", kind, i)
		}
		seen := make([]bool, K+2)
		record := func(idx int, st mpi.Status) {
			if idx < 1 || idx > K {
				failf("%s: reported index %d, want 1..%d (0 and %d are null requests)", kind, idx, K, K+1)
			}
			if seen[idx] {
				failf("%s: index %d reported twice", kind, idx)
			}
			seen[idx] = true
			i := idx - 1
			wantStatus(st, left, tagBase+i, wlen(i), fmt.Sprintf("%s index %d", kind, idx))
			mustMsg(bufs[idx], left, rank, tagBase+i, kind)
			if reqs[idx].Active() {
				failf("%s: request %d still active after being reported", kind, idx)
			}
		}
		count := 0
		switch kind {
		case "MPI_Waitany":
			for count < K {
				idx, st, err := mpi.Waitany(reqs)
				must(err, "%s", kind)
				record(idx, st)
				count++
			}
			if idx, _, err := mpi.Waitany(reqs); idx != mpi.Undefined || err != nil {
				failf("MPI_Waitany with no active request: index %d err %v, want MPI_UNDEFINED", idx, err)
			}
		case "MPI_Waitsome":
			for count < K {
				idxs, sts, err := mpi.Waitsome(reqs)
				must(err, "%s", kind)
				if len(idxs) == 0 || len(idxs) != len(sts) {
					failf("MPI_Waitsome returned %d indices and %d statuses with %d requests active", len(idxs), len(sts), K-count)
				}
				for k := range idxs {
					record(idxs[k], sts[k])
				}
				count += len(idxs)
			}
			if idxs, _, err := mpi.Waitsome(reqs); len(idxs) != 0 || err != nil {
				failf("MPI_Waitsome with no active request: %v, %v", idxs, err)
			}
		case "MPI_Testany":
			for count < K {
				idx, st, done, err := mpi.Testany(reqs)
				must(err, "%s", kind)
				if done {
					if idx == mpi.Undefined {
						failf("MPI_Testany returned MPI_UNDEFINED with %d requests active", K-count)
					}
					record(idx, st)
					count++
				}
			}
			if idx, _, done, err := mpi.Testany(reqs); idx != mpi.Undefined || !done || err != nil {
				failf("MPI_Testany with no active request: index %d flag %v err %v, want MPI_UNDEFINED, true", idx, done, err)
			}
		case "MPI_Testsome":
			for count < K {
				idxs, sts, err := mpi.Testsome(reqs)
				must(err, "%s", kind)
				for k := range idxs {
					record(idxs[k], sts[k])
				}
				count += len(idxs)
			}
			if idxs, _, err := mpi.Testsome(reqs); len(idxs) != 0 || err != nil {
				failf("MPI_Testsome with no active request: %v, %v", idxs, err)
			}
		case "MPI_Testall":
			for {
				sts, done, err := mpi.Testall(reqs)
				must(err, "%s", kind)
				if !done {
					continue
				}
				if len(sts) != len(reqs) {
					failf("MPI_Testall returned %d statuses for %d requests", len(sts), len(reqs))
				}
				for idx := 1; idx <= K; idx++ {
					record(idx, sts[idx])
				}
				break
			}
			if _, done, err := mpi.Testall(reqs); !done || err != nil {
				failf("MPI_Testall with no active request: flag %v err %v", done, err)
			}
		}
		waitall(sreqs, "%s: MPI_Waitall on sends", kind)
	}

	// MPI_Testall completes nothing unless everything has completed.
	ba, bb := make([]byte, 16), make([]byte, 16)
	ra := mustReq(mpi.Irecv(world, ba, left, 200))("MPI_Irecv 200")
	rb := mustReq(mpi.Irecv(world, bb, rank, 201))("MPI_Irecv 201")
	s200 := mustReq(mpi.Isend(world, makeMsg(rank, right, 200, 16), right, 200))("MPI_Isend 200")
	s202 := mustReq(mpi.Isend(world, makeMsg(rank, right, 202, 4), right, 202))("MPI_Isend 202")
	mustSt(mpi.Recv(world, make([]byte, 4), left, 202))("MPI_Recv 202") // message 200 has matched ra
	both := []*mpi.Request{ra, rb}
	sts, done, err := mpi.Testall(both)
	must(err, "MPI_Testall")
	if done {
		failf("MPI_Testall returned true before the message for its second request was sent")
	}
	if !ra.Active() || !rb.Active() {
		failf("MPI_Testall returning false made a request inactive (active: %v, %v)", ra.Active(), rb.Active())
	}
	s201 := mustReq(mpi.Isend(world, makeMsg(rank, rank, 201, 16), rank, 201))("MPI_Isend 201 to self")
	for {
		sts, done, err = mpi.Testall(both)
		must(err, "MPI_Testall")
		if done {
			break
		}
	}
	wantStatus(sts[0], left, 200, 16, "MPI_Testall request 0")
	wantStatus(sts[1], rank, 201, 16, "MPI_Testall request 1")
	mustMsg(ba, left, rank, 200, "MPI_Testall request 0")
	mustMsg(bb, rank, rank, 201, "MPI_Testall request 1")
	waitall([]*mpi.Request{s200, s201, s202}, "MPI_Waitall")
	// All-nil arrays.
	nils := make([]*mpi.Request, 3)
	if idx, _, err := mpi.Waitany(nils); idx != mpi.Undefined || err != nil {
		failf("MPI_Waitany on null requests: %d %v", idx, err)
	}
	if idx, _, done, err := mpi.Testany(nils); idx != mpi.Undefined || !done || err != nil {
		failf("MPI_Testany on null requests: %d %v %v", idx, done, err)
	}
}

// ---------------------------------------------------------------------------
// alltoall: every rank sends to every rank messages of 0 B to 8 MiB.

// a2aLen is the size of the message from src to dst: log-distributed over
// [1 B, 8 MiB), a few empty, and one of exactly 8 MiB.
func a2aLen(src, dst int) int {
	if src == 0 && dst == size-1 {
		return 8 << 20
	}
	h := mix(seedOf(src, dst, 0xa2a))
	if h%13 == 0 {
		return 0
	}
	u := float64(h>>11) / (1 << 53)
	return int(math.Exp2(u * 23))
}

func checkAlltoall() {
	const tag = 60
	const guard = 8
	rreqs := make([]*mpi.Request, size)
	bufs := make([][]byte, size)
	for k := 0; k < size; k++ {
		src := (rank - k + size) % size
		n := a2aLen(src, rank)
		bufs[src] = filled(n+guard, 0xA5)
		rreqs[src] = mustReq(mpi.Irecv(world, bufs[src][:n], src, tag))("MPI_Irecv from %d (%d bytes)", src, n)
	}
	sreqs := make([]*mpi.Request, size)
	for k := 0; k < size; k++ {
		dst := (rank + k) % size
		data := make([]byte, a2aLen(rank, dst))
		fillBytes(data, seedOf(rank, dst, tag))
		sreqs[dst] = mustReq(mpi.Isend(world, data, dst, tag))("MPI_Isend to %d (%d bytes)", dst, len(data))
	}
	sts := waitall(rreqs, "MPI_Waitall on receives")
	waitall(sreqs, "MPI_Waitall on sends")
	for src := 0; src < size; src++ {
		n := a2aLen(src, rank)
		wantStatus(sts[src], src, tag, n, fmt.Sprintf("receive from %d", src))
		if i := badByte(bufs[src][:n], seedOf(src, rank, tag)); i >= 0 {
			failf("message from %d (%d bytes): byte %d is %#02x, wrong", src, n, i, bufs[src][i])
		}
		if i := allEqual(bufs[src][n:], 0xA5); i >= 0 {
			failf("message from %d (%d bytes) overwrote guard byte %d", src, n, i)
		}
	}
}

// ---------------------------------------------------------------------------
// errors: bad arguments return the right class and the job continues.

func checkErrors() {
	x := []float64{1, 2, 3}
	want := func(err error, class mpi.Class, call, what string) {
		if err == nil {
			failf("%s: no error, want %v", what, class)
		}
		if !errors.Is(err, class) || mpi.ErrorClass(err) != class {
			failf("%s: error %q has class %v, want %v", what, err, mpi.ErrorClass(err), class)
		}
		if !strings.Contains(err.Error(), call) {
			failf("%s: error %q does not name the call %s", what, err, call)
		}
		var e *mpi.Error
		if !errors.As(err, &e) || e.Class != class {
			failf("%s: error %q is not an *mpi.Error of class %v", what, err, class)
		}
	}
	// wantReq checks a non-blocking call's error; if the call wrongly
	// started something, it is cancelled so the job cannot hang.
	wantReq := func(q *mpi.Request, err error, class mpi.Class, call, what string) {
		if q != nil {
			_ = q.Cancel()
			_, _ = q.Wait()
			failf("%s: returned a request (error %v), want %v", what, err, class)
		}
		want(err, class, call, what)
	}
	// ErrRank.
	want(mpi.Send(world, x, size, 0), mpi.ErrRank, "MPI_Send", "MPI_Send to rank size")
	want(mpi.Send(world, x, -5, 0), mpi.ErrRank, "MPI_Send", "MPI_Send to rank -5")
	want(mpi.Send(world, x, mpi.AnySource, 0), mpi.ErrRank, "MPI_Send", "MPI_Send to MPI_ANY_SOURCE")
	want(mpi.Ssend(world, x, size+7, 0), mpi.ErrRank, "MPI_Ssend", "MPI_Ssend to rank size+7")
	want(mpi.Bsend(world, x, size, 0), mpi.ErrRank, "MPI_Bsend", "MPI_Bsend to rank size")
	q, err := mpi.Isend(world, x, size+3, 0)
	wantReq(q, err, mpi.ErrRank, "MPI_Isend", "MPI_Isend to rank size+3")
	_, err = mpi.Recv(world, x, size, 0)
	want(err, mpi.ErrRank, "MPI_Recv", "MPI_Recv from rank size")
	_, err = mpi.Recv(world, x, -7, 0)
	want(err, mpi.ErrRank, "MPI_Recv", "MPI_Recv from rank -7")
	q, err = mpi.Irecv(world, x, size, 0)
	wantReq(q, err, mpi.ErrRank, "MPI_Irecv", "MPI_Irecv from rank size")
	_, err = mpi.Probe(world, size, 0)
	want(err, mpi.ErrRank, "MPI_Probe", "MPI_Probe of rank size")
	_, _, err = mpi.Iprobe(world, -9, 0)
	want(err, mpi.ErrRank, "MPI_Iprobe", "MPI_Iprobe of rank -9")
	q, err = mpi.SendInit(world, x, size, 0)
	wantReq(q, err, mpi.ErrRank, "MPI_Send_init", "MPI_Send_init to rank size")
	_, err = mpi.Sendrecv(world, x, size, 0, x, rank, 0)
	want(err, mpi.ErrRank, "MPI_Sendrecv", "MPI_Sendrecv to rank size")
	// ErrTag.
	want(mpi.Send(world, x, rank, -1), mpi.ErrTag, "MPI_Send", "MPI_Send with tag -1 (MPI_ANY_TAG)")
	want(mpi.Send(world, x, rank, -100), mpi.ErrTag, "MPI_Send", "MPI_Send with tag -100")
	if mpi.TagUB < math.MaxInt {
		want(mpi.Send(world, x, rank, mpi.TagUB+1), mpi.ErrTag, "MPI_Send", "MPI_Send with tag TagUB+1")
	}
	q, err = mpi.Isend(world, x, rank, -2)
	wantReq(q, err, mpi.ErrTag, "MPI_Isend", "MPI_Isend with tag -2")
	q, err = mpi.Irecv(world, x, rank, -5)
	wantReq(q, err, mpi.ErrTag, "MPI_Irecv", "MPI_Irecv with tag -5")
	_, err = mpi.Recv(world, x, mpi.ProcNull, -5)
	want(err, mpi.ErrTag, "MPI_Recv", "MPI_Recv with tag -5")
	_, err = mpi.Probe(world, mpi.AnySource, -3)
	want(err, mpi.ErrTag, "MPI_Probe", "MPI_Probe with tag -3")
	// ErrCount.
	mem := make([]byte, 64)
	want(mpi.SendBuf(world, mpi.Typed(mem, -1, datatype.Float64), rank, 0), mpi.ErrCount, "MPI_Send", "MPI_Send of count -1")
	_, err = mpi.RecvBuf(world, mpi.Typed(mem, -1, datatype.Float64), mpi.ProcNull, 0)
	want(err, mpi.ErrCount, "MPI_Recv", "MPI_Recv of count -1")
	q, err = mpi.IrecvBuf(world, mpi.Typed(mem, -3, datatype.Int32), rank, 0)
	wantReq(q, err, mpi.ErrCount, "MPI_Irecv", "MPI_Irecv of count -3")
	// ErrComm.
	want(mpi.Send(nil, x, 0, 0), mpi.ErrComm, "MPI_Send", "MPI_Send on a nil communicator")
	_, err = mpi.Recv(nil, x, 0, 0)
	want(err, mpi.ErrComm, "MPI_Recv", "MPI_Recv on a nil communicator")
	q, err = mpi.Isend(nil, x, 0, 0)
	wantReq(q, err, mpi.ErrComm, "MPI_Isend", "MPI_Isend on a nil communicator")
	_, err = mpi.Probe(nil, 0, 0)
	want(err, mpi.ErrComm, "MPI_Probe", "MPI_Probe on a nil communicator")
	// ErrBuffer: memory shorter than count elements.
	want(mpi.SendBuf(world, mpi.Typed(make([]byte, 7), 1, datatype.Float64), rank, 0), mpi.ErrBuffer, "MPI_Send", "MPI_Send of 1 float64 from 7 bytes")
	_, err = mpi.RecvBuf(world, mpi.Typed(make([]byte, 79), 10, datatype.Float64), mpi.ProcNull, 0)
	want(err, mpi.ErrBuffer, "MPI_Recv", "MPI_Recv of 10 float64 into 79 bytes")
	q, err = mpi.IrecvBuf(world, mpi.Typed(nil, 1, datatype.Byte), rank, 0)
	wantReq(q, err, mpi.ErrBuffer, "MPI_Irecv", "MPI_Irecv of 1 byte into nil")
	// ErrType.
	want(mpi.SendBuf(world, mpi.Typed(mem, 1, nil), rank, 0), mpi.ErrType, "MPI_Send", "MPI_Send with a nil datatype")
	_, err = mpi.RecvBuf(world, mpi.Typed(mem, 1, nil), mpi.ProcNull, 0)
	want(err, mpi.ErrType, "MPI_Recv", "MPI_Recv with a nil datatype")
	// ErrRequest.
	q = mustReq(mpi.Isend(world, x, mpi.ProcNull, 0))("MPI_Isend to MPI_PROC_NULL")
	want(q.Start(), mpi.ErrRequest, "MPI_Start", "MPI_Start on a non-persistent request")
	want(mpi.Startall([]*mpi.Request{q}), mpi.ErrRequest, "MPI_Start", "MPI_Startall on a non-persistent request")
	mustSt(q.Wait())("MPI_Wait")
	var nilReq *mpi.Request
	_, err = nilReq.Wait()
	want(err, mpi.ErrRequest, "MPI_Wait", "MPI_Wait on a nil request")
	_, _, err = nilReq.Test()
	want(err, mpi.ErrRequest, "MPI_Test", "MPI_Test on a nil request")
	want(nilReq.Start(), mpi.ErrRequest, "MPI_Start", "MPI_Start on a nil request")

	// The largest valid tag works.
	sq := mustReq(mpi.Isend(world, []int32{42}, rank, mpi.TagUB))("MPI_Isend with tag TagUB")
	in := []int32{0}
	st := mustSt(mpi.Recv(world, in, rank, mpi.TagUB))("MPI_Recv with tag TagUB")
	if in[0] != 42 || st.Tag != mpi.TagUB {
		failf("message with tag TagUB: got %d tag %d", in[0], st.Tag)
	}
	mustSt(sq.Wait())("MPI_Wait")
	// A count that is not a whole number of elements is MPI_UNDEFINED.
	sq = mustReq(mpi.Isend(world, []byte{1, 2, 3}, rank, 9))("MPI_Isend 3 bytes")
	st = mustSt(mpi.Recv(world, make([]byte, 16), rank, 9))("MPI_Recv 3 bytes")
	if c := st.Count(datatype.Float64); c != mpi.Undefined {
		failf("Count(float64) of a 3-byte message = %d, want MPI_UNDEFINED", c)
	}
	mustSt(sq.Wait())("MPI_Wait")

	// The job continues: a ring exchange after all the errors.
	left, right := neighbours()
	ring := make([]byte, 20000)
	st = mustSt(mpi.Sendrecv(world, makeMsg(rank, right, 1, 20000), right, 3, ring, left, 3))("MPI_Sendrecv after errors")
	wantStatus(st, left, 3, 20000, "MPI_Sendrecv after errors")
	mustMsg(ring, left, rank, 1, "MPI_Sendrecv after errors")
}

// ---------------------------------------------------------------------------
// exit-early: a rank dies right after MPI_Init.

func checkExitEarly() {
	if rank == size-1 {
		os.Exit(3)
	}
	buf := make([]byte, 8)
	_, err := mpi.Recv(world, buf, size-1, 0)
	if err == nil {
		failf("MPI_Recv from the last rank, which exited, returned no error")
	}
	// Do not repeat the error text: the launcher, not this rank, must name
	// the process that failed.
	fmt.Fprintf(os.Stderr, "exit-early: the receive from the exited process failed as it should (class %v)\n", mpi.ErrorClass(err))
	os.Exit(1)
}

// ---------------------------------------------------------------------------
// many-pending: hundreds of receives with identical envelopes.

func checkManyPending() {
	const K = 500
	const tag = 70
	left, right := neighbours()
	mlen := func(i int) int {
		if i%25 == 0 {
			return 20000
		}
		return 8 + i%57
	}
	rreqs := make([]*mpi.Request, K)
	bufs := make([][]byte, K)
	post := func(from, to int) {
		for i := from; i < to; i++ {
			bufs[i] = make([]byte, 20000)
			rreqs[i] = mustReq(mpi.Irecv(world, bufs[i], left, tag))("MPI_Irecv #%d", i)
		}
	}
	// Half the receives are posted before the messages come, half after
	// they have arrived (a marker sent behind them has been received).
	post(0, K/2)
	sreqs := make([]*mpi.Request, K, K+1)
	for i := range sreqs {
		sreqs[i] = mustReq(mpi.Isend(world, makeMsg(rank, right, i, mlen(i)), right, tag))("MPI_Isend #%d", i)
	}
	sreqs = append(sreqs, mustReq(mpi.Isend(world, []byte{1}, right, tag+1))("MPI_Isend marker"))
	mustSt(mpi.Recv(world, make([]byte, 1), left, tag+1))("MPI_Recv marker")
	post(K/2, K)
	sts := waitall(rreqs, "MPI_Waitall on receives")
	for i, st := range sts {
		if st.Bytes() >= 4 && msgSeq(bufs[i]) != i {
			failf("receive #%d got message #%d (%d bytes): out of order", i, msgSeq(bufs[i]), st.Bytes())
		}
		wantStatus(st, left, tag, mlen(i), fmt.Sprintf("receive #%d", i))
		mustMsg(bufs[i][:mlen(i)], left, rank, i, fmt.Sprintf("receive #%d", i))
	}
	waitall(sreqs, "MPI_Waitall on sends")
}

// ---------------------------------------------------------------------------
// anysource-race: ANY_SOURCE and specific-source receives for one tag.

func checkAnySourceRace() {
	const tag = 80
	m := max(40, 1500/(size-1))
	rlen := func(src, seq int) int {
		if (seq+src)%9 == 0 {
			return 24000
		}
		return hdrLen + (seq % 20)
	}
	if rank != 0 {
		var reqs []*mpi.Request
		for j := 0; j < m; j++ {
			msg := makeMsg(rank, 0, j, rlen(rank, j))
			if j%4 == 1 {
				must(mpi.Send(world, msg, 0, tag), "MPI_Send #%d", j)
			} else {
				reqs = append(reqs, mustReq(mpi.Isend(world, msg, 0, tag))("MPI_Isend #%d", j))
			}
		}
		waitall(reqs, "MPI_Waitall")
		return
	}
	total := m * (size - 1)
	// Interleave ANY_SOURCE receives with specific ones (m/2 per sender).
	// There are total ANY_SOURCE receives, so every message finds a
	// receive; those left over once every message is in are cancelled.
	type recv struct {
		src  int // mpi.AnySource or the sender
		buf  []byte
		st   mpi.Status
		done bool
	}
	var recvs []*recv
	spec := m / 2
	for i, s := 0, 0; i < total || s < spec*(size-1); i++ {
		if i < total {
			recvs = append(recvs, &recv{src: mpi.AnySource})
		}
		if s < spec*(size-1) {
			recvs = append(recvs, &recv{src: 1 + s%(size-1)})
			s++
		}
	}
	reqs := make([]*mpi.Request, len(recvs))
	got := 0
	collect := func(idxs []int, sts []mpi.Status, err error, how string) {
		must(err, "%s", how)
		for k, i := range idxs {
			if recvs[i].done {
				failf("%s reported receive %d twice", how, i)
			}
			recvs[i].done, recvs[i].st = true, sts[k]
			got++
		}
	}
	for i, r := range recvs {
		r.buf = make([]byte, 24000)
		reqs[i] = mustReq(mpi.Irecv(world, r.buf, r.src, tag))("MPI_Irecv #%d (source %d)", i, r.src)
		if i%16 == 15 {
			idxs, sts, err := mpi.Testsome(reqs[:i+1])
			collect(idxs, sts, err, "MPI_Testsome")
		}
	}
	for got < total {
		idxs, sts, err := mpi.Waitsome(reqs)
		if len(idxs) == 0 && err == nil {
			failf("MPI_Waitsome returned nothing with %d of %d messages received", got, total)
		}
		collect(idxs, sts, err, "MPI_Waitsome")
	}
	if got != total {
		failf("%d receives completed for %d messages", got, total)
	}
	for i, r := range recvs {
		if r.done {
			continue
		}
		must(reqs[i].Cancel(), "MPI_Cancel #%d", i)
		st, err := reqs[i].Wait()
		must(err, "MPI_Wait on cancelled #%d", i)
		if !st.Cancelled {
			failf("left-over receive #%d (source %d) was not cancelled: it got a message from %d (tag %d, %d bytes), one more than were sent", i, r.src, st.Source, st.Tag, st.Bytes())
		}
	}
	next := make([]int, size)
	for i, r := range recvs {
		if !r.done {
			continue
		}
		st := r.st
		if st.Bytes() < hdrLen {
			failf("receive #%d: %d bytes from %d", i, st.Bytes(), st.Source)
		}
		src, seq := msgSrc(r.buf), msgSeq(r.buf)
		if src < 1 || src >= size || st.Source != src {
			failf("receive #%d (posted for source %d): status source %d, message from %d", i, r.src, st.Source, src)
		}
		if r.src != mpi.AnySource && r.src != src {
			failf("receive #%d posted for source %d got a message from %d", i, r.src, src)
		}
		if seq != next[src] {
			failf("receive #%d (posted for source %d) got seq %d from %d, want %d: per-sender order broken across ANY_SOURCE and specific receives", i, r.src, seq, src, next[src])
		}
		wantStatus(st, src, tag, rlen(src, seq), fmt.Sprintf("receive #%d", i))
		mustMsg(r.buf[:st.Bytes()], src, 0, seq, fmt.Sprintf("receive #%d", i))
		next[src]++
	}
	for s := 1; s < size; s++ {
		if next[s] != m {
			failf("received %d messages from %d, want %d", next[s], s, m)
		}
	}
}
