package main

import (
	"encoding/binary"
	"errors"
	"time"

	"github.com/adimpi/adimpi/devices/via"
)

// VIA's raw transfer is the RDMA write that the MPI device's rendezvous
// uses: rank 1 registers its buffer and sends rank 0 the memory handle and
// address; rank 0 posts a window of RDMA write descriptors into it, then a
// send that tells rank 1 the window is in (a VI's descriptors complete in
// order); rank 1 acknowledges with a send.
type rawVIA struct {
	j      *via.Job
	vi     *via.VI
	cq     *via.CQ
	ctl    []byte // two 16-byte control slots: [0:16] received, [16:32] sent
	hctl   via.MemHandle
	buf    []byte // the buffer of the current size, registered as hbuf
	hbuf   via.MemHandle
	remote struct {
		h    via.MemHandle
		addr uint64
	}
	descs []via.Descriptor
}

const rawVIAWait = 60 * time.Second

func openRawVIA(int) (rawLink, error) {
	j, err := via.Open(nil)
	if err != nil {
		return nil, err
	}
	if j.Size != 2 {
		j.Close()
		return nil, errors.New("run with 2 ranks")
	}
	l := &rawVIA{j: j, ctl: make([]byte, 32)}
	if l.cq, err = j.NIC.CreateCQ(); err != nil {
		return nil, err
	}
	if l.vi, err = j.NIC.CreateVI(l.cq, l.cq); err != nil {
		return nil, err
	}
	if l.hctl, err = j.NIC.RegisterMem(l.ctl); err != nil {
		return nil, err
	}
	if err := j.Barrier(); err != nil {
		return nil, err
	}
	if err := j.Connect(l.vi, 1-j.Rank, l.vi.ID()); err != nil {
		return nil, err
	}
	return l, j.Barrier()
}

func (l *rawVIA) rank() int { return l.j.Rank }

// postRecvCtl posts a receive into the control slot.
func (l *rawVIA) postRecvCtl() error {
	return l.vi.PostRecv(&via.Descriptor{DS: []via.DataSegment{via.Seg(l.hctl, l.ctl[:16])}})
}

// sendCtl sends the second control slot's first n bytes.
func (l *rawVIA) sendCtl(n int) error {
	return l.vi.PostSend(&via.Descriptor{Control: via.OpSend, DS: []via.DataSegment{via.Seg(l.hctl, l.ctl[16:16+n])}})
}

// await waits for sends send completions and recvs receive completions.
func (l *rawVIA) await(sends, recvs int) error {
	for sends > 0 || recvs > 0 {
		_, recv, err := l.cq.Wait(rawVIAWait)
		if err != nil {
			return err
		}
		var d *via.Descriptor
		if recv {
			d, recvs = l.vi.RecvDone(), recvs-1
		} else {
			d, sends = l.vi.SendDone(), sends-1
		}
		if d != nil && d.Err() != nil {
			return d.Err()
		}
	}
	return nil
}

// setBuf registers a new buffer and tells rank 0 where rank 1's is.
func (l *rawVIA) setBuf(buf []byte) error {
	if l.buf != nil {
		if err := l.j.NIC.DeregisterMem(l.hbuf); err != nil {
			return err
		}
	}
	h, err := l.j.NIC.RegisterMem(buf)
	if err != nil {
		return err
	}
	l.buf, l.hbuf = buf, h
	if l.rank() == 0 {
		if err := l.postRecvCtl(); err != nil {
			return err
		}
		if err := l.await(0, 1); err != nil {
			return err
		}
		l.remote.h = via.MemHandle(binary.LittleEndian.Uint32(l.ctl[0:]))
		l.remote.addr = binary.LittleEndian.Uint64(l.ctl[8:])
		return nil
	}
	binary.LittleEndian.PutUint32(l.ctl[16:], uint32(h))
	binary.LittleEndian.PutUint64(l.ctl[24:], via.Addr(buf))
	if err := l.sendCtl(16); err != nil {
		return err
	}
	return l.await(1, 0)
}

func (l *rawVIA) windows(buf []byte, w, count int) error {
	if len(l.buf) != len(buf) || &l.buf[0] != &buf[0] {
		if err := l.setBuf(buf); err != nil {
			return err
		}
	}
	if len(l.descs) < w {
		l.descs = make([]via.Descriptor, w)
	}
	for i := 0; i < count; i++ {
		if l.rank() == 0 {
			if err := l.postRecvCtl(); err != nil { // the acknowledgement
				return err
			}
			for k := 0; k < w; k++ {
				l.descs[k] = via.Descriptor{Control: via.OpRDMAWrite, RemoteHandle: l.remote.h, RemoteAddr: l.remote.addr,
					DS: []via.DataSegment{via.Seg(l.hbuf, buf)}}
				if err := l.vi.PostSend(&l.descs[k]); err != nil {
					return err
				}
			}
			if err := l.sendCtl(4); err != nil {
				return err
			}
			if err := l.await(w+1, 1); err != nil {
				return err
			}
			continue
		}
		if err := l.postRecvCtl(); err != nil { // the window's end
			return err
		}
		if err := l.await(0, 1); err != nil {
			return err
		}
		if err := l.sendCtl(4); err != nil {
			return err
		}
		if err := l.await(1, 0); err != nil {
			return err
		}
	}
	return nil
}

func (l *rawVIA) share(v int) (int, error) {
	if l.rank() == 0 {
		binary.LittleEndian.PutUint64(l.ctl[16:], uint64(v))
		if err := l.sendCtl(8); err != nil {
			return 0, err
		}
		return v, l.await(1, 0)
	}
	if err := l.postRecvCtl(); err != nil {
		return 0, err
	}
	if err := l.await(0, 1); err != nil {
		return 0, err
	}
	return int(binary.LittleEndian.Uint64(l.ctl[0:])), nil
}

func (l *rawVIA) close() error { return l.j.Close() }
