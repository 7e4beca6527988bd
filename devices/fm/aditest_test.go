package fm

import (
	"testing"

	"github.com/adimpi/adimpi/adi/aditest"
)

// TestADI runs the ADI contract suite against the device, with its
// default options and with small packets, the bulk lane off and remote
// writes on (other protocol paths).
func TestADI(t *testing.T) {
	aditest.Run(t, aditest.Config{Name: "fm"})
}

func TestADIRemoteNoBulk(t *testing.T) {
	aditest.Run(t, aditest.Config{Name: "fm", Options: map[string]string{"packet": "256", "slots": "4", "bulk": "0", "remote": "1", "minblock": "8"}})
}

// TestADIWord runs the suite with messages of a word and of two words
// (truncated to one), the sizes of the short send's and the receive's
// one-move copies (SendShort, eagerIn), beside a larger one that the
// wildcard check needs.
func TestADIWord(t *testing.T) {
	aditest.Run(t, aditest.Config{Name: "fm", Sizes: []int{8, 16, 1000}})
}
