package bip

import (
	"testing"

	"github.com/adimpi/adimpi/adi/aditest"
)

// TestADI runs the ADI contract suite against the device, with its
// default options and with tiny queues and chunks and no remote write
// (credits run out, long messages go through staging, BIP's bound is 2).
func TestADI(t *testing.T) {
	aditest.Run(t, aditest.Config{Name: "bip"})
}

func TestADISmallQueues(t *testing.T) {
	aditest.Run(t, aditest.Config{Name: "bip", Options: map[string]string{"queue": "4", "short": "256", "chunk": "1024", "maxlong": "2", "cma": "off"}})
}
