package netvm

import (
	"testing"

	"github.com/adimpi/adimpi/adi/aditest"
)

// TestADI runs the ADI contract suite against the device: its default
// protocol, MPIN (eager=0), and a tiny ring with streaming and split
// copies (other protocol paths).
func TestADI(t *testing.T) {
	aditest.Run(t, aditest.Config{Name: "netvm"})
}

func TestADIMPIN(t *testing.T) {
	aditest.Run(t, aditest.Config{Name: "netvm", Options: map[string]string{"eager": "0"},
		NoTypeCheck: "MPIN writes a message into the posted receive without comparing the sender's type signature with the receiver's"})
}

func TestADISmallRing(t *testing.T) {
	aditest.Run(t, aditest.Config{Name: "netvm", Options: map[string]string{"ring": "4096", "eager": "1024", "stream": "2048", "split": "1"}})
}

// TestADIPredictOff runs the suite with message prediction off: Progress
// then scans every ring on every pass.
func TestADIPredictOff(t *testing.T) {
	aditest.Run(t, aditest.Config{Name: "netvm", Options: map[string]string{"predict": "off"}})
}
