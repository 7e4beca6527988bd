package mpi

import "github.com/adimpi/adimpi/adi"

// Broadcast over a device's multidestination sends (adi.Multisender, fm's
// multidestination streams). A short message goes from the root to every
// other process in one multidestination send. A long one is cut into
// multiChunk pieces that flow down a tree of fan-out multiFanout: every
// process posts the receives of all pieces from its parent at once, and
// forwards each piece to all its children in one multidestination send as
// soon as it has arrived, so the pieces pipeline through the tree.
//
// The core takes this path only where it is faster than its own
// point-to-point algorithms, which on fm move large messages through the
// bulk lane's 64 KiB chunks rather than 1.5 KiB packets: from multiMinProcs
// processes, for messages of at most multiMax bytes (docs/performance.md).
const (
	multiShort    = 64 << 10
	multiChunk    = 64 << 10
	multiFanout   = 4
	multiMinProcs = 8
	multiMax      = 256 << 10
)

// multisender returns the device's multidestination send capability for a
// broadcast of n bytes, or nil: when the device has none, when
// ADIMPI_NATIVE_COLL=off, and where the point-to-point algorithms are
// faster (fewer than multiMinProcs processes, more than multiMax bytes).
// Nor when the ranks span hosts: the streams are shared memory.
// Every rank passes the same n, so all take the same path.
func (e *coll) multisender(n int) adi.Multisender {
	if !e.r.native || e.size < multiMinProcs || n > multiMax || e.h.crosses() {
		return nil
	}
	ms, _ := e.r.dev.(adi.Multisender)
	return ms
}

// bcastMulti broadcasts buf from root with the device's multidestination
// sends.
func (e *coll) bcastMulti(ms adi.Multisender, buf []byte, root int) error {
	n := e.size
	rel := (e.rank - root + n) % n
	fan := n - 1 // short: a star from the root
	if len(buf) > multiShort {
		fan = multiFanout
	}
	// In the tree of fan-out fan over relative ranks, x's children are
	// x*fan+1 .. x*fan+fan and its parent is (x-1)/fan.
	var children []int
	for c := rel*fan + 1; c <= rel*fan+fan && c < n; c++ {
		children = append(children, e.world[e.abs(c, root)])
	}
	chunk := len(buf)
	if len(buf) > multiShort {
		chunk = multiChunk
	}
	var recvs []*adi.Request
	if rel != 0 {
		parent := e.abs((rel-1)/fan, root)
		for off := 0; off < len(buf); off += chunk {
			q, err := e.irecv(parent, buf[off:min(off+chunk, len(buf))])
			if err != nil {
				_ = e.wait(recvs...)
				return err
			}
			recvs = append(recvs, q)
		}
	}
	var sends []*adi.Request
	var err error
	for i, off := 0, 0; off < len(buf); i, off = i+1, off+chunk {
		if rel != 0 {
			if err = e.wait(recvs[i]); err != nil {
				break
			}
		}
		if len(children) == 0 {
			continue
		}
		q := &adi.Request{Op: adi.OpSend, Context: e.ctx, Tag: e.tag, Buf: adi.Bytes(buf[off:min(off+chunk, len(buf))])}
		e.r.mu.Lock()
		err = ms.IsendMulti(q, children)
		e.r.mu.Unlock()
		if err != nil {
			err = named(e.op, err)
			break
		}
		sends = append(sends, q)
	}
	werr := e.wait(append(recvs, sends...)...)
	if err != nil {
		return err
	}
	return werr
}
