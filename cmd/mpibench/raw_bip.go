package main

import (
	"encoding/binary"
	"errors"

	"github.com/adimpi/adimpi/devices/bip"
)

// BIP's raw transfer is its long-message rendezvous (SendLong into a
// RecvLong posted by the receiver, written straight into the receive
// buffer), the acknowledgement a short message.
type rawBIP struct {
	e *bip.Endpoint
}

const rawBIPTag = 7

func openRawBIP(int) (rawLink, error) {
	e, err := bip.Open(nil)
	if err != nil {
		return nil, err
	}
	if e.Size() != 2 {
		e.Close()
		return nil, errors.New("run with 2 ranks")
	}
	return &rawBIP{e: e}, nil
}

func (l *rawBIP) rank() int { return l.e.Rank() }

func (l *rawBIP) windows(buf []byte, w, count int) error {
	peer := 1 - l.rank()
	var ack [4]byte
	for i := 0; i < count; i++ {
		for k := 0; k < w; k++ {
			var err error
			if l.rank() == 0 {
				err = l.e.SendLong(peer, rawBIPTag, buf)
			} else {
				_, err = l.e.RecvLong(peer, rawBIPTag, buf)
			}
			if err != nil {
				return err
			}
		}
		var err error
		if l.rank() == 0 {
			_, _, _, err = l.e.RecvShort(peer, ack[:])
		} else {
			err = l.e.SendShort(peer, rawBIPTag, ack[:])
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (l *rawBIP) share(v int) (int, error) {
	var b [8]byte
	if l.rank() == 0 {
		binary.LittleEndian.PutUint64(b[:], uint64(v))
		return v, l.e.SendShort(1, rawBIPTag, b[:])
	}
	if _, _, _, err := l.e.RecvShort(0, b[:]); err != nil {
		return 0, err
	}
	return int(binary.LittleEndian.Uint64(b[:])), nil
}

func (l *rawBIP) close() error { return l.e.Close() }
