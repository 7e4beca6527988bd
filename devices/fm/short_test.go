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
