package netvm

import (
	"encoding/binary"
	"fmt"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/adimpi/adimpi/adi"
	"github.com/adimpi/adimpi/datatype"
)

// vrun is a regular run of equal pieces: count pieces of n bytes, the k-th
// at addr + k*stride. A layout (a buffer's packed bytes, in order) is a list
// of runs; a Vector is one run however many blocks it has, so a layout
// travels in 32 bytes per run instead of 16 per block. For a local layout
// addr is an offset into the buffer's memory; for a remote one, an address
// in the peer's virtual memory.
type vrun struct {
	addr   uint64
	n      uint64
	stride int64
	count  uint64
}

const vrunBytes = 32

// addPiece appends the piece (a, n) to a layout, extending its last run
// when the piece continues that run's pattern.
func addPiece(runs []vrun, a, n uint64) []vrun {
	if k := len(runs); k > 0 {
		r := &runs[k-1]
		switch {
		case r.count == 1 && r.n == n:
			r.stride, r.count = int64(a-r.addr), 2
			return runs
		case r.n == n && a == r.addr+uint64(int64(r.count)*r.stride):
			r.count++
			return runs
		case r.count == 1 && a == r.addr+r.n: // adjacent: one longer piece
			r.n += n
			return runs
		}
	}
	return append(runs, vrun{addr: a, n: n, count: 1})
}

// localRuns appends the layout of b's packed bytes [off, off+n), as offsets
// into b.Mem, to dst.
func localRuns(b adi.Buffer, off, n int, dst []vrun) []vrun {
	if n <= 0 {
		return dst
	}
	base := uintptr(unsafe.Pointer(unsafe.SliceData(b.Mem)))
	_ = b.Pieces(off, n, func(p []byte) error {
		dst = addPiece(dst, uint64(uintptr(unsafe.Pointer(&p[0]))-base), uint64(len(p)))
		return nil
	})
	return dst
}

// encodeRuns appends the runs, rebased to the address base, to out.
func encodeRuns(out []byte, runs []vrun, base uint64) []byte {
	for _, r := range runs {
		out = binary.LittleEndian.AppendUint64(out, r.addr+base)
		out = binary.LittleEndian.AppendUint64(out, r.n)
		out = binary.LittleEndian.AppendUint64(out, uint64(r.stride))
		out = binary.LittleEndian.AppendUint64(out, r.count)
	}
	return out
}

// decodeRuns appends the runs encoded in raw to dst.
func decodeRuns(raw []byte, dst []vrun) []vrun {
	for ; len(raw) >= vrunBytes; raw = raw[vrunBytes:] {
		dst = append(dst, vrun{addr: binary.LittleEndian.Uint64(raw), n: binary.LittleEndian.Uint64(raw[8:]),
			stride: int64(binary.LittleEndian.Uint64(raw[16:])), count: binary.LittleEndian.Uint64(raw[24:])})
	}
	return dst
}

// runsBytes is the number of bytes a layout covers.
func runsBytes(runs []vrun) uint64 {
	t := uint64(0)
	for _, r := range runs {
		t += r.n * r.count
	}
	return t
}

// cursor walks a layout byte by byte position. With maxGap > 0, the gaps
// of at most maxGap bytes between the pieces of a run with a positive
// stride are walked too (next reports them), so that a reader can take a
// whole run in one remote iovec and drop the gap bytes.
type cursor struct {
	runs   []vrun
	maxGap uint64
	i      int    // run
	k      uint64 // piece within the run
	off    uint64 // bytes of that piece already passed
	gap    uint64 // bytes of the gap after piece k still to walk
}

// seek positions the cursor at byte pos of the layout (gaps not counted).
func (c *cursor) seek(pos uint64) {
	c.i, c.k, c.off, c.gap = 0, 0, 0, 0
	for c.i < len(c.runs) {
		r := c.runs[c.i]
		if t := r.n * r.count; pos >= t {
			pos -= t
			c.i++
			continue
		}
		c.k, c.off = pos/r.n, pos%r.n
		return
	}
}

// next returns the address and length of the next at most max bytes, all
// in one piece, and advances; n is 0 at the end of the layout. gap reports
// bytes between two pieces (see maxGap), which do not count as data.
func (c *cursor) next(max uint64) (addr, n uint64, gap bool) {
	for c.i < len(c.runs) {
		r := c.runs[c.i]
		if c.gap > 0 {
			addr = r.addr + uint64(int64(c.k)*r.stride) - c.gap
			n = min(max, c.gap)
			c.gap -= n
			return addr, n, true
		}
		if c.k >= r.count || r.n == 0 {
			c.i, c.k, c.off = c.i+1, 0, 0
			continue
		}
		addr = r.addr + uint64(int64(c.k)*r.stride) + c.off
		n = min(max, r.n-c.off)
		if c.off += n; c.off == r.n {
			c.k, c.off = c.k+1, 0
			if g := uint64(r.stride) - r.n; r.stride > int64(r.n) && g <= c.maxGap && c.k < r.count {
				c.gap = g
			}
		}
		return addr, n, false
	}
	return 0, 0, false
}

// vmCopy moves n bytes between the local layout (offsets into mem) starting
// at its byte lpos and the remote layout of process pid starting at its
// byte rpos, with as few process_vm_writev (write) or process_vm_readv
// calls as the kernel's iovec limit allows: one copy, done by this process
// alone, whatever the two layouts are. The kernel pins the pages of every
// remote iovec separately (about a microsecond each), while local iovecs
// cost little; so a read (sink != nil) takes the small gaps of a regular
// remote run along, into sink, and the run becomes one remote iovec.
func vmCopy(pid int, write bool, mem []byte, local []vrun, lpos uint64, remote []vrun, rpos uint64, n uint64, sink []byte) error {
	const maxIov = 1024
	var liov [maxIov]unix.Iovec
	var riov [maxIov]unix.RemoteIovec
	lc, rc := cursor{runs: local}, cursor{runs: remote}
	if !write {
		rc.maxGap = uint64(len(sink))
	}
	lc.seek(lpos)
	rc.seek(rpos)
	done := uint64(0)
	var la, ll, ra, rl uint64 // the current pieces' unconsumed parts
	rgap := false             // the remote part is a gap: its bytes go to sink
	for done < n {
		nl, nr, total, data := 0, 0, 0, uint64(0)
		for data < n-done {
			if rl == 0 {
				if ra, rl, rgap = rc.next(n - done - data); rl == 0 {
					return fmt.Errorf("netvm: remote layout ends before %d bytes", n)
				}
			}
			if ll == 0 && !rgap {
				if la, ll, _ = lc.next(n - done - data); ll == 0 {
					return fmt.Errorf("netvm: local layout ends before %d bytes", n)
				}
			}
			k := rl
			var lp *byte
			if rgap {
				lp = &sink[0]
			} else {
				k = min(ll, rl)
				lp = &mem[la]
			}
			// extend the last iovecs when this part continues them
			if nl > 0 && !rgap && lp == (*byte)(unsafe.Add(unsafe.Pointer(liov[nl-1].Base), liov[nl-1].Len)) {
				liov[nl-1].SetLen(int(liov[nl-1].Len) + int(k))
			} else if nl == maxIov {
				break
			} else {
				liov[nl] = unix.Iovec{Base: lp}
				liov[nl].SetLen(int(k))
				nl++
			}
			if nr > 0 && uintptr(ra) == riov[nr-1].Base+uintptr(riov[nr-1].Len) {
				riov[nr-1].Len += int(k)
			} else if nr == maxIov {
				liov[nl-1].SetLen(int(liov[nl-1].Len) - int(k)) // undo the local part of k
				if liov[nl-1].Len == 0 {
					nl--
				}
				break
			} else {
				riov[nr] = unix.RemoteIovec{Base: uintptr(ra), Len: int(k)}
				nr++
			}
			total += int(k)
			ra, rl = ra+k, rl-k
			if !rgap {
				data += k
				la, ll = la+k, ll-k
			}
		}
		var got int
		var err error
		for {
			if write {
				got, err = unix.ProcessVMWritev(pid, liov[:nl], riov[:nr], 0)
			} else {
				got, err = unix.ProcessVMReadv(pid, liov[:nl], riov[:nr], 0)
			}
			if err != syscall.EINTR {
				break
			}
		}
		if err == nil && got != total {
			err = fmt.Errorf("short transfer, %d of %d bytes", got, total)
		}
		if err != nil {
			op := "process_vm_readv"
			if write {
				op = "process_vm_writev"
			}
			return fmt.Errorf("netvm: %s pid %d, %d iovecs: %w", op, pid, nr, err)
		}
		done += data
	}
	return nil
}

// regularRuns returns the layout of b's packed bytes when its type is a
// Vector or Hvector of a contiguous type, computed from the constructor's
// arguments without walking the blocks (nil otherwise). Chunk copies of such
// buffers then cost a few instructions per block (copyRuns) instead of a
// call per block.
func regularRuns(b adi.Buffer) []vrun {
	t := b.Type
	if t == nil || b.Count <= 0 || t.Size() == 0 {
		return nil
	}
	if b.Contiguous() {
		return []vrun{{n: uint64(b.Size()), count: 1}}
	}
	env := t.GetEnvelope()
	if env.Combiner != datatype.CombinerVector && env.Combiner != datatype.CombinerHvector {
		return nil
	}
	ints, addrs, types, err := t.GetContents()
	if err != nil || len(ints) < 2 || len(types) != 1 || !types[0].Contiguous() || types[0].LB() != 0 || types[0].Extent() != types[0].Size() {
		return nil
	}
	old := types[0]
	count, blen := ints[0], ints[1]
	var stride int
	switch {
	case env.Combiner == datatype.CombinerVector && len(ints) >= 3:
		stride = ints[2] * old.Extent()
	case env.Combiner == datatype.CombinerHvector && len(addrs) >= 1:
		stride = addrs[0]
	default:
		return nil
	}
	n := blen * old.Size()
	if count <= 0 || n <= 0 || count*n != t.Size() {
		return nil
	}
	var runs []vrun
	for e := 0; e < b.Count; e++ {
		r := vrun{addr: uint64(t.Origin() + e*t.Extent()), n: uint64(n), stride: int64(stride), count: uint64(count)}
		if count == 1 {
			r.stride = 0
		}
		if k := len(runs); k > 0 {
			l := &runs[k-1]
			if l.n == r.n && l.stride == r.stride && r.addr == l.addr+uint64(int64(l.count)*l.stride) {
				l.count += r.count
				continue
			}
		}
		runs = append(runs, r)
	}
	// Check the first pieces against the type's own walk.
	i := 0
	bad := false
	c := cursor{runs: runs}
	base := uintptr(unsafe.Pointer(unsafe.SliceData(b.Mem)))
	_ = b.Pieces(0, min(b.Size(), 3*n), func(p []byte) error {
		for len(p) > 0 && !bad {
			a, k, _ := c.next(uint64(len(p)))
			if k == 0 || uintptr(unsafe.Pointer(&p[0]))-base != uintptr(a) {
				bad = true
			}
			p = p[k:]
		}
		i++
		return nil
	})
	if bad || runsBytes(runs) != uint64(b.Size()) {
		return nil
	}
	return runs
}

// copyRuns copies between buf and the packed bytes [off, off+len(buf)) of
// the local layout runs over mem: into mem when in, else out of it.
func copyRuns(mem []byte, runs []vrun, off int, buf []byte, in bool) {
	c := cursor{runs: runs}
	c.seek(uint64(off))
	for len(buf) > 0 {
		a, k, _ := c.next(uint64(len(buf)))
		if k == 0 {
			return
		}
		if in {
			copy(mem[a:a+k], buf)
		} else {
			copy(buf, mem[a:a+k])
		}
		buf = buf[k:]
	}
}

// bounceBlock is the largest block that reads go through a bounce buffer
// for, and bounceGap the largest gap they take along; bounceBytes is the
// bounce buffer's size. Blocks of at least sinkBlock bytes whose gaps fit
// the sink are read straight into place instead, one local iovec per block
// and per gap, the sender's run as one remote iovec: from 1 KiB blocks on
// that is faster than the bounce, below it slower (docs/performance-netvm.md).
const (
	bounceBlock = 4096
	bounceGap   = 16 << 10
	bounceBytes = 256 << 10
	sinkBlock   = 1024
)

// bounces reports whether reads of the remote run r go through a bounce
// buffer, when reads take gaps of up to maxGap bytes along.
func bounces(r vrun, maxGap uint64) bool {
	if r.n >= sinkBlock && (r.count == 1 || (r.stride >= int64(r.n) && uint64(r.stride)-r.n <= maxGap)) {
		return false
	}
	return r.n > 0 && r.n < bounceBlock && (r.count == 1 || (r.stride >= int64(r.n) && uint64(r.stride)-r.n <= bounceGap))
}

// readRemote reads k bytes of the remote run r of process pid from its byte
// rpos into the local layout from its byte lpos, through bounce when the
// blocks are small, else with one local iovec per block.
func readRemote(pid int, mem []byte, local []vrun, lpos uint64, r vrun, rpos, k uint64, bounce, sink []byte) error {
	if bounces(r, uint64(len(sink))) {
		for k > 0 {
			m, err := vmReadBounce(pid, mem, local, lpos, r, rpos, k, bounce)
			if err != nil {
				return err
			}
			if m == 0 {
				break
			}
			lpos, rpos, k = lpos+m, rpos+m, k-m
		}
		if k == 0 {
			return nil
		}
	}
	return vmCopy(pid, false, mem, local, lpos, []vrun{r}, rpos, k, sink)
}

// copyLayouts copies n bytes from the layout src over srcMem, starting at
// its byte spos, into the layout dst over dstMem, starting at its byte dpos.
func copyLayouts(dstMem []byte, dst []vrun, dpos uint64, srcMem []byte, src []vrun, spos uint64, n uint64) {
	dc, sc := cursor{runs: dst}, cursor{runs: src}
	dc.seek(dpos)
	sc.seek(spos)
	var da, dl, sa, sl uint64
	for n > 0 {
		if dl == 0 {
			if da, dl, _ = dc.next(n); dl == 0 {
				return
			}
		}
		if sl == 0 {
			if sa, sl, _ = sc.next(n); sl == 0 {
				return
			}
		}
		k := min(dl, sl)
		copy(dstMem[da:da+k], srcMem[sa:sa+k])
		da, dl, sa, sl, n = da+k, dl-k, sa+k, sl-k, n-k
	}
}

// bounceSpan reports the remote address range [start, start+span) holding
// the bytes [pos, pos+k) of the regular run r (stride ≥ piece), and k cut
// so that the range fits max bytes; k is 0 if not even one piece does.
func bounceSpan(r vrun, pos, k, max uint64) (start, span, kk uint64) {
	if r.stride < int64(r.n) || r.n == 0 {
		return 0, 0, 0
	}
	st := uint64(r.stride)
	if r.count == 1 {
		st = r.n
	}
	if fit := (max/st - 1) * r.n; max/st < 2 || k > fit {
		if max/st < 2 {
			return 0, 0, 0
		}
		k = fit
	}
	at := func(b uint64) uint64 { return r.addr + (b/r.n)*st + b%r.n }
	start = at(pos)
	return start, at(pos+k-1) + 1 - start, k
}

// vmReadBounce reads the bytes [rpos, rpos+k) of the remote regular run r
// of process pid in one process_vm_readv of the whole range they span, gaps
// included, into bounce, and scatters them into the local layout from its
// byte lpos. For small blocks this beats one local iovec per block by far.
// It returns the bytes moved (0 with a
// nil error: not even one block's range fits bounce).
func vmReadBounce(pid int, mem []byte, local []vrun, lpos uint64, r vrun, rpos, k uint64, bounce []byte) (uint64, error) {
	start, span, k := bounceSpan(r, rpos, k, uint64(len(bounce)))
	if k == 0 {
		return 0, nil
	}
	liov := []unix.Iovec{{Base: &bounce[0]}}
	liov[0].SetLen(int(span))
	riov := []unix.RemoteIovec{{Base: uintptr(start), Len: int(span)}}
	for {
		got, err := unix.ProcessVMReadv(pid, liov, riov, 0)
		if err == syscall.EINTR {
			continue
		}
		if err == nil && got != int(span) {
			err = fmt.Errorf("short transfer, %d of %d bytes", got, span)
		}
		if err != nil {
			return 0, fmt.Errorf("netvm: process_vm_readv pid %d: %w", pid, err)
		}
		break
	}
	shifted := r
	shifted.addr -= start // wraps as uint64; the cursor's sums wrap back into bounce
	if r.count == 1 {
		shifted.stride = 0
	}
	copyLayouts(mem, local, lpos, bounce, []vrun{shifted}, rpos, k)
	return k, nil
}
