package main

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/adimpi/adimpi/internal/pmi"
	"github.com/adimpi/adimpi/internal/shm"
)

// netvm's raw transfer is NetVM's remote write, which its rendezvous moves
// the data by: rank 0 writes the window's messages straight into rank 1's
// buffer (process_vm_writev). The window's end and its acknowledgement are
// words of a small segment both map, as netvm's rings and doorbells are: a
// waiter polls its word briefly, then sleeps on it (futex), and the writer
// wakes it. No control ring, no matching.
type rawNetvm struct {
	c    *pmi.Client
	seg  *shm.Segment // rank 1's, mapped by both
	peer int          // the peer's pid
	seq  uint32
	dst  uintptr // rank 1's buffer (rank 0)
	size int     // the size dst is for
	gen  int
}

// The words of the segment, after its header.
const (
	rnWindow  = shm.HeaderSize      // the last window rank 0 finished
	rnAck     = shm.HeaderSize + 8  // the last window rank 1 acknowledged
	rnValue   = shm.HeaderSize + 16 // a value rank 0 shares
	rnSleeper = shm.HeaderSize + 24 // waiters asleep on the segment
)

func openRawNetvm(int) (rawLink, error) {
	c, err := pmi.Connect()
	if err != nil {
		return nil, err
	}
	if c.Size() != 2 {
		return nil, errors.New("run with 2 ranks")
	}
	l := &rawNetvm{c: c}
	if c.Rank() == 1 {
		if l.seg, err = shm.Export("adimpi-rawnetvm", 4096); err != nil {
			return nil, err
		}
	}
	if err := c.Put(fmt.Sprintf("rawnv-%d", c.Rank()), l.record()); err != nil {
		return nil, err
	}
	if err := c.Barrier(); err != nil {
		return nil, err
	}
	v, err := c.Get(fmt.Sprintf("rawnv-%d", 1-c.Rank()))
	if err != nil {
		return nil, err
	}
	f := strings.Split(v, ":")
	if l.peer, err = strconv.Atoi(f[0]); err != nil {
		return nil, fmt.Errorf("peer record %q", v)
	}
	if c.Rank() == 0 {
		if len(f) != 3 {
			return nil, fmt.Errorf("peer record %q", v)
		}
		fd, err1 := strconv.Atoi(f[1])
		key, err2 := strconv.ParseUint(f[2], 10, 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("peer record %q", v)
		}
		if l.seg, err = shm.Import(l.peer, fd, key); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// record is what the peer needs: the pid, and rank 1's segment.
func (l *rawNetvm) record() string {
	if l.seg == nil {
		return strconv.Itoa(os.Getpid())
	}
	return fmt.Sprintf("%d:%d:%d", os.Getpid(), l.seg.FD, l.seg.Key)
}

func (l *rawNetvm) rank() int { return l.c.Rank() }

// exchange tells rank 0 where rank 1's buffer for this size is.
func (l *rawNetvm) exchange(buf []byte) error {
	l.gen++
	key := fmt.Sprintf("rawnv-buf-%d", l.gen)
	if l.rank() == 1 {
		if err := l.c.Put(key, strconv.FormatUint(uint64(uintptr(unsafe.Pointer(&buf[0]))), 10)); err != nil {
			return err
		}
	}
	if err := l.c.Barrier(); err != nil {
		return err
	}
	if l.rank() == 0 {
		v, err := l.c.Get(key)
		if err != nil {
			return err
		}
		a, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return err
		}
		l.dst = uintptr(a)
	}
	l.size = len(buf)
	return nil
}

// await polls the word at off until it reaches seq, then sleeps on it.
func (l *rawNetvm) await(off int, seq uint32) {
	w := l.seg.Uint32(off)
	for i := 0; atomic.LoadUint32(w) < seq; i++ {
		if i < 64 {
			runtime.Gosched()
			continue
		}
		sl := l.seg.Uint32(rnSleeper)
		atomic.AddUint32(sl, 1)
		if v := atomic.LoadUint32(w); v < seq {
			_ = shm.FutexWait(w, v, 10*time.Millisecond)
		}
		atomic.AddUint32(sl, ^uint32(0))
	}
}

// post stores seq into the word at off and wakes its waiter.
func (l *rawNetvm) post(off int, seq uint32) {
	atomic.StoreUint32(l.seg.Uint32(off), seq)
	if atomic.LoadUint32(l.seg.Uint32(rnSleeper)) > 0 {
		_ = shm.FutexWake(l.seg.Uint32(off), 1)
	}
}

func (l *rawNetvm) windows(buf []byte, w, count int) error {
	if l.size != len(buf) {
		if err := l.exchange(buf); err != nil {
			return err
		}
	}
	pieces := [][]byte{buf}
	for i := 0; i < count; i++ {
		l.seq++
		if l.rank() == 0 {
			for k := 0; k < w; k++ {
				if err := shm.RemoteWrite(l.peer, l.dst, pieces); err != nil {
					return err
				}
			}
			l.post(rnWindow, l.seq)
			l.await(rnAck, l.seq)
			continue
		}
		l.await(rnWindow, l.seq)
		l.post(rnAck, l.seq)
	}
	return nil
}

// share stores v in the segment, then ends a window rank 1 waits for.
func (l *rawNetvm) share(v int) (int, error) {
	l.seq++
	if l.rank() == 0 {
		atomic.StoreUint64(l.seg.Uint64(rnValue), uint64(v))
		l.post(rnWindow, l.seq)
		return v, nil
	}
	l.await(rnWindow, l.seq)
	return int(atomic.LoadUint64(l.seg.Uint64(rnValue))), nil
}

func (l *rawNetvm) close() error {
	berr := l.c.Barrier()
	if err := l.seg.Close(); err != nil {
		return err
	}
	if err := l.c.Finalize(); err != nil {
		return err
	}
	return berr
}
