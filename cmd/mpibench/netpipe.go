package main

// The netpipe benchmark of compare: Debian's NetPIPE built against MPICH
// (netpipe-mpich2, /usr/bin/NPmpich2), the same binary on MPICH and, through
// adimpi's drop-in libmpich.so.12 (cmd/libmpich, docs/c-abi.md), on every
// adimpi device; beside it the project's C ping-pong (bench/c/mpibench.c
// built with mpicc.mpich, for MPICH) run unmodified on adimpi, so that the
// report can set NetPIPE's latency against adimpi's own Go API (the
// pingpong benchmark of the same run) and against MPICH.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// netpipeBin is Debian's NetPIPE for MPICH.
const netpipeBin = "/usr/bin/NPmpich2"

func init() {
	xMetrics = append(xMetrics,
		xMetric{"NetPIPE 8 B latency (µs)", xPrefix + "netpipe_lat", 2, 2, 8, true},
		xMetric{"NetPIPE peak bandwidth (MB/s)", xPrefix + "netpipe_peak", 2, 2, 0, false})
}

// netpipeRuns are NPmpich2's runs per target, each its arguments: sizes
// without the perturbed sizes around each power of two, a fixed number of
// repeats per trial (NetPIPE's own choice, from a first timing, runs for
// minutes when that timing is off on a busy machine), and no output file.
// A full run is one curve up to 4 MiB; a quick run, which must stay within
// the step's time limit on a loaded machine, is two: 8 B with 2000 repeats
// (the latency) and 64 KiB to 1 MiB with 50 (the peak).
func netpipeRuns(quick bool) [][]string {
	if quick {
		return [][]string{
			{"-l", "8", "-u", "8", "-p", "0", "-n", "2000", "-o", "/dev/null"},
			{"-l", "65536", "-u", "1048576", "-p", "0", "-n", "50", "-o", "/dev/null"},
		}
	}
	return [][]string{{"-u", "4194304", "-p", "0", "-n", "400", "-o", "/dev/null"}}
}

// xNetpipeArgs are NPmpich2's arguments across simulated hosts, whose links carry a
// few tens of MB/s under load: fewer repeats, and in a quick run sizes up
// to 256 KiB.
func xNetpipeArgs(quick bool) []string {
	max, reps := "4194304", "50"
	if quick {
		max, reps = "262144", "20"
	}
	return []string{"-u", max, "-p", "0", "-n", reps, "-o", "/dev/null"}
}

// netpipeLine is one line of NetPIPE's progress output:
// "  3:       8 bytes  12345 times -->     63.17 Mbps in       0.97 usec".
var netpipeLine = regexp.MustCompile(`^\s*\d+:\s+(\d+) bytes\s+\d+ times -->\s+([0-9.]+) Mbps in\s+([0-9.]+) usec`)

// parseNetpipe turns NetPIPE's output into rows of device: the one-way
// latency (half the round trip, NetPIPE's "usec") and the bandwidth
// (its Mbps as MB/s) per size, and the peak bandwidth over the sizes of
// at least 64 KiB (netpipe_peak, size 0; none without such sizes). NetPIPE writes its lines to stderr, and a
// launcher may split a line between its streams: out is both, and a size
// seen twice counts once.
func parseNetpipe(device string) func(string) []row {
	return func(out string) []row {
		var rows []row
		peak := 0.0
		seen := map[int]bool{}
		for _, l := range strings.Split(out, "\n") {
			m := netpipeLine.FindStringSubmatch(l)
			if m == nil {
				continue
			}
			size, _ := strconv.Atoi(m[1])
			if seen[size] {
				continue
			}
			seen[size] = true
			mbps, _ := strconv.ParseFloat(m[2], 64)
			us, _ := strconv.ParseFloat(m[3], 64)
			rows = append(rows, row{"netpipe_lat", device, 2, size, us, "us"}, row{"netpipe_bw", device, 2, size, mbps / 8, "MB/s"})
			if size >= 64<<10 {
				peak = max(peak, mbps/8)
			}
		}
		if peak > 0 {
			rows = append(rows, row{"netpipe_peak", device, 2, 0, peak, "MB/s"})
		}
		return rows
	}
}

// pingpongPeak is the best ping-pong bandwidth in MB/s (bytes per µs of
// one-way time) over sizes of at least 64 KiB, from lat (µs by size): the
// figure NetPIPE's peak, a ping-pong's, compares with.
func pingpongPeak(lat map[int]float64) (float64, bool) {
	best, ok := 0.0, false
	for size, us := range lat {
		if size >= 64<<10 && us > 0 {
			best, ok = max(best, float64(size)/us), true
		}
	}
	return best, ok
}

// cPingpongRows keeps the pingpong rows of bench/c's mpibench run on an
// adimpi device, renamed c_pingpong of that device (the program names its
// library, "mpich", in its rows).
func cPingpongRows(device string) func(string) []row {
	return func(out string) []row {
		var rows []row
		for _, r := range parseRows(out) {
			if r.bench == "pingpong" {
				r.bench, r.device = "c_pingpong", device
				rows = append(rows, r)
			}
		}
		return rows
	}
}

// libmpich is adimpi's libmpich.so.12, built once per compare run before
// the first C program's step: mpirun would build it inside that step's
// time limit, which a busy machine's link exceeds.
var libmpich struct {
	dir string
	err error
}

// withLibmpich prefixes an adimpi argv so that mpirun uses the library
// built for this run; if that build failed, the argv is left alone (mpirun
// builds the library itself).
func (c *comparer) withLibmpich(argv []string) []string {
	if libmpich.dir == "" && libmpich.err == nil {
		dir := filepath.Join(c.tmp, "libmpich")
		c.note("building adimpi's libmpich.so.12 into %s (the C programs' library)", dir)
		cmd := exec.Command("go", "build", "-buildmode=c-shared", "-ldflags=-extldflags=-Wl,-soname,libmpich.so.12",
			"-o", filepath.Join(dir, "libmpich.so.12"), "./cmd/libmpich")
		cmd.Dir = c.root
		if out, err := cmd.CombinedOutput(); err != nil {
			libmpich.err = fmt.Errorf("go build ./cmd/libmpich: %v: %s", err, lastLine(string(out)))
			c.note("%v", libmpich.err)
		} else {
			libmpich.dir = dir
		}
	}
	if libmpich.dir == "" {
		return argv
	}
	return append([]string{"env", "ADIMPI_LIBMPICH_DIR=" + libmpich.dir}, argv...)
}

// netpipeSuffix tells a target's NetPIPE runs apart in step labels.
var netpipeSuffix = []string{"", "-bw"}

// netpipeSteps plans the single-host netpipe runs: NPmpich2 on every adimpi
// device and on MPICH, and bench/c's ping-pong (MPICH's build) on every
// adimpi device.
func (c *comparer) netpipeSteps() []*cmpStep {
	if _, err := os.Stat(netpipeBin); err != nil {
		msg := fmt.Sprintf("netpipe skipped: %s not found (apt-get install -y netpipe-mpich2)", netpipeBin)
		c.notes = append(c.notes, msg)
		c.note("%s", msg)
		return nil
	}
	var mpich *cmpTarget
	for _, t := range c.targets {
		if t.name == "mpich" {
			mpich = t
		}
	}
	limit := max(c.opts.limit-5*time.Second, c.opts.limit/2)
	cpp := []string{"pingpong", "--max-size", "8", "--min-time", "0.002", "--reps", "5"}
	var steps []*cmpStep
	for _, t := range c.targets {
		switch {
		case t.adimpi:
			for i, args := range netpipeRuns(c.opts.quick) {
				argv := c.withLibmpich([]string{c.mpirun, "-np", "2", "-device", t.name, "-timeout", limit.String(), netpipeBin})
				steps = append(steps, &cmpStep{target: t, bench: "netpipe", np: 2, label: t.name + "-netpipe" + netpipeSuffix[i], what: "netpipe np2" + netpipeSuffix[i],
					argv: append(argv, args...), parse: parseNetpipe(t.name)})
			}
			if mpich != nil && mpich.bins["mpibench"] != "" {
				argv := c.withLibmpich([]string{c.mpirun, "-np", "2", "-device", t.name, "-timeout", limit.String(), mpich.bins["mpibench"]})
				steps = append(steps, &cmpStep{target: t, bench: "netpipe", np: 2, label: t.name + "-c-pingpong", what: "C pingpong np2",
					argv: append(argv, cpp...), parse: cPingpongRows(t.name)})
			}
		case t.name == "mpich":
			for i, args := range netpipeRuns(c.opts.quick) {
				argv := append(slices.Clone(t.launch), "-n", "2", netpipeBin)
				steps = append(steps, &cmpStep{target: t, bench: "netpipe", np: 2, label: t.name + "-netpipe" + netpipeSuffix[i], what: "netpipe np2" + netpipeSuffix[i],
					argv: append(argv, args...), parse: parseNetpipe(t.name)})
			}
		}
	}
	return steps
}

// xNetpipeSteps plans the cross-host netpipe runs: NPmpich2 between h1
// and h2 on the adimpi devices that reach other hosts and on MPICH.
func (c *comparer) xNetpipeSteps(x *xCluster) []*cmpStep {
	if _, err := os.Stat(netpipeBin); err != nil {
		return nil
	}
	var steps []*cmpStep
	for _, t := range c.xTargets() {
		var argv []string
		switch {
		case t.name == "mpich":
			t.bins["netpipe"] = netpipeBin
			argv = c.xLaunch(x, t, 2, 2, "netpipe", xNetpipeArgs(c.opts.quick)...)
		case t.adimpi:
			argv = c.withLibmpich(c.xLaunch(x, t, 2, 2, netpipeBin, xNetpipeArgs(c.opts.quick)...))
		default:
			continue // NPmpich2 needs MPICH's ABI
		}
		steps = append(steps, &cmpStep{target: t, bench: "netpipe", np: 2, hosts: 2, what: "netpipe np2 2h",
			label: "x-" + t.name + "-netpipe-np2-2h", argv: argv, parse: parseNetpipe(t.name)})
	}
	return steps
}

// netpipe writes the NetPIPE section: per target NetPIPE's 8 B latency and
// peak bandwidth, the C ping-pong and the Go API's 8 B latency, and the
// ratios the C ABI is judged by; then NetPIPE's curves.
func (r *cmpReport) netpipe() {
	devs := r.devices("netpipe_lat")
	if len(devs) == 0 {
		return
	}
	r.p("## NetPIPE (unmodified C binary)\n\n")
	r.p("Debian's `NPmpich2` (netpipe-mpich2, built against MPICH's libmpich.so.12), the same binary on MPICH and, "+
		"through adimpi's drop-in libmpich.so.12 (docs/c-abi.md), on each adimpi device; 2 ranks, sizes up to %s without "+
		"perturbations. NetPIPE's latency is half its round trip. \"C ping-pong\" is bench/c/mpibench.c built with "+
		"mpicc.mpich run unmodified on adimpi; \"Go API\" is the pingpong benchmark of this run. Ratios: NetPIPE's 8 B latency "+
		"over the Go API's (target ≤ 1.2) and over MPICH's NetPIPE (target ≤ 1.0); peak bandwidth over MPICH's (target ≥ 1.5).\n\n",
		humanSize(slices.Max(keysOf(r.values("netpipe_lat", devs[0], false, -1, -1)))))
	at := func(bench, dev string, size int) (float64, bool) {
		v, ok := r.values(bench, dev, false, -1, -1)[size]
		return v, ok
	}
	mLat, hasM := at("netpipe_lat", "mpich", 8)
	mPeak, _ := at("netpipe_peak", "mpich", 0)
	f := func(v float64, ok bool) string {
		if !ok {
			return "–"
		}
		return formatValue(v)
	}
	ratio := func(a, b float64, ok bool) string {
		if !ok || b == 0 {
			return "–"
		}
		return fmt.Sprintf("%.2f", a/b)
	}
	var rows [][]string
	for _, d := range devs {
		lat, okL := at("netpipe_lat", d, 8)
		peak, okP := at("netpipe_peak", d, 0)
		cpp, okC := at("c_pingpong", d, 8)
		goLat, okG := at("pingpong", d, 8)
		ppPeak, okPP := pingpongPeak(r.values("pingpong", d, false, 2, -1))
		rows = append(rows, []string{d, f(lat, okL), f(cpp, okC), f(goLat, okG), ratio(lat, goLat, okL && okG),
			ratio(lat, mLat, okL && hasM), f(peak, okP), ratio(peak, mPeak, okP && hasM),
			f(ppPeak, okPP), ratio(peak, ppPeak, okP && okPP)})
	}
	r.table("l", []string{"target", "NetPIPE 8 B (µs)", "C ping-pong 8 B (µs)", "Go API 8 B (µs)", "NetPIPE / Go",
		"NetPIPE / MPICH", "peak MB/s", "peak / MPICH", "ping-pong peak MB/s", "peak / ping-pong peak"}, rows)
	r.p("\"Ping-pong peak\" is the pingpong benchmark's best size ÷ one-way time from 64 KiB up (the Go API on adimpi's " +
		"devices, bench/c's program on MPICH): NetPIPE measures a ping-pong too, so this, not the bw benchmark's " +
		"streaming window, is its like-for-like reference.\n\n")
	r.perSizeSection("netpipe_lat", "NetPIPE latency vs size", "NPmpich2's one-way latency, µs; lower is better.",
		"one-way latency (µs)", "netpipe-latency.png", true, true)
	r.perSizeSection("netpipe_bw", "NetPIPE bandwidth vs size", "NPmpich2's bandwidth, MB/s; higher is better.",
		"bandwidth (MB/s)", "netpipe-bandwidth.png", false, true)
}
