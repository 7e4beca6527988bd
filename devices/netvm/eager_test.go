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
