package main

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"unsafe"

	"github.com/adimpi/adimpi/internal/pmi"
	"github.com/adimpi/adimpi/internal/shm"
)

// netvm's raw transfer is NetVM's remote write, which its rendezvous
// moves the data by: rank 0 writes the window's messages straight into
// rank 1's buffer (process_vm_writev), then a window number into a word
// of rank 1's, which rank 1 watches and answers by writing the number
// into a word of rank 0's. Nothing else: no control ring, no matching.
type rawNetvm struct {
	c      *pmi.Client
	peer   int      // the peer's pid
	words  []uint64 // words[rank]: what the peer last wrote (rank 1: the window number; rank 0: the acknowledged one)
	seq    uint64
	size   int     // the size the peer's buffer address is for
	dst    uintptr // rank 1's buffer (rank 0)
	wordAt uintptr // the peer's word
	gen    int
}

func openRawNetvm(int) (rawLink, error) {
	c, err := pmi.Connect()
	if err != nil {
		return nil, err
	}
	if c.Size() != 2 {
		return nil, errors.New("run with 2 ranks")
	}
	l := &rawNetvm{c: c, words: make([]uint64, 3)}
	if err := c.Put(fmt.Sprintf("rawnv-%d", c.Rank()), fmt.Sprintf("%d:%d", os.Getpid(), uintptr(unsafe.Pointer(l.myWord())))); err != nil {
		return nil, err
	}
	if err := c.Barrier(); err != nil {
		return nil, err
	}
	v, err := c.Get(fmt.Sprintf("rawnv-%d", 1-c.Rank()))
	if err != nil {
		return nil, err
	}
	pid, addr, ok := strings.Cut(v, ":")
	if !ok {
		return nil, fmt.Errorf("peer record %q", v)
	}
	if l.peer, err = strconv.Atoi(pid); err != nil {
		return nil, err
	}
	a, err := strconv.ParseUint(addr, 10, 64)
	if err != nil {
		return nil, err
	}
	l.wordAt = uintptr(a)
	return l, nil
}

// myWord is the word the peer writes into.
func (l *rawNetvm) myWord() *uint64 { return &l.words[l.rank()] }

func (l *rawNetvm) rank() int { return l.c.Rank() }

// exchange publishes rank 1's buffer for this size.
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

// await spins (yielding) until the word reaches seq.
func (l *rawNetvm) await(seq uint64) {
	for atomic.LoadUint64(l.myWord()) < seq {
		runtime.Gosched()
	}
}

// post writes seq into the peer's word.
func (l *rawNetvm) post(seq uint64) error {
	var b [8]byte
	*(*uint64)(unsafe.Pointer(&b[0])) = seq
	return shm.RemoteWrite(l.peer, l.wordAt, [][]byte{b[:]})
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
			if err := l.post(l.seq); err != nil {
				return err
			}
			l.await(l.seq)
			continue
		}
		l.await(l.seq)
		if err := l.post(l.seq); err != nil {
			return err
		}
	}
	return nil
}

// share writes v into rank 1's value word, then bumps its window word:
// rank 1 reads the value once the word moves.
func (l *rawNetvm) share(v int) (int, error) {
	l.seq++
	if l.rank() == 0 {
		var b [8]byte
		*(*uint64)(unsafe.Pointer(&b[0])) = uint64(v)
		if err := shm.RemoteWrite(l.peer, l.wordAt+8, [][]byte{b[:]}); err != nil {
			return 0, err
		}
		return v, l.post(l.seq)
	}
	l.await(l.seq)
	return int(atomic.LoadUint64(&l.words[2])), nil
}

func (l *rawNetvm) close() error {
	berr := l.c.Barrier()
	if err := l.c.Finalize(); err != nil {
		return err
	}
	return berr
}
