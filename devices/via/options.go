package via

import (
	"fmt"
	"slices"
	"time"

	"github.com/adimpi/adimpi/adi/devkit/options"
)

// Doorbell is how a process tells its NIC that a send descriptor is posted
// (seed 002, p. 145, §3.1).
type Doorbell uint8

// The two doorbell designs of the seed.
const (
	// D1: one doorbell queue per VI, in "NIC memory"; the NIC polls the
	// doorbell queue of every active VI. No kernel crossing, but the NIC's
	// polling cost grows with the number of VIs.
	D1 Doorbell = iota + 1
	// D2: one central queue for all VIs, reached through the kernel: every
	// post takes one system call and one lock shared by all VIs; the NIC
	// polls just that queue.
	D2
)

// Translation is where the virtual-to-physical translation table lives and
// who translates (seed §3.3).
type Translation uint8

// The three translation designs of the seed.
const (
	// AT1: the table is in host memory, one per registered region, and the
	// host translates in the kernel when a descriptor is posted (one system
	// call per post plus one table index per page).
	AT1 Translation = iota + 1
	// AT2: the whole table is in NIC memory and the NIC translates;
	// registration writes every page's entry into NIC memory.
	AT2
	// AT3: the table is in host memory and the NIC translates through a
	// small direct-mapped translation cache in NIC memory; a miss fetches
	// the entry from the host table by DMA (process_vm_readv).
	AT3
)

// CQMode is how completion queues learn of completions (seed §3.4).
type CQMode uint8

// The two completion-queue designs of the seed.
const (
	// CQ1: the NIC appends an entry to the CQ after marking the descriptor.
	CQ1 CQMode = iota + 1
	// CQ2: there is no CQ memory; CQDone polls the head descriptor of every
	// work queue associated with the CQ.
	CQ2
)

// Options are a NIC's design choices and sizes. Every NIC of a job must use
// the same design choices (Connect checks).
type Options struct {
	Doorbell  Doorbell
	AT        Translation
	TLBSize   int  // AT3: entries of the NIC's direct-mapped translation cache
	DescCache bool // the NIC caches descriptors at post time instead of fetching them by DMA
	CQ        CQMode

	MaxVIs        int // VIs this NIC can hold
	RecvQueue     int // receive descriptors per VI
	SendQueue     int // send descriptors per VI (the doorbell queue)
	MaxRegions    int // registered memory regions
	MaxCQs        int // completion queues
	NICTablePages int // AT2: pages the NIC's translation table can map

	// Spin is how long an idle engine keeps polling (yielding the CPU
	// between passes) before it sleeps on its doorbell futex.
	Spin time.Duration

	// Timers times posts, descriptor executions and CQ checks (the
	// counters host_post_ns, nic_exec_ns, cq_done_ns), one in
	// sampleEvery: off, they stay 0, since on some machines reading the
	// clock costs more than the operations it would time.
	Timers bool

	// SharedDMA has a large RDMA transfer on one host moved by both NICs,
	// the initiator's and the target's (dmashare.go); off, the
	// initiator's moves it alone.
	SharedDMA bool

	// HostMem is how many bytes of host memory NIC.AllocHostMem can hand
	// out: pages the NICs of this host reach without the kernel.
	HostMem int
}

// DefaultOptions are D1, AT3 with a 1024-entry cache, descriptor caching
// on, CQ1, shared DMA on.
func DefaultOptions() Options {
	return Options{Doorbell: D1, AT: AT3, TLBSize: 1024, DescCache: true, CQ: CQ1, SharedDMA: true,
		MaxVIs: 64, RecvQueue: 64, SendQueue: 256, MaxRegions: 4096, MaxCQs: 8, NICTablePages: 1 << 16, Spin: 5 * time.Microsecond}
}

// designWord packs the design choices, for the Connect check.
func (o Options) designWord() uint64 {
	dc := uint64(0)
	if o.DescCache {
		dc = 1
	}
	return uint64(o.Doorbell) | uint64(o.AT)<<8 | uint64(o.CQ)<<16 | dc<<24
}

// String names the design choices as -device-opt values.
func (o Options) String() string {
	dc := "off"
	if o.DescCache {
		dc = "on"
	}
	return fmt.Sprintf("doorbell=d%d,at=at%d,tlbsize=%d,desccache=%s,cq=cq%d", o.Doorbell, o.AT, o.TLBSize, dc, o.CQ)
}

// NICOptionTable is the NIC's -device-opt table: its design choices.
var NICOptionTable = options.Table{Device: "via", Options: nicOptions}

var nicOptions = []options.Option{
	{Key: "doorbell", Default: "d1", Choices: []string{"d1", "d2"}, Help: "doorbell design: a queue per VI polled by the NIC, or one central queue through the kernel"},
	{Key: "at", Default: "at3", Choices: []string{"at1", "at2", "at3"}, Help: "address translation: by the host at post, a table in NIC memory, or a NIC cache of the host table"},
	{Key: "tlbsize", Default: "1024", Min: 1, Max: 1 << 20, Unit: "entries", Help: "at3: entries of the NIC's translation cache"},
	{Key: "desccache", Default: "on", Choices: []string{"on", "off"}, Help: "the NIC caches descriptors at post time instead of fetching them"},
	{Key: "cq", Default: "cq1", Choices: []string{"cq1", "cq2"}, Help: "completion queues: entries appended by the NIC, or polling of the work queues"},
	{Key: "dmashare", Default: "on", Choices: []string{"on", "off"}, Help: "an RDMA transfer on one host of 64 KiB or more, contiguous both sides, is moved by both NICs, the initiator's and the target's, on two cores"},
	{Key: "timers", Default: "off", Choices: []string{"on", "off"}, Help: "time posts, descriptor executions and CQ checks (counters host_post_ns, nic_exec_ns, cq_done_ns)"},
}

// OptionTable is the MPI device's -device-opt table: the NIC's options and
// the device's own.
var OptionTable = options.Table{Device: "via", Options: append(slices.Clip(nicOptions),
	options.Option{Key: "eager", Default: "16384", Min: 0, Max: 1 << 20, Unit: "bytes", Help: "largest message sent eagerly"},
	options.Option{Key: "credits", Default: "16", Min: 4, Max: 1024, Unit: "buffers", Help: "pre-posted receive buffers per peer, i.e. credits"},
	options.Option{Key: "regcache", Default: "67108864", Min: 0, Max: 1 << 40, Unit: "bytes", Help: "registered memory kept for reuse by rendezvous buffers"},
	options.Option{Key: "nicspin", Default: "5", Min: 0, Max: 1000000, Unit: "microseconds", Help: "how long an idle NIC engine polls before it sleeps"},
	options.Option{Key: "rndv", Default: "read", Choices: []string{"read", "write"}, Help: "rendezvous on one host: the receiver RDMA-reads a contiguous send buffer (RTS, then DONE), or answers CTS and the sender RDMA-writes (RTS, CTS, FIN)"},
	options.Option{Key: "rma", Default: "on", Choices: []string{"on", "off"}, Help: "one-sided Put and Get (and accumulates on one host) by RDMA write and read, without the target; off: through the target's agent"},
)}

// NICOptionKeys are the option keys ParseOptions understands.
var NICOptionKeys = NICOptionTable.Keys()

// ParseOptions applies the NIC's key=value options given in kv
// (NICOptionTable) to o. Keys it does not know are returned in rest.
func ParseOptions(o Options, kv map[string]string) (Options, map[string]string, error) {
	mine, rest := map[string]string{}, map[string]string{}
	for k, v := range kv {
		if slices.Contains(NICOptionKeys, k) {
			mine[k] = v
		} else {
			rest[k] = v
		}
	}
	v, err := NICOptionTable.Parse(mine)
	if err != nil {
		return o, nil, err
	}
	return applyNIC(o, v, false), rest, nil
}

// applyNIC sets o's design choices from v: those the user gave, or (all)
// every one.
func applyNIC(o Options, v *options.Values, all bool) Options {
	given := func(k string) bool { _, ok := v.Given(k); return ok || all }
	if given("doorbell") {
		o.Doorbell = Doorbell(v.String("doorbell")[1] - '0')
	}
	if given("at") {
		o.AT = Translation(v.String("at")[2] - '0')
	}
	if given("tlbsize") {
		o.TLBSize = v.Int("tlbsize")
	}
	if given("desccache") {
		o.DescCache = v.String("desccache") == "on"
	}
	if given("cq") {
		o.CQ = CQMode(v.String("cq")[2] - '0')
	}
	if given("dmashare") {
		o.SharedDMA = v.String("dmashare") == "on"
	}
	if given("timers") {
		o.Timers = v.String("timers") == "on"
	}
	return o
}

// OptionHelp describes the device's options, one line each (adi.OptionHelper).
func (d *Device) OptionHelp() string { return OptionTable.Help() }
