package mpi

import (
	"fmt"
	"os"
	"testing"
	"time"

	iboard "github.com/adimpi/adimpi/internal/board"
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
// Without such an agent the same wait sleeps, as it should.
func TestBoardWaitServesRMA(t *testing.T) {
	seg, err := iboard.Export(fmt.Sprintf("adimpi-test-board-%d", os.Getpid()), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer seg.Close()
	ib, err := iboard.New(seg, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	r := &runtime{dev: &bellDevice{}, devName: "bell", size: 1, poll: time.Millisecond, spin: 0}
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
