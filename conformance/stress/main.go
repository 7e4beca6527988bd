// Command stress is adimpi's stress conformance program: named checks that
// push the point-to-point machinery where MPI implementations usually break
// (hundreds of outstanding requests with identical envelopes, messages one
// byte either side of every protocol threshold, long runs that would expose
// leaked requests or memory, and the progress rule).
//
//	mpirun -np 16 ./stress flood    # run one check
//	stress -list                    # print the names of every check
//
// The conventions are those of conformance/p2p: every check runs on any
// number of ranks ≥ 1 (a rank without a partner talks to itself); on
// success rank 0 prints "PASS <check>" on standard output after
// MPI_Finalize; on a failure a rank prints "FAIL <check>: rank R of N:
// <reason>" on standard error and exits 1. No check relies on a send being
// buffered, so all of them run under netvm's eager=0 (every send waits for
// its receive).
//
// The checks:
//
//	flood          each rank keeps 300 Isend and 300 Irecv per peer outstanding,
//	               to and from up to three peers at once, all with one envelope
//	thresholds     messages of 0, 1 and every protocol threshold ±1 byte (eager
//	               limit, chunk = ring/4, ring; read from ADIMPI_DEVICE_OPT),
//	               blocking and non-blocking, and a burst that wraps the ring
//	longrun        ≥ 10⁵ messages between neighbours (mostly small, some
//	               rendezvous, a third received with ANY_SOURCE), then no
//	               request may be left in the device and the heap must not
//	               have grown without bound
//	progress-rule  two ranks each post 200 Irecv and 200 Isend with one envelope
//	               in different interleavings; Waitall must complete them all,
//	               matched in order
package main

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/adimpi/adimpi/conformance/internal/runner"
	"github.com/adimpi/adimpi/mpi"
)

// check is one named stress check.
type check = runner.Check

var checks = []check{
	{Name: "flood", MinRanks: 1, Run: checkFlood},
	{Name: "thresholds", MinRanks: 1, Run: checkThresholds},
	{Name: "longrun", MinRanks: 1, Run: checkLongrun},
	{Name: "progress-rule", MinRanks: 1, Run: checkProgressRule},
}

var (
	world      *mpi.Comm
	rank, size int
)

func main() {
	runner.Program{Name: "stress", Checks: checks, Setup: setup}.Main()
}

func setup(w *mpi.Comm) { world, rank, size = w, w.Rank(), w.Size() }

var (
	failf = runner.Failf
	must  = runner.Must
)

func isend(buf []byte, dest, tag int, what string) *mpi.Request {
	q, err := mpi.Isend(world, buf, dest, tag)
	must(err, "MPI_Isend %s (%d bytes to %d, tag %d)", what, len(buf), dest, tag)
	return q
}

func irecv(buf []byte, src, tag int, what string) *mpi.Request {
	q, err := mpi.Irecv(world, buf, src, tag)
	must(err, "MPI_Irecv %s (%d bytes from %d, tag %d)", what, len(buf), src, tag)
	return q
}

func waitall(reqs []*mpi.Request, format string, args ...any) []mpi.Status {
	sts, err := mpi.Waitall(reqs)
	must(err, "MPI_Waitall on "+format, args...)
	return sts
}

// ---------------------------------------------------------------------------
// Messages: a 16-byte header (stream, source, destination, sequence number)
// when they are long enough, then bytes that depend on all four.

const hdr = 16

func fill(b []byte, stream, src, dst, seq int) {
	x := uint64(stream)<<48 ^ uint64(src)<<32 ^ uint64(dst)<<16 ^ uint64(seq)*0x9e3779b97f4a7c15
	for i := range b {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		b[i] = byte(x >> 24)
	}
	if len(b) >= hdr {
		binary.LittleEndian.PutUint32(b[0:], uint32(stream))
		binary.LittleEndian.PutUint32(b[4:], uint32(src))
		binary.LittleEndian.PutUint32(b[8:], uint32(dst))
		binary.LittleEndian.PutUint32(b[12:], uint32(seq))
	}
}

func message(n, stream, src, dst, seq int) []byte {
	b := make([]byte, n)
	fill(b, stream, src, dst, seq)
	return b
}

// header reads the source and sequence number of a message of ≥ hdr bytes.
func header(b []byte) (src, seq int) {
	return int(binary.LittleEndian.Uint32(b[4:])), int(binary.LittleEndian.Uint32(b[12:]))
}

// verify fails unless got is exactly message(len(got), stream, src, dst, seq).
func verify(got []byte, stream, src, dst, seq int, what string) {
	want := message(len(got), stream, src, dst, seq)
	for i := range got {
		if got[i] != want[i] {
			detail := ""
			if len(got) >= hdr {
				s, q := header(got)
				detail = fmt.Sprintf(" (its header says source %d, seq %d)", s, q)
			}
			failf("%s: message seq %d from %d (%d bytes) differs at byte %d: got %#02x, want %#02x%s",
				what, seq, src, len(got), i, got[i], want[i], detail)
		}
	}
}

func wantStatus(st mpi.Status, src, tag, n int, what string) {
	if st.Err != nil {
		failf("%s: status error %v", what, st.Err)
	}
	if st.Cancelled || st.Source != src || st.Tag != tag || st.Bytes() != n {
		failf("%s: status source=%d tag=%d bytes=%d cancelled=%v, want source=%d tag=%d bytes=%d",
			what, st.Source, st.Tag, st.Bytes(), st.Cancelled, src, tag, n)
	}
}

// ---------------------------------------------------------------------------
// flood: hundreds of outstanding requests with one envelope, several peers.

func checkFlood() {
	const K = 300
	const tag = 11
	// Up to three peers at distances 1, 2, 3 (all distinct); a lone rank
	// floods itself.
	dists := []int{}
	for d := 1; d <= 3 && d < size; d++ {
		dists = append(dists, d)
	}
	if size == 1 {
		dists = []int{0}
	}
	mlen := func(seq int) int {
		if seq%60 == 59 {
			return 20000 + seq // over the default eager limit: rendezvous
		}
		return hdr + seq%41
	}
	type flow struct {
		peer int
		bufs [][]byte
		reqs []*mpi.Request
	}
	in := make([]flow, len(dists))
	out := make([]flow, len(dists))
	for i, d := range dists {
		in[i] = flow{peer: (rank - d + size) % size, bufs: make([][]byte, K), reqs: make([]*mpi.Request, K)}
		out[i] = flow{peer: (rank + d) % size, reqs: make([]*mpi.Request, K)}
	}
	// Interleave receives and sends across every peer: a third of the
	// receives first, then sends and the rest of the receives round-robin.
	post := func(f *flow, j int) {
		f.bufs[j] = make([]byte, 20000+K)
		f.reqs[j] = irecv(f.bufs[j], f.peer, tag, fmt.Sprintf("#%d", j))
	}
	for j := 0; j < K/3; j++ {
		for i := range in {
			post(&in[i], j)
		}
	}
	for j := 0; j < K; j++ {
		for i := range out {
			out[i].reqs[j] = isend(message(mlen(j), 1, rank, out[i].peer, j), out[i].peer, tag, fmt.Sprintf("#%d", j))
		}
		if r := K/3 + j; r < K {
			for i := range in {
				post(&in[i], r)
			}
		}
	}
	var all []*mpi.Request
	for i := range in {
		all = append(all, in[i].reqs...)
		all = append(all, out[i].reqs...)
	}
	sts := waitall(all, "%d receives and %d sends", K*len(in), K*len(out))
	for i := range in {
		f := &in[i]
		for j := 0; j < K; j++ {
			st := sts[i*2*K+j]
			what := fmt.Sprintf("receive #%d from %d", j, f.peer)
			if st.Bytes() >= hdr {
				if src, seq := header(f.bufs[j]); src != f.peer || seq != j {
					failf("%s got message seq %d from %d (%d bytes): out of order", what, seq, src, st.Bytes())
				}
			}
			wantStatus(st, f.peer, tag, mlen(j), what)
			verify(f.bufs[j][:mlen(j)], 1, f.peer, rank, j, what)
		}
	}
}

// ---------------------------------------------------------------------------
// thresholds: every protocol boundary ±1 byte.

// deviceOpt returns the device option key from ADIMPI_DEVICE_OPT (what
// mpirun -device-opt sets), or def.
func deviceOpt(key string, def int) int {
	for _, kv := range strings.Split(os.Getenv("ADIMPI_DEVICE_OPT"), ",") {
		k, v, ok := strings.Cut(kv, "=")
		if ok && strings.TrimSpace(k) == key {
			if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil {
				return n
			}
		}
	}
	return def
}

// thresholdSizes lists 0, 1, and every threshold of netvm ±1 byte: the
// eager limit, the chunk size (ring/4) and the ring size.
func thresholdSizes() (sizes []int, eager, ring int) {
	eager = deviceOpt("eager", 16384)
	ring = (deviceOpt("ring", 262144) + 63) &^ 63
	chunk := ring / 4
	sizes = []int{0, 1, hdr}
	seen := map[int]bool{0: true, 1: true, hdr: true}
	limits := []int{chunk, ring, 2*ring + chunk}
	if eager > 0 {
		limits = append([]int{eager}, limits...)
	}
	for _, t := range limits {
		for _, n := range []int{t - 1, t, t + 1} {
			if n >= 0 && !seen[n] {
				seen[n] = true
				sizes = append(sizes, n)
			}
		}
	}
	return sizes, eager, ring
}

func checkThresholds() {
	const tagB, tagN, tagBurst = 21, 22, 23
	sizes, eager, ring := thresholdSizes()
	maxLen := sizes[len(sizes)-1]
	// Blocking: ranks 2i and 2i+1 exchange every size, in both directions.
	// The even rank sends first, so nothing relies on buffering.
	if partner := rank ^ 1; partner < size {
		buf := make([]byte, maxLen+8)
		recvAll := func() {
			for k, n := range sizes {
				st, err := mpi.Recv(world, buf, partner, tagB)
				what := fmt.Sprintf("MPI_Recv of %d bytes", n)
				must(err, "%s", what)
				wantStatus(st, partner, tagB, n, what)
				verify(buf[:n], 2, partner, rank, k, what)
			}
		}
		sendAll := func() {
			// Odd sizes go synchronously, which takes the rendezvous path
			// at every size (netvm's split copy included).
			for k, n := range sizes {
				if k%2 == 1 {
					must(mpi.Ssend(world, message(n, 2, rank, partner, k), partner, tagB), "MPI_Ssend of %d bytes to %d", n, partner)
					continue
				}
				must(mpi.Send(world, message(n, 2, rank, partner, k), partner, tagB), "MPI_Send of %d bytes to %d", n, partner)
			}
		}
		if rank%2 == 0 {
			sendAll()
			recvAll()
		} else {
			recvAll()
			sendAll()
		}
	}
	// Non-blocking: every size around the ring at once, half the receives
	// with ANY_SOURCE (only the left neighbour sends this tag here).
	left, right := (rank+size-1)%size, (rank+1)%size
	var reqs []*mpi.Request
	bufs := make([][]byte, len(sizes))
	for k, n := range sizes {
		bufs[k] = make([]byte, n+8)
		src := left
		if k%2 == 1 {
			src = mpi.AnySource
		}
		reqs = append(reqs, irecv(bufs[k], src, tagN, fmt.Sprintf("of %d bytes", n)))
	}
	for k, n := range sizes {
		reqs = append(reqs, isend(message(n, 3, rank, right, k), right, tagN, fmt.Sprintf("of %d bytes", n)))
	}
	sts := waitall(reqs, "the threshold messages (eager=%d ring=%d)", eager, ring)
	for k, n := range sizes {
		what := fmt.Sprintf("MPI_Irecv of %d bytes (eager=%d ring=%d)", n, eager, ring)
		wantStatus(sts[k], left, tagN, n, what)
		verify(bufs[k][:n], 3, left, rank, k, what)
	}
	// A burst of eager-sized messages worth several rings, all outstanding.
	n := eager - 1
	if eager <= hdr { // eager=0: no eager messages; rendezvous just under a chunk
		n = ring/4 - 1
	}
	burst := 4*ring/n + 3
	reqs = reqs[:0]
	bufs = make([][]byte, burst)
	for k := range bufs {
		bufs[k] = make([]byte, n)
		reqs = append(reqs, irecv(bufs[k], left, tagBurst, fmt.Sprintf("burst #%d", k)))
	}
	for k := 0; k < burst; k++ {
		reqs = append(reqs, isend(message(n, 4, rank, right, k), right, tagBurst, fmt.Sprintf("burst #%d", k)))
	}
	sts = waitall(reqs, "a burst of %d messages of %d bytes (ring=%d)", burst, n, ring)
	for k := range bufs {
		what := fmt.Sprintf("burst receive #%d", k)
		wantStatus(sts[k], left, tagBurst, n, what)
		verify(bufs[k], 4, left, rank, k, what)
	}
}

// ---------------------------------------------------------------------------
// longrun: ≥ 10⁵ messages, then no leaks.

const longrunTotal = 100_000

func checkLongrun() {
	const (
		tagR, tagL, tagAny = 31, 32, 33 // and 35
		w                  = 16         // per round: messages per direction and stream
	)
	left, right := (rank+size-1)%size, (rank+1)%size
	perRound := 4 * w // sent (and received) by each rank per round
	rounds := (longrunTotal + size*perRound - 1) / (size * perRound)
	warm := rounds / 10
	mlen := func(seq int) int {
		if seq%97 == 13 {
			return 40000 // rendezvous at the default eager limit
		}
		return hdr + seq%48
	}
	var (
		sendSeq  = map[[2]int]int{} // (stream, destination) → next sequence number
		nextSeq  = map[[2]int]int{} // (stream, source) → next expected
		heapWarm uint64
	)
	bufs := make([][]byte, 4*w)
	for i := range bufs {
		bufs[i] = make([]byte, 40000)
	}
	srcs := make([]int, 4*w)
	tags := make([]int, 4*w)
	streams := make([]int, 4*w)
	reqs := make([]*mpi.Request, 0, 10*w)
	for r := 0; r < rounds; r++ {
		if r == warm {
			heapWarm = heapInuse()
		}
		reqs = reqs[:0]
		// Receives: w from the left (rightward stream), w from the right
		// (leftward stream), 2w with ANY_SOURCE (both neighbours send w
		// each). The ANY_SOURCE stream's tag alternates with the round's
		// parity: a neighbour can be at most one round ahead, so a receive
		// of round r only matches messages of round r. Otherwise a
		// neighbour running ahead could take them all and, where sends wait
		// for their receives (eager=0), the job would legitimately deadlock.
		anyTag := tagAny + 2*(r%2)
		for i := 0; i < 4*w; i++ {
			switch i % 4 {
			case 0:
				srcs[i], streams[i], tags[i] = left, tagR, tagR
			case 1:
				srcs[i], streams[i], tags[i] = right, tagL, tagL
			default:
				srcs[i], streams[i], tags[i] = mpi.AnySource, tagAny, anyTag
			}
			reqs = append(reqs, irecv(bufs[i], srcs[i], tags[i], "longrun"))
		}
		send := func(stream, dst, tag int) {
			k := [2]int{stream, dst}
			seq := sendSeq[k]
			sendSeq[k]++
			reqs = append(reqs, isend(message(mlen(seq), stream, rank, dst, seq), dst, tag, "longrun"))
		}
		for i := 0; i < w; i++ {
			send(tagR, right, tagR)
			send(tagL, left, tagL)
			send(tagAny, right, anyTag)
			send(tagAny, left, anyTag)
		}
		sts := waitall(reqs, "round %d of %d", r, rounds)
		for i := 0; i < 4*w; i++ {
			st := sts[i]
			if st.Err != nil || st.Bytes() < hdr {
				failf("round %d receive #%d (source %d, tag %d): status %+v", r, i, srcs[i], tags[i], st)
			}
			src, seq := header(bufs[i])
			if src != st.Source || (srcs[i] != mpi.AnySource && src != srcs[i]) {
				failf("round %d receive #%d (source %d, tag %d): status source %d, message from %d", r, i, srcs[i], tags[i], st.Source, src)
			}
			k := [2]int{streams[i], src}
			if seq != nextSeq[k] {
				failf("round %d receive #%d (source %d, tag %d): seq %d from %d, want %d: out of order", r, i, srcs[i], tags[i], seq, src, nextSeq[k])
			}
			nextSeq[k]++
			wantStatus(st, src, tags[i], mlen(seq), fmt.Sprintf("round %d receive #%d", r, i))
			verify(bufs[i][:st.Bytes()], streams[i], src, rank, seq, fmt.Sprintf("round %d receive #%d", r, i))
		}
	}
	heapEnd := heapInuse()
	must(mpi.Barrier(world), "MPI_Barrier")
	c := mpi.Counters()
	for _, k := range []string{"posted_receives", "rendezvous_sends", "rendezvous_receives", "backlog",
		"mpin_waiting_sends", "mpin_held_receives", "mpin_open_rtrs"} {
		if v := c[k]; v != 0 {
			failf("after %d rounds and a barrier the device counter %s = %d, want 0 (counters %v)", rounds, k, v, c)
		}
	}
	// A peer already in MPI_Finalize may have sent this rank its barrier
	// tokens (one per round of a dissemination barrier) or, under eager=0,
	// the requests for them.
	tokens := int64(bits.Len(uint(size - 1)))
	for _, k := range []string{"unexpected_messages", "mpin_unmatched_rtrs"} {
		if v := c[k]; v > tokens {
			failf("after %d rounds and a barrier the device counter %s = %d, want ≤ %d (counters %v)", rounds, k, v, tokens, c)
		}
	}
	if heapEnd > 2*heapWarm+8<<20 {
		failf("Go heap in use grew from %d bytes after %d rounds to %d bytes after %d rounds", heapWarm, warm, heapEnd, rounds)
	}
}

func heapInuse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// ---------------------------------------------------------------------------
// progress-rule: matching operations posted on two processes complete.

func checkProgressRule() {
	const K = 200
	const tag = 41
	partner := rank ^ 1
	if partner >= size {
		partner = rank // the odd one out plays both sides
	}
	mlen := func(seq int) int {
		if seq%23 == 7 {
			return 30000 + seq
		}
		return hdr + seq%29
	}
	// Each side posts its K receives and K sends in its own interleaving, a
	// deterministic pseudo-random sequence seeded by the rank: the even rank
	// leans towards receives first, the odd one towards sends. Neither waits
	// for anything until the final Waitall.
	x := uint64(rank)*0x9e3779b97f4a7c15 + 1
	reqs := make([]*mpi.Request, 0, 2*K)
	rIdx := make([]int, 0, K)
	bufs := make([][]byte, K)
	ns, nr := 0, 0
	for ns < K || nr < K {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		doRecv := nr < K && (ns == K || x%3 != 0)
		if rank%2 == 1 {
			doRecv = nr < K && (ns == K || x%3 == 0)
		}
		if doRecv {
			bufs[nr] = make([]byte, 30000+K)
			rIdx = append(rIdx, len(reqs))
			reqs = append(reqs, irecv(bufs[nr], partner, tag, fmt.Sprintf("#%d", nr)))
			nr++
		} else {
			reqs = append(reqs, isend(message(mlen(ns), 5, rank, partner, ns), partner, tag, fmt.Sprintf("#%d", ns)))
			ns++
		}
	}
	sts := waitall(reqs, "%d receives and %d sends interleaved", K, K)
	for j, i := range rIdx {
		what := fmt.Sprintf("receive #%d", j)
		if sts[i].Bytes() >= hdr {
			if src, seq := header(bufs[j]); src != partner || seq != j {
				failf("%s got message seq %d from %d: matched out of order", what, seq, src)
			}
		}
		wantStatus(sts[i], partner, tag, mlen(j), what)
		verify(bufs[j][:mlen(j)], 5, partner, rank, j, what)
	}
}
