package mpi

import (
	"encoding/binary"

	"github.com/adimpi/adimpi/adi"
)

// The collective algorithms, on packed contiguous bytes. Every algorithm
// reduces in a fixed order, so results are identical on every rank and from
// run to run; reductions combine operands in rank order (lower ranks on the
// left), which makes them correct for non-commutative operations too.
//
// Algorithm choice (n processes, m bytes), after MPICH:
//
//	Barrier      dissemination
//	Bcast        binomial tree if m < 12 KiB or n < 8, else binomial scatter + ring allgather;
//	             on a device with multidestination sends, a star (m ≤ 64 KiB) or a
//	             pipelined 4-ary tree of 64 KiB pieces (collmulti.go)
//	Reduce       binomial tree (non-commutative ops: to rank 0, then to root)
//	Allreduce    recursive doubling if m < 16 KiB, the op is non-commutative or count < 2^⌊log n⌋;
//	             else a count agreement in the same pattern, then Rabenseifner
//	             (recursive-halving reduce-scatter + recursive-doubling allgather)
//	Gather       binomial tree; Gatherv linear
//	Scatter      binomial tree; Scatterv linear
//	Allgather    recursive doubling if n is a power of two, else Bruck (in place);
//	             never chosen by size, so that ranks whose counts differ agree. Allgatherv ring
//	Alltoall(v)  pairwise exchange (XOR partners when n is a power of two)
//	ReduceScatter(Block)  commutative ops: pairwise exchange (each rank reduces its own block);
//	             non-commutative: binomial reduce to rank 0 + scatter(v)
//	Scan, Exscan recursive doubling

const (
	bcastShort     = 12288
	bcastMinProcs  = 8
	allreduceShort = 16384
	nonePeer       = -1
)

func pof2Below(n int) int {
	p := 1
	for p*2 <= n {
		p *= 2
	}
	return p
}

func (e *coll) barrier() error {
	if e.h.tiered() {
		return e.hierBarrier()
	}
	for k := 1; k < e.size; k <<= 1 {
		if err := e.sendrecv((e.rank+k)%e.size, nil, (e.rank-k+e.size)%e.size, nil); err != nil {
			return err
		}
	}
	return nil
}

func (e *coll) abs(rel, root int) int { return (rel + root) % e.size }

// bcast broadcasts root's buf. The root's byte count goes first, with the
// data when they are short (bcastHead), and every rank then runs the
// algorithm that count chooses over a buffer of that size: a rank whose
// count differs from the root's neither truncates a message (and so stops
// passing the data on) nor picks another algorithm than its peers. It gets
// what fits and the mismatch (countMismatch); the root sees none.
func (e *coll) bcast(buf []byte, root int) error {
	if e.size == 1 {
		return nil
	}
	if e.h.tiered() {
		return e.hierBcast(buf, root)
	}
	inline := bcastShort
	if e.multisender(0) != nil {
		inline = multiShort
	}
	var hdr []byte
	if e.rank == root {
		hl := 8 // the count alone, when the data go after it
		if len(buf) <= inline {
			hl += len(buf)
		}
		hdr = scratch(hl)
		copy(hdr[8:], buf)
	} else {
		hdr = scratch(8 + inline)
	}
	defer release(hdr)
	binary.LittleEndian.PutUint64(hdr, uint64(len(buf)))
	got, err := e.bcastHead(hdr, root)
	if err != nil {
		return err
	}
	n := int(binary.LittleEndian.Uint64(hdr))
	if e.rank == root {
		if n > inline {
			return e.bcastData(buf, root)
		}
		return nil
	}
	if n <= inline {
		return e.bcastInline(hdr, got, buf, root)
	}
	work := buf
	if n > len(buf) {
		work = scratch(n)
		defer release(work)
	}
	if err := e.bcastData(work[:n], root); err != nil {
		return err
	}
	if n > len(buf) {
		copy(buf, work)
	}
	return countMismatch(e.op, root, n, len(buf))
}

// bcastHead passes hdr from root to every rank (over a multidestination
// star where the device has one, else a binomial tree) on a tag of its own;
// the other ranks' hdr is large enough for any header. It returns the
// header's length.
func (e *coll) bcastHead(hdr []byte, root int) (int, error) {
	n := e.size
	tag := e.tag + 1
	rel := (e.rank - root + n) % n
	if ms := e.multisender(0); ms != nil {
		if rel != 0 {
			return e.recvTag(root, tag, hdr)
		}
		to := make([]int, 0, n-1)
		for i := 1; i < n; i++ {
			to = append(to, e.world[e.abs(i, root)])
		}
		q := &adi.Request{Op: adi.OpSend, Context: e.ctx, Tag: tag, Buf: adi.Bytes(hdr)}
		e.r.mu.Lock()
		err := ms.IsendMulti(q, to)
		e.r.mu.Unlock()
		if err != nil {
			return 0, errorf(ErrOther, e.op, "%v", err)
		}
		return len(hdr), e.wait(q)
	}
	got := len(hdr)
	mask := 1
	for ; mask < n; mask <<= 1 {
		if rel&mask != 0 {
			var err error
			if got, err = e.recvTag(e.abs(rel-mask, root), tag, hdr); err != nil {
				return 0, err
			}
			break
		}
	}
	var reqs []*adi.Request
	for mask >>= 1; mask > 0; mask >>= 1 {
		if rel+mask < n {
			q, err := e.postTag(true, e.abs(rel+mask, root), tag, hdr[:got])
			if err != nil {
				_ = e.wait(reqs...)
				return 0, err
			}
			reqs = append(reqs, q)
		}
	}
	return got, e.wait(reqs...)
}

// recvTag receives from peer on tag into b and returns the bytes received.
func (e *coll) recvTag(peer, tag int, b []byte) (int, error) {
	q, err := e.postTag(false, peer, tag, b)
	if err != nil {
		return 0, err
	}
	if err := e.wait(q); err != nil {
		return 0, err
	}
	return q.Status.Bytes, nil
}

// bcastInline finishes a broadcast whose data came with its header (hdr,
// got bytes, announcing n ≤ inline bytes) at a non-root rank: it copies
// what fits into buf and reports a count that differs from buf's.
func (e *coll) bcastInline(hdr []byte, got int, buf []byte, root int) error {
	n := int(binary.LittleEndian.Uint64(hdr))
	if got != 8+n {
		return errorf(ErrOther, e.op, "broadcast header of %d bytes announces %d", got, n)
	}
	copy(buf, hdr[8:got])
	return countMismatch(e.op, root, n, len(buf))
}

// bcastData broadcasts buf, which has the same length on every rank.
func (e *coll) bcastData(buf []byte, root int) error {
	if ms := e.multisender(len(buf)); ms != nil {
		return e.bcastMulti(ms, buf, root)
	}
	if len(buf) < bcastShort || e.size < bcastMinProcs {
		return e.bcastBinomial(buf, root)
	}
	return e.bcastScatterRing(buf, root)
}

func (e *coll) bcastBinomial(buf []byte, root int) error {
	n := e.size
	rel := (e.rank - root + n) % n
	mask := 1
	for mask < n {
		if rel&mask != 0 {
			if err := e.recv(e.abs(rel-mask, root), buf); err != nil {
				return err
			}
			break
		}
		mask <<= 1
	}
	for mask >>= 1; mask > 0; mask >>= 1 {
		if rel+mask < n {
			if err := e.send(e.abs(rel+mask, root), buf); err != nil {
				return err
			}
		}
	}
	return nil
}

// chunk is the byte range of relative rank i's piece when m bytes are cut
// into n pieces of cs bytes (the last ones may be short or empty).
func chunk(i, cs, m int) (int, int) {
	lo, hi := min(i*cs, m), min((i+1)*cs, m)
	return lo, hi
}

func (e *coll) bcastScatterRing(buf []byte, root int) error {
	n, m := e.size, len(buf)
	cs := (m + n - 1) / n
	rel := (e.rank - root + n) % n
	// Binomial scatter: relative rank x ends up with pieces [x, x+lowbit(x)).
	mask := 1
	for mask < n {
		if rel&mask != 0 {
			lo, _ := chunk(rel, cs, m)
			_, hi := chunk(min(rel+mask, n)-1, cs, m)
			if hi > lo {
				if err := e.recv(e.abs(rel-mask, root), buf[lo:hi]); err != nil {
					return err
				}
			}
			break
		}
		mask <<= 1
	}
	for mask >>= 1; mask > 0; mask >>= 1 {
		if child := rel + mask; child < n {
			lo, _ := chunk(child, cs, m)
			_, hi := chunk(min(child+mask, n)-1, cs, m)
			if hi > lo {
				if err := e.send(e.abs(child, root), buf[lo:hi]); err != nil {
					return err
				}
			}
		}
	}
	// Ring allgather of the pieces.
	left, right := e.abs((rel-1+n)%n, root), e.abs((rel+1)%n, root)
	for i := 0; i < n-1; i++ {
		sl, sh := chunk((rel-i+n)%n, cs, m)
		rl, rh := chunk((rel-i-1+2*n)%n, cs, m)
		dst, src := right, left
		if sh == sl {
			dst = nonePeer
		}
		if rh == rl {
			src = nonePeer
		}
		if err := e.sendrecv(dst, buf[sl:sh], src, buf[rl:rh]); err != nil {
			return err
		}
	}
	return nil
}

// reduce combines every rank's send into recv at root (recv is only used at
// root). send is not written. Its messages carry trailers (collcount.go):
// the root sees every rank's count.
func (e *coll) reduce(send, recv []byte, red reducer, root int) error {
	if e.size == 1 {
		copy(recv, send)
		return nil
	}
	if e.hierOrdered(red) {
		return e.hierReduce(send, recv, red, root)
	}
	s := ownSpan(len(send))
	if err := e.reduceTree(send, recv, red, root, &s); err != nil {
		return err
	}
	return s.err(e.op)
}

// reduceTree is reduce's binomial tree. It merges into s the spans of the
// ranks whose data reach this rank (at root: every rank's) and returns
// only the errors of its messages; the caller judges s.
func (e *coll) reduceTree(send, recv []byte, red reducer, root int, s *countSpan) error {
	n, m := e.size, len(send)
	if n == 1 {
		copy(recv, send)
		return nil
	}
	treeRoot := root
	if !red.commute {
		treeRoot = 0
	}
	rel := (e.rank - treeRoot + n) % n
	acc, tmp := trailed(m), trailed(m)
	defer func() { release(acc[:cap(acc)], tmp[:cap(tmp)]) }()
	copy(acc, send)
	for mask := 1; mask < n; mask <<= 1 {
		if rel&mask == 0 {
			src := rel | mask
			if src < n {
				if err := e.exchangeTrailed(nonePeer, nil, 0, e.abs(src, treeRoot), tmp, s); err != nil {
					return err
				}
				red.apply(acc, tmp) // tmp = acc op tmp: acc holds the lower ranks
				acc, tmp = tmp, acc
			}
		} else {
			if err := e.exchangeTrailed(e.abs(rel&^mask, treeRoot), acc, m, nonePeer, nil, s); err != nil {
				return err
			}
			break
		}
	}
	switch {
	case treeRoot == root:
		if e.rank == root {
			copy(recv, acc)
		}
	case e.rank == treeRoot:
		if err := e.exchangeTrailed(root, acc, m, nonePeer, nil, s); err != nil {
			return err
		}
	case e.rank == root:
		if err := e.exchangeTrailed(nonePeer, nil, 0, treeRoot, tmp, s); err != nil {
			return err
		}
		copy(recv, tmp)
	}
	return nil
}

// allreduce reduces buf over every rank in place; es is the element size.
// Short vectors (and non-commutative operations, and vectors of fewer
// elements than the power of two) take recursive doubling with trailers
// (allreduceTrailed); long ones agree their counts in the same message
// pattern with trailers alone, then run Rabenseifner's algorithm, whose
// messages are slices of buf. A rank whose count differs from a peer's
// never runs Rabenseifner's algorithm, whichever its own count chooses.
func (e *coll) allreduce(buf []byte, red reducer, es int) error {
	n, m := e.size, len(buf)
	if n == 1 {
		return nil
	}
	if e.hierOrdered(red) {
		return e.hierAllreduce(buf, red, es)
	}
	s := ownSpan(m)
	if err := e.allreduceSpan(buf, red, es, &s); err != nil {
		return err
	}
	return s.err(e.op)
}

// allreduceSpan is allreduce's message algorithm. It merges into s (this
// rank's span on entry) the spans of every rank, so that every rank ends
// with the same span, and returns only the errors of its messages: buf
// holds the result when s shows one count, and the caller judges s.
func (e *coll) allreduceSpan(buf []byte, red reducer, es int, s *countSpan) error {
	n, m := e.size, len(buf)
	pof2 := pof2Below(n)
	if m < allreduceShort || !red.commute || m/es < pof2 {
		return e.allreduceTrailed(buf, red, es, true, s)
	}
	if err := e.allreduceTrailed(buf, red, es, false, s); err != nil || s.lo != s.hi {
		return err
	}
	rem := n - pof2
	tmp := scratch(m)
	defer release(tmp)
	var err error
	newrank := e.rank - rem
	if e.rank < 2*rem {
		if e.rank%2 == 0 {
			err = e.send(e.rank+1, buf)
			newrank = -1
		} else {
			if err = e.recv(e.rank-1, tmp); err == nil {
				red.apply(tmp, buf)
			}
			newrank = e.rank / 2
		}
		if err != nil {
			return err
		}
	}
	phys := func(nr int) int {
		if nr < rem {
			return nr*2 + 1
		}
		return nr + rem
	}
	if newrank >= 0 {
		if err := e.rabenseifner(buf, tmp, red, es, newrank, pof2, phys); err != nil {
			return err
		}
	}
	if e.rank < 2*rem {
		if e.rank%2 == 1 {
			return e.send(e.rank-1, buf)
		}
		return e.recv(e.rank+1, buf)
	}
	return nil
}

func (e *coll) rabenseifner(buf, tmp []byte, red reducer, es, newrank, pof2 int, phys func(int) int) error {
	count := len(buf) / es
	cnts := make([]int, pof2)
	disps := make([]int, pof2+1)
	for i := range cnts {
		cnts[i] = count / pof2
		if i < count%pof2 {
			cnts[i]++
		}
		disps[i+1] = disps[i] + cnts[i]
	}
	rng := func(a, b int) (int, int) { return disps[a] * es, disps[b] * es }
	sendIdx, recvIdx, lastIdx := 0, 0, pof2
	mask := 1
	for ; mask < pof2; mask <<= 1 {
		newdst := newrank ^ mask
		var sa, sb, ra, rb int
		if newrank < newdst {
			sendIdx = recvIdx + pof2/(mask*2)
			sa, sb = rng(sendIdx, lastIdx)
			ra, rb = rng(recvIdx, sendIdx)
		} else {
			recvIdx = sendIdx + pof2/(mask*2)
			sa, sb = rng(sendIdx, recvIdx)
			ra, rb = rng(recvIdx, lastIdx)
		}
		if err := e.sendrecv(phys(newdst), buf[sa:sb], phys(newdst), tmp[ra:rb]); err != nil {
			return err
		}
		if newdst < newrank {
			red.apply(tmp[ra:rb], buf[ra:rb])
		} else {
			red.apply(buf[ra:rb], tmp[ra:rb])
			copy(buf[ra:rb], tmp[ra:rb])
		}
		sendIdx = recvIdx
		if mask*2 < pof2 {
			lastIdx = recvIdx + pof2/(mask*2)
		}
	}
	for mask >>= 1; mask > 0; mask >>= 1 {
		newdst := newrank ^ mask
		var sa, sb, ra, rb int
		if newrank < newdst {
			if mask != pof2/2 {
				lastIdx += pof2 / (mask * 2)
			}
			recvIdx = sendIdx + pof2/(mask*2)
			sa, sb = rng(sendIdx, recvIdx)
			ra, rb = rng(recvIdx, lastIdx)
		} else {
			recvIdx = sendIdx - pof2/(mask*2)
			sa, sb = rng(sendIdx, lastIdx)
			ra, rb = rng(recvIdx, sendIdx)
		}
		if err := e.sendrecv(phys(newdst), buf[sa:sb], phys(newdst), buf[ra:rb]); err != nil {
			return err
		}
		if newrank > newdst {
			sendIdx = recvIdx
		}
	}
	return nil
}

// allgather gathers every rank's block mine into all (n blocks, rank order):
// recursive doubling when n is a power of two, else Bruck's algorithm in
// place (allgatherBruck). Neither choice depends on the block size, so
// ranks whose counts differ still exchange the same messages with the same
// peers. Its receives are exact (waitExact); every rank takes part, even
// with empty blocks, since a peer's may not be.
func (e *coll) allgather(mine, all []byte) error {
	n, bs := e.size, len(mine)
	copy(all[e.rank*bs:], mine)
	if n == 1 {
		return nil
	}
	if e.h.tiered() {
		return e.hierAllgather(mine, all)
	}
	e.exact = true
	if n&(n-1) != 0 {
		return e.allgatherBruck(all, bs)
	}
	for mask := 1; mask < n; mask <<= 1 {
		dst := e.rank ^ mask
		my, their := (e.rank&^(mask-1))*bs, (dst&^(mask-1))*bs
		if err := e.sendrecv(dst, all[my:my+mask*bs], dst, all[their:their+mask*bs]); err != nil {
			return err
		}
	}
	return e.mis
}

// allgatherBruck is Bruck's allgather, in all itself: after a step with
// cur, rank r holds the cur blocks that end at its own (r-cur+1 … r, mod
// n); it sends them to rank r+cur and receives those of rank r-cur. A range
// that wraps past block n-1 goes as two messages, which both ends count
// from the ranks alone.
func (e *coll) allgatherBruck(all []byte, bs int) error {
	n := e.size
	for cur := 1; cur < n; cur <<= 1 {
		k := min(cur, n-cur) // blocks this step moves
		dst, src := (e.rank+cur)%n, (e.rank-cur+n)%n
		var reqs []*adi.Request
		for _, b := range blockRange(all, bs, n, src, k) {
			q, err := e.irecv(src, b)
			if err != nil {
				_ = e.wait(reqs...)
				return err
			}
			reqs = append(reqs, q)
		}
		for _, b := range blockRange(all, bs, n, e.rank, k) {
			q, err := e.isend(dst, b)
			if err != nil {
				_ = e.wait(reqs...)
				return err
			}
			reqs = append(reqs, q)
		}
		if err := e.wait(reqs...); err != nil {
			return err
		}
	}
	return e.mis
}

// blockRange is the k blocks of bs bytes that end at block last, in one
// piece, or two when they wrap past block n-1.
func blockRange(all []byte, bs, n, last, k int) [][]byte {
	first := last - k + 1
	if first >= 0 {
		return [][]byte{all[first*bs : (last+1)*bs]}
	}
	return [][]byte{all[(first+n)*bs : n*bs], all[:(last+1)*bs]}
}

// allgatherv is a ring over blocks at byte offsets off[i] of sizes sz[i];
// this rank's block must already be in place.
func (e *coll) allgatherv(all []byte, off, sz []int) error {
	return e.ring(all, off, sz, true)
}

// ring is allgatherv; with skip, it neither sends nor receives empty
// blocks (Allgatherv: every rank knows every block's size), else every
// step exchanges a message, empty or not (tiered Allgather: a rank whose
// count is zero still meets peers whose counts are not).
func (e *coll) ring(all []byte, off, sz []int, skip bool) error {
	n := e.size
	e.exact = true // see waitExact
	left, right := (e.rank-1+n)%n, (e.rank+1)%n
	for i := 0; i < n-1; i++ {
		s, r := (e.rank-i+n)%n, (e.rank-i-1+2*n)%n
		dst, src := right, left
		if skip && sz[s] == 0 {
			dst = nonePeer
		}
		if skip && sz[r] == 0 {
			src = nonePeer
		}
		if err := e.sendrecv(dst, all[off[s]:off[s]+sz[s]], src, all[off[r]:off[r]+sz[r]]); err != nil {
			return err
		}
	}
	return e.mis
}

// gather collects blocks of bs bytes at root into all (rank order). Its
// receives are exact (waitExact), and every rank takes part, even with an
// empty block.
func (e *coll) gather(mine, all []byte, root int) error {
	n, bs := e.size, len(mine)
	e.exact = true
	if n == 1 {
		copy(all, mine)
		return nil
	}
	if e.h.tiered() {
		return e.hierGather(mine, all, root)
	}
	rel := (e.rank - root + n) % n
	held := 1 // blocks held, for relative ranks [rel, rel+held)
	var tmp []byte
	if rel == 0 {
		tmp = scratch(n * bs)
	} else {
		low := rel & -rel
		tmp = scratch(min(low, n-rel) * bs)
	}
	defer release(tmp)
	copy(tmp, mine)
	for mask := 1; mask < n; mask <<= 1 {
		if rel&mask == 0 {
			src := rel | mask
			if src < n {
				k := min(mask, n-src)
				if err := e.recv(e.abs(src, root), tmp[mask*bs:(mask+k)*bs]); err != nil {
					return err
				}
				held = mask + k
			}
		} else {
			if err := e.send(e.abs(rel&^mask, root), tmp[:held*bs]); err != nil {
				return err
			}
			return e.mis
		}
	}
	for i := 0; i < n; i++ {
		j := e.abs(i, root)
		copy(all[j*bs:(j+1)*bs], tmp[i*bs:(i+1)*bs])
	}
	return e.mis
}

// scatter sends block i of all (at root) to rank i's mine. Its receives
// are exact (waitExact), and every rank takes part, even with an empty
// block.
func (e *coll) scatter(all, mine []byte, root int) error {
	n, bs := e.size, len(mine)
	e.exact = true
	if n == 1 {
		copy(mine, all)
		return nil
	}
	if e.h.tiered() {
		return e.hierScatter(all, mine, root)
	}
	rel := (e.rank - root + n) % n
	var tmp []byte
	mask := 1
	if rel == 0 {
		tmp = scratch(n * bs)
		for i := 0; i < n; i++ {
			j := e.abs(i, root)
			copy(tmp[i*bs:(i+1)*bs], all[j*bs:(j+1)*bs])
		}
		for mask < n {
			mask <<= 1
		}
	} else {
		low := rel & -rel
		tmp = scratch(min(low, n-rel) * bs)
		if err := e.recv(e.abs(rel-low, root), tmp); err != nil {
			release(tmp)
			return err
		}
		mask = low
	}
	defer release(tmp)
	for mask >>= 1; mask > 0; mask >>= 1 {
		if child := rel + mask; child < n {
			k := min(mask, n-child)
			if err := e.send(e.abs(child, root), tmp[mask*bs:(mask+k)*bs]); err != nil {
				return err
			}
		}
	}
	copy(mine, tmp[:bs])
	return e.mis
}

// alltoall exchanges blocks of bs bytes by pairwise steps (as alltoallv),
// with exact receives (waitExact) and empty blocks sent too.
func (e *coll) alltoall(send, recv []byte, bs int) error {
	n := e.size
	e.exact = true
	copy(recv[e.rank*bs:(e.rank+1)*bs], send[e.rank*bs:])
	pow2 := n&(n-1) == 0
	for i := 1; i < n; i++ {
		dst, src := (e.rank+i)%n, (e.rank-i+n)%n
		if pow2 {
			dst, src = e.rank^i, e.rank^i
		}
		if err := e.sendrecv(dst, send[dst*bs:(dst+1)*bs], src, recv[src*bs:(src+1)*bs]); err != nil {
			return err
		}
	}
	return e.mis
}

// alltoallv exchanges, by pairwise steps, block i of send (soff, ssz) for
// block i of recv (roff, rsz).
func (e *coll) alltoallv(send []byte, soff, ssz []int, recv []byte, roff, rsz []int) error {
	n := e.size
	e.exact = true // see waitExact
	copy(recv[roff[e.rank]:roff[e.rank]+rsz[e.rank]], send[soff[e.rank]:soff[e.rank]+ssz[e.rank]])
	pow2 := n&(n-1) == 0
	for i := 1; i < n; i++ {
		dst, src := (e.rank+i)%n, (e.rank-i+n)%n
		if pow2 {
			dst, src = e.rank^i, e.rank^i
		}
		d, s := dst, src
		if ssz[dst] == 0 {
			d = nonePeer
		}
		if rsz[src] == 0 {
			s = nonePeer
		}
		if err := e.sendrecv(d, send[soff[dst]:soff[dst]+ssz[dst]], s, recv[roff[src]:roff[src]+rsz[src]]); err != nil {
			return err
		}
	}
	return e.mis
}

// scan computes the inclusive (or, with exclusive, exclusive) prefix
// reduction of send into recv. For exclusive, rank 0's recv is not written.
// Its messages carry trailers (collcount.go).
func (e *coll) scan(send, recv []byte, red reducer, exclusive bool) error {
	m := len(send)
	partial, tmp := trailed(m), trailed(m)
	defer func() { release(partial[:cap(partial)], tmp[:cap(tmp)]) }()
	copy(partial, send)
	have := !exclusive
	if have {
		copy(recv, send)
	}
	s := ownSpan(m)
	for mask := 1; mask < e.size; mask <<= 1 {
		dst := e.rank ^ mask
		if dst >= e.size {
			continue
		}
		if err := e.exchangeTrailed(dst, partial, m, dst, tmp, &s); err != nil {
			return err
		}
		if e.rank > dst {
			if have {
				red.apply(tmp, recv)
			} else {
				copy(recv, tmp)
				have = true
			}
			red.apply(tmp, partial)
		} else {
			red.apply(partial, tmp)
			partial, tmp = tmp, partial
		}
	}
	return s.err(e.op)
}

// reduceScatterPairwise reduces, for a commutative operation, block i of
// every rank's send (byte ranges off[i]:off[i+1]) into rank i's mine: in
// step k each rank sends to rank+k the block for it and folds in the block
// received from rank-k. Fixed order per rank, so runs are repeatable. Its
// receives are exact (waitExact), and empty blocks are sent too: a peer's
// counts may not be this rank's.
func (e *coll) reduceScatterPairwise(send []byte, off []int, mine []byte, red reducer) error {
	n, me := e.size, e.rank
	copy(mine, send[off[me]:off[me+1]])
	tmp := scratch(len(mine))
	defer release(tmp)
	e.exact = true
	for k := 1; k < n; k++ {
		dst, src := (me+k)%n, (me-k+n)%n
		if err := e.sendrecv(dst, send[off[dst]:off[dst+1]], src, tmp); err != nil {
			return err
		}
		red.apply(tmp, mine)
	}
	return e.mis
}
