package via

import (
	"testing"

	"github.com/adimpi/adimpi/adi/aditest"
)

// TestADI runs the ADI contract suite against the device, with its
// default design and with the other designs of each choice and few
// credits (a small translation cache that misses, the kernel doorbell,
// completion by polling).
func TestADI(t *testing.T) {
	aditest.Run(t, aditest.Config{Name: "via"})
}

func TestADIOtherDesigns(t *testing.T) {
	aditest.Run(t, aditest.Config{Name: "via", Options: map[string]string{"doorbell": "d2", "at": "at3", "tlbsize": "16", "desccache": "off", "cq": "cq2", "credits": "4", "eager": "1024"}})
}
