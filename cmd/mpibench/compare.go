package main

// The compare subcommand: one run of the benchmark set on every registered
// adimpi device and on MPICH and Open MPI (bench/c, where installed), then a
// Markdown report with tables and PNG plots.
//
//	mpibench compare [-o DIR] [--devices LIST] [--quick] [--benches LIST] [--nps LIST]
//	mpibench compare --hosts N [--single-host] [--rounds R] ...
//
// With --hosts, the runs go across a simulated cluster of N hosts instead
// (compare_hosts.go), and with --single-host as well the usual set runs
// first, both in one report.
//
// Every measurement is a child process: `mpirun -device D -np N mpibench SUB
// --csv` for adimpi (mpirun and the examples are built once into a temporary
// directory with go build, mpibench is this executable), and the C programs
// of bench/c built with mpicc.mpich / mpicc.openmpi and started with
// mpiexec.mpich / mpiexec.openmpi. Each run has a time limit; a run that
// fails or times out is recorded (report.md, section "Runs") and the next
// one starts. The runs go benchmark by benchmark, each across all targets,
// so that the numbers compared in one table were taken close together.
//
// The output directory receives report.md, results.csv (every row,
// bench,device,np,size,value,unit), the plots (*.png) and logs/ (each run's
// stdout and stderr).

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/adimpi/adimpi/adi"
	"github.com/adimpi/adimpi/internal/netcluster"
)

// compareBenches are the benchmark groups of compare, in run order.
var compareBenches = []string{"pingpong", "bw", "rate", "netpipe", "anysource", "coll", "overlap", "examples"}

// compareExamples are the example programs timed by compare, with their
// arguments in a full run (a quick run takes their defaults, which finish in
// a few tens of milliseconds, mostly the launch).
var compareExamples = []struct {
	name string
	full []string
}{
	{"jacobi", []string{"-n", "256", "-iters", "500"}},
	{"masterworker", []string{"-items", "20000"}},
	{"ring", nil},
}

// exampleArgs are the arguments an example gets.
func (o *compareOpts) exampleArgs(name string) []string {
	for _, ex := range compareExamples {
		if ex.name == name && !o.quick {
			return ex.full
		}
	}
	return nil
}

// quickMaxTimeouts is how many timed-out runs a target may have in a quick
// run before its remaining runs are skipped.
const quickMaxTimeouts = 2

// compareOpts are compare's settings.
type compareOpts struct {
	out       string
	devices   []string // names to run (adimpi devices, mpich, openmpi); empty = all
	benches   []string
	nps       []int // process counts of anysource, coll and the examples
	quick     bool
	limit     time.Duration // per run
	mpirun    string        // a built launcher instead of go build ./cmd/mpirun
	mpibench  string        // the mpibench to run under mpirun (default: this executable)
	exReps    int           // timed runs per example (the best is kept)
	computeUS int           // overlap: the computation C in µs
	hosts     int           // > 0: the cross-host runs on a simulated cluster of this many hosts
	single    bool          // with hosts: the single-host set as well
	rounds    int           // cross-host: rounds of every step; the median is kept
	hostColls []string      // cross-host: coll placements "NP@HOSTS" (compare_hosts.go)
}

const compareUsage = `usage: mpibench compare [flags]

Runs the benchmark set (pingpong, bw, netpipe, anysource, coll, overlap and
the wall time of examples/{jacobi,masterworker,ring}) on every registered adimpi
device and on MPICH and Open MPI (bench/c) where installed, and writes DIR/report.md
with tables and PNG plots, DIR/results.csv and DIR/logs/. Run it from inside
the adimpi source tree (it builds cmd/mpirun, the examples and bench/c).

With --hosts N (root only) it starts a simulated cluster of N hosts
(cmd/netcluster) and runs pingpong, bw and netpipe between two hosts and coll at np 4
and 8 over 2 and 4 hosts, on every adimpi device that reaches other hosts and
on Open MPI (TCP) and MPICH launched onto the same hosts, in --rounds
interleaved rounds (medians); --single-host adds the usual set to the same
report.

flags:
`

// parseCompareArgs reads compare's flags.
func parseCompareArgs(args []string, stderr io.Writer) (*compareOpts, error) {
	o := &compareOpts{}
	fs := pflag.NewFlagSet("mpibench compare", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVarP(&o.out, "out", "o", filepath.Join("bench-out", "compare"), "output `directory`")
	fs.StringSliceVar(&o.devices, "devices", nil, "only these targets, comma-separated: adimpi device names, mpich, openmpi (default: all found)")
	fs.StringSliceVar(&o.benches, "benches", nil, "only these benchmarks: "+strings.Join(compareBenches, ",")+" (default: all)")
	fs.IntSliceVar(&o.nps, "nps", nil, "process counts for anysource, coll and the examples (default 2,4,8,16; --quick 2,4)")
	fs.BoolVar(&o.quick, "quick", false, "a short run: sizes up to 1 MiB, few iterations, np 2 and 4")
	fs.DurationVar(&o.limit, "timeout", 0, "time limit of one run (default 180s; --quick 60s)")
	fs.StringVar(&o.mpirun, "mpirun", "", "an already built mpirun (default: go build ./cmd/mpirun)")
	fs.StringVar(&o.mpibench, "mpibench", "", "the mpibench binary to run (default: this executable)")
	fs.IntVar(&o.exReps, "example-reps", 0, "timed runs per example, the best is kept (default 5; --quick 3)")
	fs.IntVar(&o.computeUS, "compute-us", 500, "overlap: the computation C in µs")
	fs.IntVar(&o.hosts, "hosts", 0, "run across a simulated cluster of `N` hosts (at least 2; needs root)")
	fs.BoolVar(&o.single, "single-host", false, "with --hosts: run the usual single-host set too, in the same report")
	fs.IntVar(&o.rounds, "rounds", 0, "with --hosts: rounds of every cross-host run, the median kept (default 3; --quick 1)")
	fs.StringSliceVar(&o.hostColls, "host-colls", nil, "with --hosts: the cross-host coll runs as NP@HOSTS, comma-separated (default 4@2,8@2,4@4,8@4; --quick 4@2)")
	fs.Usage = func() {
		fmt.Fprint(stderr, compareUsage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	devs := adi.Devices()
	for _, name := range o.devices {
		if !slices.Contains(devs, name) && name != "mpich" && name != "openmpi" {
			return nil, fmt.Errorf("--devices: unknown target %q (registered devices: %s; and mpich, openmpi)", name, strings.Join(devs, ", "))
		}
	}
	if len(o.benches) == 0 {
		o.benches = compareBenches
	}
	for _, b := range o.benches {
		if !slices.Contains(compareBenches, b) {
			return nil, fmt.Errorf("unknown benchmark %q (want some of %s)", b, strings.Join(compareBenches, ","))
		}
	}
	if len(o.nps) == 0 {
		o.nps = []int{2, 4, 8, 16}
		if o.quick {
			o.nps = []int{2, 4}
		}
	}
	for _, np := range o.nps {
		if np < 2 {
			return nil, fmt.Errorf("--nps: %d: every process count must be at least 2", np)
		}
	}
	if o.limit <= 0 {
		o.limit = 180 * time.Second
		if o.quick {
			o.limit = 60 * time.Second
		}
	}
	if o.exReps <= 0 {
		o.exReps = 5
		if o.quick {
			o.exReps = 3
		}
	}
	if o.hosts < 0 || o.hosts == 1 || o.hosts > netcluster.MaxHosts-1 {
		return nil, fmt.Errorf("--hosts %d: want 2 to %d hosts", o.hosts, netcluster.MaxHosts-1)
	}
	if o.hosts == 0 && (o.single || o.rounds != 0) {
		return nil, errors.New("--single-host and --rounds go with --hosts")
	}
	if o.rounds <= 0 {
		o.rounds = 3
		if o.quick {
			o.rounds = 1
		}
	}
	if o.computeUS <= 0 {
		return nil, errors.New("--compute-us must be positive")
	}
	return o, nil
}

// runCompare is the compare subcommand; it returns the exit status: 0, 2
// for bad flags, 1 when it could not run or some runs failed (the report
// is written all the same).
func runCompare(args []string) int {
	o, err := parseCompareArgs(args, os.Stderr)
	if errors.Is(err, pflag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "mpibench compare:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	c := &comparer{opts: o, w: os.Stdout}
	if err := c.run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "mpibench compare:", err)
		return 1
	}
	return 0
}

// cmpTarget is one thing compared: an adimpi device or a C MPI library.
type cmpTarget struct {
	name    string   // column name: the device or "mpich" / "openmpi"
	adimpi  bool     // an adimpi device (run under our mpirun)
	launch  []string // C: the launcher and its options, before -n N
	bins    map[string]string
	version string // C: the library's version
}

// cmpStep is one run of the plan.
type cmpStep struct {
	target  *cmpTarget
	bench   string // one of compareBenches
	np      int
	hosts   int    // cross-host runs: the hosts the ranks span
	label   string // file name base in logs/
	what    string // shown on the progress line
	argv    []string
	example string // non-empty: a timed example; the row is its wall time
	reps    int
	parse   func(out string) []row // reads the rows of a program that prints no CSV from its stdout and stderr (netpipe.go); nil: parseRows of stdout
}

// cmpRun records how one step went.
type cmpRun struct {
	label, target, bench, what string
	np                         int
	ok                         bool
	status                     string // "ok", "failed (exit 1)", "timed out (60s)"
	secs                       float64
	rows                       int
	errLine                    string // the last line of stderr of a failed run
}

// comparer holds one compare run's state.
type comparer struct {
	opts    *compareOpts
	w       io.Writer // progress lines
	root    string    // the adimpi source tree
	tmp     string    // built binaries
	logs    string
	mpirun  string
	bench   string // mpibench
	exBins  map[string]string
	targets []*cmpTarget
	notes   []string // what was missing or skipped, for the report
	runs    []cmpRun
	rows    []row
	started time.Time
}

func (c *comparer) note(format string, a ...any) {
	fmt.Fprintf(c.w, "== %s\n", fmt.Sprintf(format, a...))
}

// run does the whole comparison.
func (c *comparer) run(ctx context.Context) error {
	o := c.opts
	c.started = time.Now()
	c.logs = filepath.Join(o.out, "logs")
	if err := os.MkdirAll(c.logs, 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "mpibench-compare-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	c.tmp = tmp
	c.root = findModuleRoot()
	if err := c.buildTools(ctx); err != nil {
		return err
	}
	if err := c.findTargets(ctx); err != nil {
		return err
	}
	if len(c.targets) == 0 {
		return errors.New("nothing to compare: no target left after --devices")
	}
	names := make([]string, len(c.targets))
	for i, t := range c.targets {
		names[i] = t.name
	}
	c.note("targets: %s; benchmarks: %s; np %v; limit %v per run", strings.Join(names, ", "), strings.Join(o.benches, ","), o.nps, o.limit)
	// The cross-host runs go first: they are what --hosts asks for, and an
	// interrupted run keeps them.
	if o.hosts > 0 {
		if err := c.runCross(ctx); err != nil {
			return err
		}
	}
	var steps []*cmpStep
	if o.hosts == 0 || o.single {
		steps = c.plan()
	}
	timeouts := map[string]int{} // per target
	for i, s := range steps {
		if ctx.Err() != nil {
			break
		}
		fmt.Fprintf(c.w, "[%*d/%d] %-10s %-28s ", len(strconv.Itoa(len(steps))), i+1, len(steps), s.target.name, s.what)
		var rows []row
		var r cmpRun
		if o.quick && timeouts[s.target.name] >= quickMaxTimeouts {
			// A quick run must stay quick: a target that keeps hanging is given up.
			r = cmpRun{label: s.label, target: s.target.name, bench: s.bench, what: s.what, np: s.np,
				status: "skipped", errLine: fmt.Sprintf("%d earlier runs timed out (--quick)", timeouts[s.target.name])}
		} else {
			rows, r = c.exec(ctx, s)
		}
		if strings.HasPrefix(r.status, "timed out") {
			timeouts[s.target.name]++
		}
		c.rows = append(c.rows, rows...)
		c.runs = append(c.runs, r)
		if r.ok {
			fmt.Fprintf(c.w, "ok %6.1fs %4d rows\n", r.secs, r.rows)
		} else {
			fmt.Fprintf(c.w, "%s after %.1fs: %s\n", strings.ToUpper(r.status[:1])+r.status[1:], r.secs, r.errLine)
		}
	}
	if ctx.Err() != nil {
		c.notes = append(c.notes, "interrupted: the report holds the runs done before the interrupt")
	}
	return c.writeOutputs()
}

// writeOutputs writes results.csv, the plots and report.md.
func (c *comparer) writeOutputs() error {
	var csv bytes.Buffer
	printRows(&csv, &config{csv: true, header: true}, c.rows)
	resPath := filepath.Join(c.opts.out, "results.csv")
	if err := os.WriteFile(resPath, csv.Bytes(), 0o644); err != nil {
		return err
	}
	res, err := readResults(resPath)
	if err != nil {
		return err
	}
	failed := 0
	for _, r := range c.runs {
		if !r.ok {
			failed++
		}
	}
	meta := c.meta()
	if err := writeCompareReport(c.opts.out, res, meta, c.runs); err != nil {
		return err
	}
	c.note("%d runs (%d failed), %d rows, %s; report: %s", len(c.runs), failed, len(c.rows),
		time.Since(c.started).Round(time.Second), filepath.Join(c.opts.out, "report.md"))
	if failed > 0 {
		return fmt.Errorf("%d of %d runs failed or timed out (the report lists them)", failed, len(c.runs))
	}
	return nil
}

// meta describes the run for the report's header.
func (c *comparer) meta() compareMeta {
	m := compareMeta{
		when:    c.started.UTC().Format("2006-01-02 15:04 UTC"),
		elapsed: time.Since(c.started).Round(time.Second),
		cpus:    runtime.NumCPU(),
		goVer:   runtime.Version(),
		quick:   c.opts.quick,
		notes:   c.notes,
		exReps:  c.opts.exReps,
		examples: func() []string {
			var out []string
			for _, ex := range compareExamples {
				out = append(out, strings.Join(append([]string{"examples/" + ex.name}, c.opts.exampleArgs(ex.name)...), " "))
			}
			return out
		}(),
		compute: c.opts.computeUS,
		hosts:   c.opts.hosts,
		rounds:  c.opts.rounds,
	}
	if l := loadAvg(); l != "?" {
		m.load = l
	}
	if c.root != "" {
		cmd := exec.Command("git", "describe", "--always", "--dirty")
		cmd.Dir = c.root
		if out, err := cmd.Output(); err == nil {
			m.commit = strings.TrimSpace(string(out))
		}
	}
	for _, t := range c.targets {
		m.order = append(m.order, t.name)
		desc := "adimpi device (mpirun -device " + t.name + ")"
		if !t.adimpi {
			desc = t.version + " (" + strings.Join(t.launch, " ") + ")"
		}
		m.targets = append(m.targets, [2]string{t.name, desc})
	}
	return m
}

// findModuleRoot returns the adimpi source tree around the working
// directory, or "" when there is none.
func findModuleRoot() string {
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil &&
			strings.HasPrefix(string(b), "module github.com/adimpi/adimpi\n") {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// buildTools finds mpibench and builds mpirun and the examples.
func (c *comparer) buildTools(ctx context.Context) error {
	o := c.opts
	c.bench = o.mpibench
	if c.bench == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("cannot find this executable (give --mpibench): %v", err)
		}
		c.bench = exe
	}
	c.mpirun = o.mpirun
	needExamples := slices.Contains(o.benches, "examples") && (o.hosts == 0 || o.single)
	if c.root == "" && o.hosts > 0 {
		return errors.New("--hosts: run from inside the adimpi source tree (it builds cmd/netcluster and uses bench/netcluster-agent.sh)")
	}
	if c.root == "" {
		if c.mpirun == "" {
			return errors.New("not inside the adimpi source tree: run from there, or give --mpirun (and the C benchmarks and examples are skipped)")
		}
		if needExamples {
			c.notes = append(c.notes, "examples skipped: not run from inside the adimpi source tree")
		}
		return nil
	}
	var pkgs []string
	if c.mpirun == "" {
		pkgs = append(pkgs, "./cmd/mpirun")
		c.mpirun = filepath.Join(c.tmp, "mpirun")
	}
	if o.hosts > 0 {
		pkgs = append(pkgs, "./cmd/netcluster")
	}
	if needExamples {
		c.exBins = map[string]string{}
		for _, ex := range compareExamples {
			pkgs = append(pkgs, "./examples/"+ex.name)
			c.exBins[ex.name] = filepath.Join(c.tmp, ex.name)
		}
	}
	if len(pkgs) == 0 {
		return nil
	}
	c.note("building %s into %s", strings.Join(pkgs, " "), c.tmp)
	// go build -o DIR/ puts each main package's binary in DIR under its base name.
	cmd := exec.CommandContext(ctx, "go", append([]string{"build", "-o", c.tmp + string(filepath.Separator)}, pkgs...)...)
	cmd.Dir = c.root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %v\n%s", strings.Join(pkgs, " "), err, out)
	}
	return nil
}

// wanted reports whether --devices lets name through.
func (c *comparer) wanted(name string) bool {
	return len(c.opts.devices) == 0 || slices.Contains(c.opts.devices, name)
}

// findTargets lists the adimpi devices and finds, builds and probes the C MPIs.
func (c *comparer) findTargets(ctx context.Context) error {
	for _, d := range adi.Devices() {
		if c.wanted(d) {
			c.targets = append(c.targets, &cmpTarget{name: d, adimpi: true})
		}
	}
	for _, lib := range []string{"mpich", "openmpi"} {
		if !c.wanted(lib) {
			continue
		}
		t, err := c.findMPI(ctx, lib)
		if err != nil {
			c.notes = append(c.notes, err.Error())
			c.note("%s", err)
			continue
		}
		c.note("%s: %s (%s)", lib, t.version, strings.Join(t.launch, " "))
		c.targets = append(c.targets, t)
	}
	return nil
}

// exec runs one step under its time limit, keeping its output in logs/.
func (c *comparer) exec(ctx context.Context, s *cmpStep) ([]row, cmpRun) {
	r := cmpRun{label: s.label, target: s.target.name, bench: s.bench, what: s.what, np: s.np}
	t0 := time.Now()
	outF, err1 := os.Create(filepath.Join(c.logs, s.label+".out"))
	errF, err2 := os.Create(filepath.Join(c.logs, s.label+".err"))
	if err := errors.Join(err1, err2); err != nil {
		r.status, r.errLine = "failed", err.Error()
		return nil, r
	}
	defer outF.Close()
	defer errF.Close()
	fmt.Fprintf(errF, "# %s\n", strings.Join(s.argv, " "))
	var rows []row
	reps := max(s.reps, 1)
	best := 0.0
	for i := 0; i < reps; i++ {
		var stdout, stderr bytes.Buffer
		wall, err := runLimited(ctx, c.opts.limit, s.argv, io.MultiWriter(&stdout, outF), io.MultiWriter(&stderr, errF))
		if err != nil {
			r.status = err.Error()
			r.errLine = lastLine(stderr.String())
			if r.errLine == "" && strings.TrimSpace(stdout.String()) != "" {
				r.errLine = "last output: " + lastLine(stdout.String())
			}
			rows = append(rows, s.rowsOf(stdout.String(), stderr.String())...)
			r.secs, r.rows = time.Since(t0).Seconds(), len(rows)
			return rows, r
		}
		if s.example == "" {
			rows = append(rows, s.rowsOf(stdout.String(), stderr.String())...)
		} else if i == 0 || wall.Seconds() < best {
			best = wall.Seconds()
		}
	}
	if s.example != "" {
		rows = append(rows, row{"example_" + s.example, s.target.name, s.np, 0, best, "s"})
	}
	r.ok, r.status = true, "ok"
	r.secs, r.rows = time.Since(t0).Seconds(), len(rows)
	return rows, r
}

// rowsOf reads the rows of the step's output.
func (s *cmpStep) rowsOf(stdout, stderr string) []row {
	if s.parse != nil {
		return s.parse(stdout + "\n" + stderr)
	}
	return parseRows(stdout)
}

// runLimited runs argv in its own process group, killed as a whole when
// limit passes or ctx ends, and returns its wall time.
func runLimited(ctx context.Context, limit time.Duration, argv []string, stdout, stderr io.Writer) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	t0 := time.Now()
	err := cmd.Run()
	wall := time.Since(t0)
	// Whatever the leader left behind in its group goes too.
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	switch {
	case err == nil:
		return wall, nil
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return wall, fmt.Errorf("timed out (%v)", limit)
	case ctx.Err() != nil:
		return wall, errors.New("interrupted")
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return wall, fmt.Errorf("failed (%v)", ws.Signal())
		}
		return wall, fmt.Errorf("failed (exit %d)", ee.ExitCode())
	}
	return wall, fmt.Errorf("failed (%v)", err)
}

// parseRows picks the CSV rows bench,device,np,size,value,unit out of a
// program's output, skipping headers and anything else.
func parseRows(out string) []row {
	var rows []row
	for _, line := range strings.Split(out, "\n") {
		f := strings.Split(strings.TrimSpace(line), ",")
		if len(f) != 6 || f[0] == "bench" {
			continue
		}
		np, err1 := strconv.Atoi(f[2])
		size, err2 := strconv.Atoi(f[3])
		v, err3 := strconv.ParseFloat(f[4], 64)
		if err1 != nil || err2 != nil || err3 != nil {
			continue
		}
		rows = append(rows, row{f[0], f[1], np, size, v, f[5]})
	}
	return rows
}

// lastLine is the last non-empty line of s, shortened.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	l := strings.TrimSpace(lines[len(lines)-1])
	if len(l) > 160 {
		l = l[:160] + "…"
	}
	return l
}
