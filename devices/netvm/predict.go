package netvm

// This file is message prediction: a guess of which peer the next message
// comes from, made from the order in which the last ones came, with the
// single-cycle heuristic of "Efficient Communication Using Message
// Prediction for Cluster of Multiprocessors". Progress polls the guessed
// peer's ring first, and when that ring brings messages, a pass leaves the
// other rings alone (up to fullScanEvery passes in a row): with many peers
// on a host, a receiver whose traffic follows a pattern (a ring, a
// pipeline, one producer at a time) reads one ring per pass instead of all.

// maxCycle bounds the cycle the predictor learns; a longer one is not
// learnt (every message of it counts as a miss).
const maxCycle = 256

// fullScanEvery is how many passes in a row may poll only the guessed ring:
// every other ring is polled at least once per this many passes, so no
// sender starves however well the guess does.
const fullScanEvery = 8

// predictor is the single-cycle heuristic over the senders of arriving
// messages. Starting at a cycle head (the first sender, or the one that
// broke the last cycle), it records senders until the head comes again;
// from then on it predicts along the recorded cycle, and a sender other
// than the predicted one makes that sender the head of a new cycle. While
// a cycle forms there is no prediction, and those messages count as misses,
// as the paper counts them.
type predictor struct {
	cycle   []int // the senders of the cycle, from its head
	forming bool  // the cycle is being recorded: no prediction yet
	pos     int   // the cycle's position of the next sender, once formed
	hits    int64 // messages whose sender was the prediction
	msgs    int64 // messages seen
	skipped int   // passes in a row that polled only the guessed ring
	fast    int64 // passes that polled only the guessed ring
}

// guess is the predicted sender of the next message, or -1.
func (p *predictor) guess() int {
	if p.forming || len(p.cycle) == 0 {
		return -1
	}
	return p.cycle[p.pos]
}

// observe records that a message came from src.
func (p *predictor) observe(src int) {
	p.msgs++
	switch {
	case !p.forming && len(p.cycle) > 0:
		if p.cycle[p.pos] == src {
			p.hits++
			if p.pos++; p.pos == len(p.cycle) {
				p.pos = 0
			}
			return
		}
		p.restart(src)
	case len(p.cycle) == 0:
		p.restart(src)
	case src == p.cycle[0]:
		// The head came again: the cycle is complete, and the next
		// sender is expected to be its second (its head again if it has
		// one sender).
		p.forming = false
		p.pos = 1 % len(p.cycle)
	case len(p.cycle) == maxCycle:
		p.restart(src)
	default:
		p.cycle = append(p.cycle, src)
	}
}

// restart begins a new cycle at head.
func (p *predictor) restart(head int) {
	if p.cycle == nil {
		p.cycle = make([]int, 0, maxCycle)
	}
	p.cycle = append(p.cycle[:0], head)
	p.forming, p.pos = true, 0
}
