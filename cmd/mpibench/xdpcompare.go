package main

// xdpcompare: the XDP wire's benchmark table (docs/xdp.md). It starts a
// simulated cluster of two compute hosts and a head host (links of --mtu)
// and, in --rounds interleaved rounds, measures between h1 and h2: 8 B
// latency and 64 KiB and 4 MiB bandwidth of every device on the TCP wire
// and on the XDP wire, the same on Open MPI's TCP BTL (launched from the
// head host, as "compare --hosts" does), the raw AF_XDP frame round trip
// (mpibench xskping), and the bandwidth of netvm on both wires with --loss
// of the frames to h2 dropped. It prints a Markdown report of the medians,
// with each point's range and the machine's load at every round.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/adimpi/adimpi/internal/netcluster"
)

// xdpCmpOpts are xdpcompare's settings.
type xdpCmpOpts struct {
	rounds  int
	mtu     int
	devices []string
	loss    string
	limit   time.Duration
	minTime time.Duration
	out     string
	openmpi bool
	before  string
	places  []string
}

// xdpCmp is one xdpcompare run.
type xdpCmp struct {
	o       xdpCmpOpts
	root    string // the repository (bench/, cmd/)
	tmp     string
	self    string // this mpibench
	mpirun  string
	ncBin   string
	ompi    string // Open MPI's mpibench, "" when left out
	places  []*xdpPlace
	nc      *netcluster.Cluster  // the placement being measured or reported
	vals    map[string][]float64 // its values by point: "netvm/xdp/lat8"
	loads   []string
	notes   []string
	started time.Time
}

func runXDPCompare(args []string) int {
	var o xdpCmpOpts
	fs := pflag.NewFlagSet("mpibench xdpcompare", pflag.ContinueOnError)
	fs.IntVar(&o.rounds, "rounds", 5, "interleaved rounds; the report keeps each point's median")
	fs.IntVar(&o.mtu, "mtu", 65000, "the simulated links' MTU (1500: standard frames; 9000: Ethernet's jumbo frames; 65000, the default: about the largest veth takes, where the XDP wire runs best)")
	fs.StringSliceVar(&o.devices, "devices", []string{"netvm", "fm", "via", "bip"}, "adimpi devices to measure")
	fs.StringVar(&o.loss, "loss", "1%", "loss on h2's link for the loss rows (\"\" skips them)")
	fs.DurationVar(&o.limit, "limit", 90*time.Second, "time limit of one job")
	fs.DurationVar(&o.minTime, "min-time", 300*time.Millisecond, "least time each measurement runs (a 64 KiB window takes milliseconds: shorter runs are mostly noise)")
	fs.StringVar(&o.out, "out", "", "write the report here as well as to standard output")
	fs.BoolVar(&o.openmpi, "openmpi", true, "measure Open MPI's TCP BTL (needs mpicc.openmpi and mpirun.openmpi)")
	fs.StringSliceVar(&o.places, "placement", []string{"shared"}, "where the simulated hosts run, one cluster each, measured in the same rounds: shared (every host may use every CPU), cpu-per-host (each host on a CPU of its own, as netcluster up --cpu-per-host)")
	fs.StringVar(&o.before, "before", "", "an mpibench built from an earlier tree: its XDP wire rows are measured in the same rounds (A/B)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if o.rounds < 1 {
		fmt.Fprintln(os.Stderr, "mpibench xdpcompare: --rounds must be at least 1")
		return 2
	}
	c := &xdpCmp{o: o, started: time.Now()}
	for _, name := range o.places {
		if name != "shared" && name != "cpu-per-host" {
			fmt.Fprintf(os.Stderr, "mpibench xdpcompare: --placement %q: want shared or cpu-per-host\n", name)
			return 2
		}
		c.places = append(c.places, &xdpPlace{name: name, vals: map[string][]float64{}})
	}
	if err := c.run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "mpibench xdpcompare:", err)
		return 1
	}
	return 0
}

func (c *xdpCmp) run(ctx context.Context) error {
	if os.Geteuid() != 0 {
		return errors.New("the simulated hosts and AF_XDP need root")
	}
	if err := c.prepare(ctx); err != nil {
		return err
	}
	defer os.RemoveAll(c.tmp)
	for _, p := range c.places {
		nc, err := netcluster.Start(netcluster.Options{Hosts: 3, Dir: filepath.Join(c.tmp, p.name), MTU: c.o.mtu, CPUPerHost: p.name == "cpu-per-host"})
		if err != nil {
			return err
		}
		p.nc = nc
		defer func() {
			if err := nc.Close(); err != nil {
				fmt.Fprintln(os.Stderr, "tearing down the simulated cluster:", err)
			}
		}()
	}
	os.Setenv("NETCLUSTER", c.ncBin)
	for r := 1; r <= c.o.rounds; r++ {
		c.loads = append(c.loads, loadAvg())
		for _, p := range c.places {
			c.use(p)
			c.round(ctx, r)
		}
	}
	c.loads = append(c.loads, loadAvg())
	var b strings.Builder
	c.report(&b)
	fmt.Print(b.String())
	if c.o.out != "" {
		return os.WriteFile(c.o.out, []byte(b.String()), 0o644)
	}
	return nil
}

// prepare finds the repository and builds mpirun, netcluster and Open
// MPI's mpibench.
func (c *xdpCmp) prepare(ctx context.Context) error {
	var err error
	if c.self, err = os.Executable(); err != nil {
		return err
	}
	out, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		return fmt.Errorf("finding the repository (run from inside it): %v", err)
	}
	c.root = strings.TrimSpace(string(out))
	if c.tmp, err = os.MkdirTemp("", "xdpcompare-"); err != nil {
		return err
	}
	c.mpirun, c.ncBin = filepath.Join(c.tmp, "mpirun"), filepath.Join(c.tmp, "netcluster")
	build := exec.CommandContext(ctx, "go", "build", "-o", c.tmp+"/", "./cmd/mpirun", "./cmd/netcluster")
	build.Dir = c.root
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("go build: %v\n%s", err, out)
	}
	if c.o.openmpi {
		c.ompi = filepath.Join(c.tmp, "ompi-mpibench")
		cc := exec.CommandContext(ctx, "mpicc.openmpi", "-O2", "-o", c.ompi, filepath.Join(c.root, "bench", "c", "mpibench.c"), "-lm")
		if out, err := cc.CombinedOutput(); err != nil {
			c.note("Open MPI left out: mpicc.openmpi: %v: %s", err, strings.TrimSpace(string(out)))
			c.ompi = ""
		}
	}
	return nil
}

func (c *xdpCmp) note(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	c.notes = append(c.notes, msg)
	fmt.Fprintln(os.Stderr, msg)
}

// xdpPlace is one placement of the simulated hosts on the CPUs, with a
// cluster of its own and its measurements.
type xdpPlace struct {
	name string // "shared" or "cpu-per-host"
	nc   *netcluster.Cluster
	vals map[string][]float64
}

// use makes p the placement that the next measurements and reports are of.
func (c *xdpCmp) use(p *xdpPlace) {
	c.nc, c.vals = p.nc, p.vals
	os.Setenv("NETCLUSTER_DIR", p.nc.Dir) // bench/netcluster-agent.sh's, for Open MPI
}

// placement names each host's CPUs ("h1 on CPU 0, h2 on CPU 1").
func (c *xdpCmp) placement() string {
	var p []string
	for _, h := range c.nc.Hosts {
		p = append(p, h.Name+" on CPU "+h.CPUList())
	}
	return strings.Join(p, ", ")
}

// loadAvg is the machine's load average as uptime prints it.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:3], " ")
}

// xdpPoints are the measurements of one target: a name, the mpibench
// arguments, and the size whose row is kept.
var xdpPoints = []struct {
	name string
	args []string
	size int
}{
	{"lat8", []string{"pingpong", "--min-size", "8", "--max-size", "8"}, 8},
	{"bw64k", []string{"bw", "--min-size", "65536", "--max-size", "65536"}, 65536},
	{"bw4m", []string{"bw", "--min-size", "4194304", "--max-size", "4194304"}, 4194304},
}

// round runs every point of every target once, then the loss rows.
func (c *xdpCmp) round(ctx context.Context, r int) {
	fmt.Fprintf(os.Stderr, "round %d/%d, %s (load %s)\n", r, c.o.rounds, filepath.Base(c.nc.Dir), loadAvg())
	c.raw()
	for _, dev := range c.o.devices {
		for _, wire := range c.wires() {
			for _, p := range xdpPoints {
				c.adimpi(ctx, dev, wire, p.name, p.args, p.size)
			}
		}
	}
	if c.ompi != "" {
		for _, p := range xdpPoints {
			c.openMPI(ctx, p.name, p.args, p.size)
		}
	}
	if c.o.loss == "" {
		return
	}
	if err := c.nc.Netem("h2", "loss", c.o.loss); err != nil {
		c.note("loss rows left out: %v", err)
		c.o.loss = ""
		return
	}
	for _, wire := range []string{"tcp", "xdp"} {
		for _, p := range xdpPoints[1:] {
			c.adimpi(ctx, "netvm", wire, p.name+"-loss", p.args, p.size)
		}
	}
	if err := c.nc.Netem("h2"); err != nil {
		c.note("removing the loss: %v", err)
	}
}

// wires are the rows of each device: the TCP wire, the XDP wire, and the
// XDP wire of the --before build ("xdp-before").
func (c *xdpCmp) wires() []string {
	if c.o.before != "" {
		return []string{"tcp", "xdp", "xdp-before"}
	}
	return []string{"tcp", "xdp"}
}

// adimpi runs one point on an adimpi device over a wire ("xdp-before":
// the XDP wire, with the --before build of mpibench).
func (c *xdpCmp) adimpi(ctx context.Context, dev, wire, point string, args []string, size int) {
	bin, w := c.self, wire
	if wire == "xdp-before" {
		bin, w = c.o.before, "xdp"
	}
	argv := []string{c.mpirun, "-hosts", "h1,h2", "-launcher-exec", c.ncBin + " exec -dir " + c.nc.Dir + " {host} --",
		"-np", "2", "-device", dev, "-wire", w, "-timeout", c.o.limit.String(), bin}
	argv = append(append(argv, args...), "--csv", "--header=false", "--min-time", c.o.minTime.String())
	c.job(ctx, dev+"/"+wire+"/"+point, argv, size)
}

// openMPI runs one point on Open MPI's TCP BTL, launched from the head host.
func (c *xdpCmp) openMPI(ctx context.Context, point string, args []string, size int) {
	argv := []string{"nsenter", "--net=/proc/" + strconv.Itoa(c.nc.Hosts[2].PID) + "/ns/net", "mpirun.openmpi",
		"--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "--mca", "btl", "tcp,self",
		"--mca", "plm_rsh_agent", filepath.Join(c.root, "bench", "netcluster-agent.sh"),
		"-H", c.nc.Hosts[0].Addr.String() + ":1," + c.nc.Hosts[1].Addr.String() + ":1", "-n", "2", c.ompi}
	argv = append(append(argv, args...), "--no-header", "--min-time", strconv.FormatFloat(c.o.minTime.Seconds(), 'f', -1, 64))
	c.job(ctx, "openmpi/tcp/"+point, argv, size)
}

// job runs argv and keeps the value of its CSV row of size.
func (c *xdpCmp) job(ctx context.Context, key string, argv []string, size int) {
	ctx, cancel := context.WithTimeout(ctx, c.o.limit+10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	t0 := time.Now()
	out, err := cmd.Output()
	v, ok := csvValue(string(out), size)
	if err != nil || !ok {
		msg := ""
		if ee, isExit := err.(*exec.ExitError); isExit {
			msg = lastLine(string(ee.Stderr))
		}
		c.note("%s failed after %.1fs: %v %s", key, time.Since(t0).Seconds(), err, msg)
		return
	}
	fmt.Fprintf(os.Stderr, "  %-28s %10.2f  (%.1fs)\n", key, v, time.Since(t0).Seconds())
	c.vals[key] = append(c.vals[key], v)
}

// raw measures the AF_XDP frame round trip between h1 and h2.
func (c *xdpCmp) raw() {
	echo := c.nc.Command("h2", c.self, "xskping", "echo")
	stdin, err := echo.StdinPipe()
	if err != nil {
		c.note("raw: %v", err)
		return
	}
	stdout, err := echo.StdoutPipe()
	if err != nil {
		c.note("raw: %v", err)
		return
	}
	if err := echo.Start(); err != nil {
		c.note("raw: %v", err)
		return
	}
	defer func() {
		stdin.Close()
		done := make(chan struct{})
		go func() { _ = echo.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = echo.Process.Kill()
			<-done
		}
	}()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "mac ") {
		c.note("raw: the echo said %q: %v", line, err)
		return
	}
	mac := strings.TrimSpace(strings.TrimPrefix(line, "mac "))
	ping := c.nc.Command("h1", c.self, "xskping", "ping", mac, "2000", "128")
	out, err := ping.Output()
	if err != nil {
		c.note("raw: ping: %v", err)
		return
	}
	for _, l := range strings.Split(string(out), "\n") {
		f := strings.Split(l, ",")
		if len(f) != 6 {
			continue
		}
		key := map[string]string{"us_rtt_median": "raw/xdp/rtt", "us_rtt_min": "raw/xdp/rttmin"}[f[5]]
		if v, err := strconv.ParseFloat(f[4], 64); err == nil && key != "" {
			fmt.Fprintf(os.Stderr, "  %-28s %10.2f\n", key, v)
			c.vals[key] = append(c.vals[key], v)
		}
	}
}

// csvValue finds the value of the row of size in mpibench's CSV output.
func csvValue(out string, size int) (float64, bool) {
	for _, l := range strings.Split(out, "\n") {
		f := strings.Split(strings.TrimSpace(l), ",")
		if len(f) != 6 || f[3] != strconv.Itoa(size) {
			continue
		}
		if v, err := strconv.ParseFloat(f[4], 64); err == nil {
			return v, true
		}
	}
	return 0, false
}

// stat is a point's median and range over the rounds.
type stat struct {
	med, lo, hi float64
	n           int
}

func (c *xdpCmp) stat(key string) (stat, bool) {
	v := c.vals[key]
	if len(v) == 0 {
		return stat{}, false
	}
	return stat{median(v), slices.Min(v), slices.Max(v), len(v)}, true
}

// cell formats a point: its median and its range.
func (c *xdpCmp) cell(key string) string {
	s, ok := c.stat(key)
	if !ok {
		return "—"
	}
	if s.n == 1 {
		return fmt.Sprintf("%.1f", s.med)
	}
	return fmt.Sprintf("%.1f (%.1f–%.1f)", s.med, s.lo, s.hi)
}

// ratio formats the ratio of two points' medians against a target.
func (c *xdpCmp) ratio(a, b string, target float64, atMost bool) string {
	sa, ok1 := c.stat(a)
	sb, ok2 := c.stat(b)
	if !ok1 || !ok2 || sb.med == 0 {
		return "—"
	}
	r := sa.med / sb.med
	met := r >= target
	if atMost {
		met = r <= target
	}
	mark := "met"
	if !met {
		mark = "missed"
	}
	return fmt.Sprintf("%.2f× (%s)", r, mark)
}

// report writes the Markdown report.
func (c *xdpCmp) report(w io.Writer) {
	fmt.Fprintf(w, "Run of %s UTC, %d interleaved rounds, links of MTU %d, each point run for at least %v, medians (range in brackets); load average (1, 5, 15 min) at each round's start and at the end: %s.\n\n",
		c.started.UTC().Format("2006-01-02 15:04"), c.o.rounds, c.o.mtu, c.o.minTime, strings.Join(c.loads, " / "))
	for _, p := range c.places {
		c.use(p)
		switch {
		case p.name == "cpu-per-host":
			fmt.Fprintf(w, "### Each host on a CPU of its own (--placement cpu-per-host: %s)\n\n", c.placement())
		case len(c.places) > 1:
			fmt.Fprintf(w, "### Every host on every CPU (--placement shared)\n\n")
		}
		c.reportPlace(w)
	}
	if len(c.notes) > 0 {
		fmt.Fprintln(w, "\nNotes:")
		for _, n := range c.notes {
			fmt.Fprintf(w, "- %s\n", n)
		}
	}
}

// reportPlace writes the tables of the placement in use.
func (c *xdpCmp) reportPlace(w io.Writer) {
	fmt.Fprintln(w, "| target | wire | 8 B latency (µs) | 64 KiB bw (MB/s) | 4 MiB bw (MB/s) |")
	fmt.Fprintln(w, "|---|---|---|---|---|")
	for _, dev := range c.o.devices {
		for _, wire := range c.wires() {
			k := dev + "/" + wire + "/"
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", dev, strings.Replace(wire, "-", " ", 1), c.cell(k+"lat8"), c.cell(k+"bw64k"), c.cell(k+"bw4m"))
		}
	}
	if c.ompi != "" {
		k := "openmpi/tcp/"
		fmt.Fprintf(w, "| Open MPI (btl tcp,self) | tcp | %s | %s | %s |\n", c.cell(k+"lat8"), c.cell(k+"bw64k"), c.cell(k+"bw4m"))
	}
	if s, ok := c.stat("raw/xdp/rtt"); ok {
		c.vals["raw/xdp/oneway"] = []float64{s.med / 2}
		fmt.Fprintf(w, "| raw AF_XDP frame, 128 B | — | %.1f one way (round trip %s; least %s) | — | — |\n", s.med/2, c.cell("raw/xdp/rtt"), c.cell("raw/xdp/rttmin"))
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| device | 8 B XDP / Open MPI (≤ 0.5) | 8 B XDP / raw one way (≤ 1.5) | 64 KiB XDP / TCP (≥ 1.0) | 4 MiB XDP / TCP (≥ 1.0) |")
	fmt.Fprintln(w, "|---|---|---|---|---|")
	for _, dev := range c.o.devices {
		for _, wire := range c.wires()[1:] {
			x, t, name := dev+"/"+wire+"/", dev+"/tcp/", dev
			if wire != "xdp" {
				name += " (before)"
			}
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", name, c.ratio(x+"lat8", "openmpi/tcp/lat8", 0.5, true),
				c.ratio(x+"lat8", "raw/xdp/oneway", 1.5, true), c.ratio(x+"bw64k", t+"bw64k", 1, false), c.ratio(x+"bw4m", t+"bw4m", 1, false))
		}
	}
	if c.o.loss != "" {
		fmt.Fprintf(w, "\nnetvm with %s of the frames to h2 (the receiver) dropped, same rounds:\n\n", c.o.loss)
		fmt.Fprintln(w, "| wire | 64 KiB bw (MB/s) | kept | 4 MiB bw (MB/s) | kept |")
		fmt.Fprintln(w, "|---|---|---|---|---|")
		for _, wire := range []string{"tcp", "xdp"} {
			k := "netvm/" + wire + "/"
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", wire, c.cell(k+"bw64k-loss"), c.ratio(k+"bw64k-loss", k+"bw64k", 0.9, false),
				c.cell(k+"bw4m-loss"), c.ratio(k+"bw4m-loss", k+"bw4m", 0.9, false))
		}
	}
	fmt.Fprintln(w)
}
