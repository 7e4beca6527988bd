package via

import (
	"sync"
	"testing"

	"github.com/adimpi/adimpi/adi"
	"github.com/adimpi/adimpi/adi/aditest"
)

// pretendHosts is the device with every odd rank on a host of its own in
// Config.Hosts: those ranks' VIs go over the wire (TCP on this machine)
// while the even ranks share memory, so the contract suite checks both
// kinds of VI, and the mix, in one process.
type pretendHosts struct{ *Device }

// made are the devices pretendHosts started, to read their counters.
var made struct {
	sync.Mutex
	devs []*Device
}

func (p pretendHosts) Init(cfg adi.Config) error {
	made.Lock()
	made.devs = append(made.devs, p.Device)
	made.Unlock()
	cfg.Hosts = make([]int, cfg.Size)
	for r := range cfg.Hosts {
		if r%2 == 1 {
			cfg.Hosts[r] = r
		}
	}
	return p.Device.Init(cfg)
}

// TestADICrossHost runs the ADI contract suite with ranks on pretend hosts,
// in the default design and in the other design of each choice.
func TestADICrossHost(t *testing.T) {
	newDev := func() adi.Device { return pretendHosts{new(Device)} }
	t.Cleanup(func() {
		made.Lock()
		defer made.Unlock()
		frames := int64(0)
		for _, d := range made.devs {
			if d.nic != nil {
				frames += d.nic.passCount(&d.nic.pc.framesIn) // the segment is gone after Finalize
			}
		}
		if frames == 0 {
			t.Errorf("no frame crossed the wire in %d devices: the pretend hosts shared memory", len(made.devs))
		}
	})
	t.Run("default", func(t *testing.T) {
		aditest.Run(t, aditest.Config{Name: "via", New: newDev})
	})
	t.Run("d2-cq2", func(t *testing.T) {
		aditest.Run(t, aditest.Config{Name: "via", New: newDev, Options: map[string]string{"doorbell": "d2", "at": "at1", "desccache": "off", "cq": "cq2", "credits": "4", "eager": "1024"}})
	})
	t.Run("at2", func(t *testing.T) {
		aditest.Run(t, aditest.Config{Name: "via", New: newDev, Options: map[string]string{"at": "at2", "tlbsize": "16"}})
	})
}

// passCount reads one of n's pass counters (n.pc) under the engine's lock.
func (n *NIC) passCount(c *int64) int64 {
	n.eng.mu.Lock()
	defer n.eng.mu.Unlock()
	return *c
}
