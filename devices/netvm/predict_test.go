package netvm

import "testing"

// TestPredictorCycles feeds the predictor the sender orders it must learn
// and checks its hits: a repeating cycle is predicted from its second lap
// on, a change of pattern costs the messages of one new lap, and a cycle
// longer than maxCycle is never predicted.
func TestPredictorCycles(t *testing.T) {
	feed := func(p *predictor, seq []int) (hits int64) {
		before := p.hits
		for _, s := range seq {
			p.observe(s)
		}
		return p.hits - before
	}
	var p predictor
	cycle := []int{3, 1, 4, 1, 5}
	var seq []int
	for lap := 0; lap < 10; lap++ {
		seq = append(seq, cycle...)
	}
	// Lap 1 forms the cycle (5 misses), the head of lap 2 closes it (a
	// miss too): 44 of 50 hit.
	if got := feed(&p, seq); got != 44 {
		t.Errorf("10 laps of %v: %d hits, want 44", cycle, got)
	}
	if g := p.guess(); g != 3 {
		t.Errorf("after whole laps the guess is %d, want the head 3", g)
	}
	// One sender alone: predicted from its second message on... after the
	// break (a miss) and the new head's return (a miss).
	if got := feed(&p, []int{7, 7, 7, 7, 7, 7}); got != 4 {
		t.Errorf("7 six times after the cycle: %d hits, want 4", got)
	}
	var long predictor
	var lseq []int
	for lap := 0; lap < 3; lap++ {
		for s := 0; s < maxCycle+1; s++ {
			lseq = append(lseq, s)
		}
	}
	if got := feed(&long, lseq); got != 0 {
		t.Errorf("a cycle of %d senders: %d hits, want 0 (longer than maxCycle)", maxCycle+1, got)
	}
	if long.msgs != int64(len(lseq)) {
		t.Errorf("counted %d messages, want %d", long.msgs, len(lseq))
	}
}
