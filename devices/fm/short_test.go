package fm

import (
	"testing"

	"github.com/adimpi/adimpi/adi"
	"github.com/adimpi/adimpi/adi/aditest"
)

// TestSmallMessagesShort: a blocking send's small message into a posted
// receive, as pingpong runs them, is one packet that SendShort writes
// straight into the peer's region (short_sends) and eagerIn takes straight
// into the receive (short_receives), whatever its size up to a word, the
// empty message included, and it arrives whole.
func TestSmallMessagesShort(t *testing.T) {
	aditest.ShortWords(t, func() adi.Device { return new(Device) }, "tx:short_sends", "rx:short_receives")
}

// TestExtractStopsAtLastPostedReceive: once a one-packet message takes the
// last posted receive, Extract leaves what else waits in the regions (the
// sender's next slot, whose line the sender fetches for writing, and the
// other senders' regions) for the next Extract, which then finds it in
// arrival order: an ANY_SOURCE receive posted next takes the message that
// waited in the first sender's region, not one of a sender extracted after
// it. Before, the first Extract took every packet, reading the next slot
// on the waiter's way out.
func TestExtractStopsAtLastPostedReceive(t *testing.T) {
	aditest.StopsAtLastReceive(t, func() adi.Device { return new(Device) })
}
