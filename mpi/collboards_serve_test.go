package mpi

import (
	"fmt"
	"os"
	"testing"
	"time"

	iboard "github.com/adimpi/adimpi/mpi/internal/board"
)

// waitRecorder is an adi.Board whose BoardWaiting, raised before a board
// wait sleeps, is counted.
type waitRecorder struct {
	*iboard.Board
	sleeps int
}

func (w *waitRecorder) BoardWaiting(on bool) {
	if on {
		w.sleeps++
	}
	w.Board.BoardWaiting(on)
}

// TestBoardWaitServesRMA checks that a board wait does not sleep on its
// board while a window's agent may be asked for one-sided operations: a
// peer's Put or FetchAndOp rings the device, not the board, so a sleeping
// target answered one operation per nap (fm's and bip's FetchAndOp on a
// WinCreate window ran at 0.005 Mops/s while the target sat in a Barrier).
// Without such an agent the same wait sleeps, as it should. Both wait
// policies: every rank with a core (poll > 0) and ranks that outnumber
// cores (poll 0, boardYield).
func TestBoardWaitServesRMA(t *testing.T) {
	for _, poll := range []time.Duration{time.Millisecond, 0} {
		t.Run(fmt.Sprintf("poll=%v", poll), func(t *testing.T) { testBoardWaitServesRMA(t, poll) })
	}
}

func testBoardWaitServesRMA(t *testing.T, poll time.Duration) {
	seg, err := iboard.Export(fmt.Sprintf("adimpi-test-board-%d", os.Getpid()), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer seg.Close()
	ib, err := iboard.New(seg, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	r := &runtime{dev: &bellDevice{}, devName: "bell", size: 1, poll: poll, spin: 0}
	for _, serving := range []bool{true, false} {
		rec := &waitRecorder{Board: ib}
		b := &board{Board: rec, own: ib, size: 1}
		if serving {
			servingAgents.Add(1)
		}
		polls := 0
		err := r.boardSleep(b, func() bool { polls++; return polls > 100 })
		if serving {
			servingAgents.Add(-1)
		}
		if err != nil {
			t.Fatal(err)
		}
		if serving && rec.sleeps != 0 {
			t.Errorf("with a serving RMA agent the board wait slept %d times", rec.sleeps)
		}
		if !serving && rec.sleeps == 0 {
			t.Errorf("without RMA agents the board wait never slept (spin 0): the check above proves nothing")
		}
	}
}

// progressDevice counts Progress calls; its Seq is what the test sets.
type progressDevice struct {
	nullDevice
	seq    uint32
	passes int
}

func (d *progressDevice) Progress() (bool, error) { d.passes++; return false, nil }
func (d *progressDevice) Seq() uint32             { return d.seq }

// TestBoardYieldProgress checks when a crowded board wait (ranks outnumber
// cores: boardYield) drives the device: at once after the device's
// sequence word moves (a message arrived that a peer may be waiting on us
// to handle, during the wait or before it), at least every
// boardProgressPolls polls without it, and not
// at every poll, which cost each waiter's turn on the CPU a pass over
// every peer's ring.
func TestBoardYieldProgress(t *testing.T) {
	seg, err := iboard.Export(fmt.Sprintf("adimpi-test-board-%d", os.Getpid()), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer seg.Close()
	ib, err := iboard.New(seg, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	d := &progressDevice{}
	r := &runtime{dev: d, devName: "count", size: 1, poll: 0, spin: time.Hour}
	b := &board{Board: ib, own: ib, size: 1}
	const polls = 4 * boardProgressPolls
	n := 0
	if err := r.boardSleep(b, func() bool { n++; return n > polls }); err != nil {
		t.Fatal(err)
	}
	if d.passes < polls/boardProgressPolls || d.passes > polls/boardProgressPolls+1 {
		t.Errorf("%d polls with a quiet device drove it %d times, want %d (every %d polls)", polls, d.passes, polls/boardProgressPolls, boardProgressPolls)
	}
	// A message arrives (the sequence word moves) at the fifth poll:
	// the next poll drives the device, before the wait's own condition
	// (which needs it) is looked at.
	d.passes, n = 0, 0
	seen := -1
	err = r.boardSleep(b, func() bool {
		n++
		if n == 5 {
			d.seq++
		}
		if d.passes > 0 && seen < 0 {
			seen = n
		}
		return seen >= 0
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen != 6 {
		t.Errorf("after the sequence word moved at poll 5 the device was driven before poll %d, want 6", seen)
	}
	// A message arrived before the wait began (while the rank computed):
	// the first poll drives the device.
	d.seq++
	d.passes, n, seen = 0, 0, -1
	err = r.boardSleep(b, func() bool {
		n++
		if d.passes > 0 && seen < 0 {
			seen = n
		}
		return seen >= 0 || n > 2*boardProgressPolls
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen != 1 {
		t.Errorf("with the sequence word moved before the wait the device was first driven before poll %d, want 1", seen)
	}
}
