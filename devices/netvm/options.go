package netvm

import (
	"fmt"
	"time"

	"github.com/adimpi/adimpi/adi"
)

// Option defaults (doc.go lists the options).
const (
	defaultEager = 16 << 10
	defaultRing  = 256 << 10
	smallJobRing = 1 << 20 // the default ring when the job has at most smallJob processes
	smallJob     = 4
	defaultSplit = 64 << 10
	defaultPull  = 0
	defaultGap   = 2048
	defaultOffer = 64 << 10
)

// parseOptions sets the device's options from cfg.Options (doc.go).
func (d *Device) parseOptions(cfg adi.Config) error {
	for k := range cfg.Options {
		switch k {
		case "eager", "ring", "cma", "split", "scatter", "pull", "gap", "offer", "stall", "stream", "ntpack":
		default:
			return fmt.Errorf("netvm: unknown option %q (known: eager, ring, cma, split, scatter, pull, gap, offer, stall, stream, ntpack)", k)
		}
	}
	var err error
	if d.eager, err = adi.SizeOption("netvm", cfg.Options, "eager", defaultEager); err != nil {
		return err
	}
	ringDef := defaultRing
	if d.size <= smallJob {
		// Few peers: a bigger ring costs little memory and lets
		// non-contiguous streams go in larger chunks.
		ringDef = smallJobRing
	}
	if d.ring, err = adi.SizeOption("netvm", cfg.Options, "ring", ringDef); err != nil {
		return err
	}
	if d.ring < 4096 {
		return fmt.Errorf("netvm: option ring=%s: must be at least 4096 bytes", cfg.Options["ring"])
	}
	d.ring = (d.ring + 63) &^ 63
	if d.eager > d.ring/4 {
		return fmt.Errorf("netvm: option eager=%d exceeds ring/4 = %d", d.eager, d.ring/4)
	}
	d.chunk = d.ring / 4
	if d.split, err = adi.SizeOption("netvm", cfg.Options, "split", defaultSplit); err != nil {
		return err
	}
	if d.scatterMin, err = adi.SizeOption("netvm", cfg.Options, "scatter", 0); err != nil {
		return err
	}
	if d.pullMin, err = adi.SizeOption("netvm", cfg.Options, "pull", defaultPull); err != nil {
		return err
	}
	if d.offerMin, err = adi.SizeOption("netvm", cfg.Options, "offer", defaultOffer); err != nil {
		return err
	}
	// Streaming contiguous messages instead of the single remote write is
	// off by default: the remote write needs only the sender on a CPU, and
	// which of the two is faster depends on the machine's state and on
	// whether the program touches its data (docs/performance-netvm.md).
	if d.streamMin, err = adi.SizeOption("netvm", cfg.Options, "stream", 0); err != nil {
		return err
	}
	if d.pk.rate, err = adi.SizeOption("netvm", cfg.Options, "ntpack", defaultNTPack); err != nil {
		return err
	}
	stall, err := adi.SizeOption("netvm", cfg.Options, "stall", defaultStall)
	if err != nil {
		return err
	}
	d.stall = time.Duration(stall) * time.Microsecond
	gap, err := adi.SizeOption("netvm", cfg.Options, "gap", defaultGap)
	if err != nil {
		return err
	}
	if gap > 0 {
		d.sink = make([]byte, gap)
	}
	switch cfg.Options["cma"] {
	case "", "auto":
		d.cma = true
	case "off":
	default:
		return fmt.Errorf("netvm: option cma=%q: want auto or off", cfg.Options["cma"])
	}
	return nil
}
