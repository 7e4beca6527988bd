package main

import (
	"encoding/binary"
	"errors"

	"github.com/adimpi/adimpi/devices/fm"
)

// FM's raw transfer is its message API (as cmd/fmbench): a message of n
// bytes is streamed as packets (BeginMessage, SendPiece, EndMessage) and
// its handler Receives it into the buffer; the acknowledgement is a
// message of 4 bytes to another handler.
type rawFM struct {
	e    *fm.Endpoint
	dst  []byte // where the data handler receives: room for the largest size, as a message may arrive before windows is called for its size
	got  int    // messages received whole
	acks int
	// What the waits count up to: cumulative, not from the counts found
	// when a wait starts, since the peer's next messages may be handled
	// (by Extract inside a send) before that.
	wantGot, wantAcks, wantShared int
	ackBuf                        [4]byte
	shared                        int // values received through rawFMShare
	val                           [8]byte
}

const (
	rawFMData  = 1
	rawFMAck   = 2
	rawFMShare = 3
)

func openRawFM(maxSize int) (rawLink, error) {
	e, err := fm.Open(fm.Config{})
	if err != nil {
		return nil, err
	}
	if e.Size() != 2 {
		e.Close()
		return nil, errors.New("run with 2 ranks")
	}
	l := &rawFM{e: e, dst: make([]byte, maxSize)}
	e.SetHandler(rawFMData, func(e *fm.Endpoint, s *fm.Stream) {
		e.Receive(s, l.dst[s.Taken():])
		if s.Last() {
			l.got++
		}
	})
	e.SetHandler(rawFMAck, func(e *fm.Endpoint, s *fm.Stream) {
		e.Receive(s, l.ackBuf[:])
		if s.Last() {
			l.acks++
		}
	})
	e.SetHandler(rawFMShare, func(e *fm.Endpoint, s *fm.Stream) {
		e.Receive(s, l.val[s.Taken():])
		if s.Last() {
			l.shared++
		}
	})
	return l, nil
}

func (l *rawFM) share(v int) (int, error) {
	if l.rank() == 0 {
		binary.LittleEndian.PutUint64(l.val[:], uint64(v))
		return v, l.send(rawFMShare, l.val[:])
	}
	l.wantShared++
	if err := l.e.Poll(func() bool { return l.shared >= l.wantShared }, 0); err != nil {
		return 0, err
	}
	return int(binary.LittleEndian.Uint64(l.val[:])), nil
}

func (l *rawFM) rank() int { return l.e.Rank() }

func (l *rawFM) send(h int, b []byte) error {
	s, err := l.e.BeginMessage(1-l.rank(), len(b), uint16(h))
	if err != nil {
		return err
	}
	if err := l.e.SendPiece(s, b); err != nil {
		return err
	}
	return l.e.EndMessage(s)
}

func (l *rawFM) windows(buf []byte, w, count int) error {
	peer := 1 - l.rank()
	if l.rank() == 1 {
		defer copy(buf, l.dst) // for the check of the data
	}
	for i := 0; i < count; i++ {
		if l.rank() == 0 {
			for k := 0; k < w; k++ {
				if err := l.send(rawFMData, buf); err != nil {
					return err
				}
			}
			l.wantAcks++
			if err := l.e.Poll(func() bool { return l.acks >= l.wantAcks }, peer); err != nil {
				return err
			}
			continue
		}
		l.wantGot += w
		if err := l.e.Poll(func() bool { return l.got >= l.wantGot }, peer); err != nil {
			return err
		}
		if err := l.send(rawFMAck, l.ackBuf[:]); err != nil {
			return err
		}
	}
	return nil
}

func (l *rawFM) close() error { return l.e.Close() }
