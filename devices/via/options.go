package via

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
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
}

// DefaultOptions are D1, AT3 with a 1024-entry cache, descriptor caching
// on, CQ1.
func DefaultOptions() Options {
	return Options{Doorbell: D1, AT: AT3, TLBSize: 1024, DescCache: true, CQ: CQ1,
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

// NICOptionKeys are the option keys ParseOptions understands.
var NICOptionKeys = []string{"doorbell", "at", "tlbsize", "desccache", "cq"}

// ParseOptions applies key=value options (doorbell=d1|d2, at=at1|at2|at3,
// tlbsize=N, desccache=on|off, cq=cq1|cq2) to o. Keys it does not know are
// returned in rest.
func ParseOptions(o Options, kv map[string]string) (Options, map[string]string, error) {
	rest := map[string]string{}
	keys := make([]string, 0, len(kv))
	for k := range kv {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := strings.ToLower(strings.TrimSpace(kv[k]))
		bad := func(want string) error { return fmt.Errorf("via: option %s=%q: want %s", k, kv[k], want) }
		switch k {
		case "doorbell":
			switch v {
			case "d1":
				o.Doorbell = D1
			case "d2":
				o.Doorbell = D2
			default:
				return o, nil, bad("d1 or d2")
			}
		case "at":
			switch v {
			case "at1":
				o.AT = AT1
			case "at2":
				o.AT = AT2
			case "at3":
				o.AT = AT3
			default:
				return o, nil, bad("at1, at2 or at3")
			}
		case "tlbsize":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > 1<<20 {
				return o, nil, bad("an entry count in [1, 1048576]")
			}
			o.TLBSize = n
		case "desccache":
			switch v {
			case "on":
				o.DescCache = true
			case "off":
				o.DescCache = false
			default:
				return o, nil, bad("on or off")
			}
		case "cq":
			switch v {
			case "cq1":
				o.CQ = CQ1
			case "cq2":
				o.CQ = CQ2
			default:
				return o, nil, bad("cq1 or cq2")
			}
		default:
			rest[k] = kv[k]
		}
	}
	return o, rest, nil
}
