package netvm

import (
	"strconv"
	"time"

	"github.com/adimpi/adimpi/adi"
	"github.com/adimpi/adimpi/adi/devkit/options"
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

// OptionTable is the device's -device-opt table (mpirun -device-opt
// key=value, or ADIMPI_DEVICE_OPT; doc.go says what each option does).
var OptionTable = options.Table{Device: "netvm", Options: []options.Option{
	{Key: "eager", Default: strconv.Itoa(defaultEager), Min: 0, Max: 1 << 28, Unit: "bytes", Help: "largest message sent eagerly, at most ring/4 (0: MPIN, the receiver-initiated protocol)"},
	{Key: "ring", Default: strconv.Itoa(defaultRing), Min: 4096, Max: 1 << 30, Unit: "bytes", Help: "eager ring per sender, rounded up to 64 (1 MiB by default in jobs of at most 4 ranks)"},
	{Key: "cma", Default: "auto", Choices: []string{"auto", "off"}, Help: "remote writes and reads with process_vm_writev/readv when allowed, or always chunks through the ring"},
	{Key: "split", Default: strconv.Itoa(defaultSplit), Min: 0, Max: 1 << 40, Unit: "bytes", Help: "smallest contiguous rendezvous message whose copy both sides share (0: never)"},
	{Key: "scatter", Default: "0", Min: 0, Max: 1 << 40, Unit: "bytes", Help: "smallest block of a non-contiguous receive that the sender writes in place (0: never)"},
	{Key: "pull", Default: strconv.Itoa(defaultPull), Min: 0, Max: 1 << 40, Unit: "bytes", Help: "smallest non-contiguous receive that reads the sender's buffer itself (0: never)"},
	{Key: "gap", Default: strconv.Itoa(defaultGap), Min: 0, Max: 1 << 30, Unit: "bytes", Help: "largest gap between two blocks that one remote read takes along"},
	{Key: "offer", Default: strconv.Itoa(defaultOffer), Min: 0, Max: 1 << 40, Unit: "bytes", Help: "smallest stream offered for takeover (0: never)"},
	{Key: "stall", Default: strconv.Itoa(defaultStall), Min: 0, Max: 1 << 30, Unit: "microseconds", Help: "how long an offered stream may make no progress before the receiver takes it over"},
	{Key: "stream", Default: "0", Min: 0, Max: 1 << 40, Unit: "bytes", Help: "smallest contiguous rendezvous receive taken as a stream of chunks (0: never)"},
	{Key: "ntpack", Default: strconv.Itoa(defaultNTPack), Min: 0, Max: 1 << 30, Unit: "MB/s", Help: "plain pack rate under which chunks are packed with non-temporal stores (0: never)"},
	{Key: "predict", Default: "on", Choices: []string{"on", "off"}, Help: "guess the next message's sender from the last ones' (single-cycle heuristic) and poll its ring first; counters predict_hits/predict_messages"},
}}

// OptionHelp describes the device's options, one line each (adi.OptionHelper).
func (d *Device) OptionHelp() string { return OptionTable.Help() }

// parseOptions sets the device's options from cfg.Options (OptionTable).
func (d *Device) parseOptions(cfg adi.Config) error {
	o, err := OptionTable.Parse(cfg.Options)
	if err != nil {
		return err
	}
	d.eager, d.ring = o.Int("eager"), o.Int("ring")
	if _, given := o.Given("ring"); !given && d.size <= smallJob {
		// Few peers: a bigger ring costs little memory and lets
		// non-contiguous streams go in larger chunks.
		d.ring = smallJobRing
	}
	d.ring = (d.ring + 63) &^ 63
	if d.eager > d.ring/4 {
		return OptionTable.Errorf("eager", o.Raw("eager"), "must be at most ring/4 = %d bytes", d.ring/4)
	}
	d.chunk = d.ring / 4
	d.split, d.scatterMin, d.pullMin, d.offerMin = o.Int("split"), o.Int("scatter"), o.Int("pull"), o.Int("offer")
	// Streaming contiguous messages instead of the single remote write is
	// off by default: the remote write needs only the sender on a CPU, and
	// which of the two is faster depends on the machine's state and on
	// whether the program touches its data (docs/performance-netvm.md).
	d.streamMin, d.pk.rate = o.Int("stream"), o.Int("ntpack")
	d.stall = time.Duration(o.Int("stall")) * time.Microsecond
	if gap := o.Int("gap"); gap > 0 {
		d.sink = make([]byte, gap)
	}
	d.cma = o.String("cma") == "auto"
	d.predict = o.String("predict") == "on"
	return nil
}
