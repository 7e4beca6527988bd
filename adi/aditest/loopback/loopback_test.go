package loopback

import (
	"testing"

	"github.com/adimpi/adimpi/adi/aditest"
)

func TestADI(t *testing.T) {
	aditest.Run(t, aditest.Config{Name: "loopback", New: New, InProcess: true})
}
