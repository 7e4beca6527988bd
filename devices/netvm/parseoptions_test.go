package netvm

import (
	"testing"

	"github.com/adimpi/adimpi/adi"
)

// TestOptionErrorsNameWhatWasTyped: an option error names the value the
// user typed, not one the device derived from it.
func TestOptionErrorsNameWhatWasTyped(t *testing.T) {
	for _, c := range []struct{ k, v, want string }{
		{"ring", "1", "netvm: option ring=1: must be at least 4096 bytes"},
		{"ring", "4000", "netvm: option ring=4000: must be at least 4096 bytes"},
		{"eager", "300000", "netvm: option eager=300000: must be at most ring/4 = 262144 bytes"},
		{"cma", "on", "netvm: option cma=on: must be auto or off"},
		{"split", "-1", "netvm: option split=-1: must be at least 0 bytes"},
		{"rnig", "1", "netvm: unknown option rnig=1 (known options: eager, ring, cma, split, scatter, pull, gap, offer, stall, stream, ntpack, predict)"},
	} {
		d := &Device{}
		err := d.parseOptions(adi.Config{Size: 2, Options: map[string]string{c.k: c.v}})
		if err == nil || err.Error() != c.want {
			t.Errorf("%s=%s: got %v, want %q", c.k, c.v, err, c.want)
		}
	}
}
