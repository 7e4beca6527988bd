package netvm

import (
	"testing"

	"github.com/adimpi/adimpi/adi"
	"github.com/adimpi/adimpi/adi/aditest"
)

// TestSmallMessagesInline: a blocking send's small message (SendShort)
// into a posted receive, as pingpong runs them, takes the slot-to-receive
// path whatever its size up to a word, the empty message included
// (inline_receives counts it), and arrives whole. An empty message took
// the ring's staging copy and consume once, a longer path than 8 bytes'.
func TestSmallMessagesInline(t *testing.T) {
	aditest.ShortWords(t, func() adi.Device { return new(Device) }, "rx:inline_receives")
}

// TestDrainStopsAtLastPostedReceive: once an eager message takes the last
// posted receive, Progress leaves what else waits in the rings (the
// sender's next slot, whose line the sender fetches for writing, and the
// other senders' rings) for the next Progress, which then finds it in
// arrival order: an ANY_SOURCE receive posted next takes the message that
// waited in the first sender's ring, not one of a sender drained after
// it. Before, the first Progress drained every ring, reading the next slot
// on the waiter's way out.
func TestDrainStopsAtLastPostedReceive(t *testing.T) {
	aditest.StopsAtLastReceive(t, func() adi.Device { return new(Device) })
}
