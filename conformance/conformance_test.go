package conformance

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	goruntime "runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/adimpi/adimpi/adi"
	_ "github.com/adimpi/adimpi/devices" // registers every device, for adi.Devices
	"github.com/adimpi/adimpi/internal/testnote"
	"github.com/adimpi/adimpi/internal/testproc"
)

// mpirunTimeout is what mpirun's own -timeout gets for every job; the test
// kills a job that outlives it by killGrace.
const (
	mpirunTimeout = 120 * time.Second
	killGrace     = 30 * time.Second
	// exitEarlyLimit is how long mpirun may take to notice and report a rank
	// that died.
	exitEarlyLimit = 10 * time.Second
	// parallelJobs is how many MPI jobs run at once: the machine has two
	// cores and 16 ranks already oversubscribe it.
	parallelJobs = 2
)

// program is one conformance program: a main package under conformance/
// whose checks are named on its command line.
type program struct {
	name   string   // p2p, datatypes, stress, p2p-race: names the program in results
	pkg    string   // the directory under conformance/ (default: name)
	race   bool     // built with the race detector
	short  bool     // takes -short (smaller sizes), passed when go test runs with -short
	bin    string   // built by TestMain
	checks []string // printed by <program> -list
}

func (p *program) dir() string {
	if p.pkg != "" {
		return p.pkg
	}
	return p.name
}

var (
	p2p         = &program{name: "p2p"}
	datatypes   = &program{name: "datatypes"}
	stress      = &program{name: "stress"}
	p2pRace     = &program{name: "p2p-race", pkg: "p2p", race: true}
	collectives = &program{name: "collectives", short: true}
	intercoll   = &program{name: "intercoll", short: true}
	rmaProg     = &program{name: "rma"}
	programs    = []*program{p2p, datatypes, stress, collectives, intercoll, p2pRace, rmaProg}
)

var (
	mpirunBin string
	jobs      = make(chan struct{}, parallelJobs)
	runSeq    atomic.Int64

	resultsMu sync.Mutex
	results   []result
)

// result is the outcome of one subtest, for the summary table.
type result struct {
	prog    string // a program's name
	device  string
	config  string // device/np=N or device/option.../np=N
	check   string
	outcome string // PASS, FAIL, UNSUPPORTED
	elapsed time.Duration
}

// TestMain builds cmd/mpirun and every conformance program into a temporary
// directory, lists the programs' checks, runs the tests, and (with -v or on
// failure) prints a table of every run's outcome.
func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "adimpi-conformance-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "conformance:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	mpirunBin = filepath.Join(dir, "mpirun")
	// One go build for all of them: the packages share most of their build.
	args := []string{"build", "-o", dir + string(filepath.Separator), "github.com/adimpi/adimpi/cmd/mpirun"}
	var builds [][]string
	for _, p := range programs {
		p.bin = filepath.Join(dir, p.name)
		pkg := "github.com/adimpi/adimpi/conformance/" + p.dir()
		if p.race {
			builds = append(builds, []string{"build", "-race", "-o", p.bin, pkg})
			continue
		}
		args = append(args, pkg)
	}
	for _, args := range append([][]string{args}, builds...) {
		if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "conformance: go %s: %v\n%s", strings.Join(args, " "), err, out)
			return 1
		}
	}
	for _, p := range programs {
		out, err := exec.Command(p.bin, "-list").Output()
		if err != nil {
			fmt.Fprintf(os.Stderr, "conformance: %s -list: %v\n", p.name, err)
			return 1
		}
		p.checks = strings.Fields(string(out))
		if len(p.checks) == 0 {
			fmt.Fprintf(os.Stderr, "conformance: %s -list printed no checks\n", p.name)
			return 1
		}
	}
	start := time.Now()
	code := m.Run()
	testnote.Printf("conformance: %d jobs done (%d failed) in %v", progress.done, progress.fails, time.Since(start).Round(time.Second))
	if testing.Verbose() || code != 0 {
		printSummary(time.Since(start))
	}
	return code
}

// optionChecks are the p2p checks run again with netvm's device options and
// with the asynchronous progress thread, at np=4.
var optionChecks = []string{
	"order", "anysource", "anytag", "truncate", "zero", "self", "ssend", "bsend", "rsend",
	"probe", "cancel", "persistent", "waitany", "alltoall", "many-pending", "anysource-race",
}

// netvmOptions are the netvm device options whose runs use optionChecks.
var netvmOptions = []string{"eager=0", "cma=off"}

// scatterOpt turns on netvm's per-block remote writes into non-contiguous
// receive buffers (off by default), for the datatype checks.
const scatterOpt = "scatter=1024"

// asyncOpt, in a run's options, stands for mpirun -async-progress; every
// other option is passed as -device-opt.
const asyncOpt = "async"

// nativeOffOpt, in a run's options, sets ADIMPI_NATIVE_COLL=off in the
// job's environment: the core's message algorithms instead of the device's
// collectives.
const nativeOffOpt = "ADIMPI_NATIVE_COLL=off"

// deviceBoardOpt, in a run's options, sets ADIMPI_DEVICE_BOARD=on in the
// job's environment: MPI_COMM_WORLD's board collectives on netvm's own board
// instead of a board the core builds.
const deviceBoardOpt = "ADIMPI_DEVICE_BOARD=on"

// allNPs is the process counts at which every check runs (shortNPs with
// -short).
var (
	allNPs   = []int{1, 2, 3, 4, 8, 16}
	shortNPs = []int{2, 4}
)

func testNPs() []int {
	if testing.Short() {
		return shortNPs
	}
	return allNPs
}

// matrix runs checks of prog under device dev with the options opts (one
// subtest level per option) at each process count of nps, the biggest
// first so that the slowest jobs do not trail at the end. Subtests are
// named [option/...]np=N/check. want, if not nil, picks the checks run at
// each count.
func matrix(t *testing.T, prog *program, dev string, opts []string, nps []int, checks []string, want func(check string, np int) bool) {
	t.Helper()
	matrixFrom(t, prog, dev, opts, 0, nps, checks, want)
}

// matrixFrom is matrix inside the subtests of opts[:n].
func matrixFrom(t *testing.T, prog *program, dev string, opts []string, n int, nps []int, checks []string, want func(check string, np int) bool) {
	if n < len(opts) {
		t.Run(opts[n], func(t *testing.T) {
			t.Parallel()
			matrixFrom(t, prog, dev, opts, n+1, nps, checks, want)
		})
		return
	}
	for i := len(nps) - 1; i >= 0; i-- {
		np := nps[i]
		t.Run(fmt.Sprintf("np=%d", np), func(t *testing.T) {
			t.Parallel()
			for _, check := range checks {
				if want != nil && !want(check, np) {
					continue
				}
				t.Run(check, func(t *testing.T) {
					t.Parallel()
					runCheck(t, prog, dev, opts, np, check)
				})
			}
		})
	}
}

// eachDevice runs f for every registered device, in parallel subtests
// named after the devices.
func eachDevice(t *testing.T, f func(t *testing.T, dev string)) {
	devices := adi.Devices()
	if len(devices) == 0 {
		t.Fatal("no device is registered")
	}
	for _, dev := range devices {
		t.Run(dev, func(t *testing.T) {
			t.Parallel()
			f(t, dev)
		})
	}
}

// TestP2P runs every p2p check through mpirun under every registered device
// at np = 1, 2, 3, 4, 8 and 16 (2 and 4 with -short); and a subset
// (optionChecks) at np = 4 with netvm's options eager=0 and cma=off and with
// mpirun -async-progress (netvm/async/np=4/check). At most parallelJobs jobs
// run at once, across all the tests.
func TestP2P(t *testing.T) {
	eachDevice(t, func(t *testing.T, dev string) {
		matrix(t, p2p, dev, nil, testNPs(), p2p.checks, nil)
		if dev != "netvm" {
			return
		}
		for _, opt := range slices.Concat(netvmOptions, []string{asyncOpt}) {
			matrix(t, p2p, dev, []string{opt}, []int{4}, optionChecks, nil)
		}
	})
}

// TestRace runs the p2p checks of optionChecks at np = 4 under every
// registered device, with the asynchronous progress goroutine and without
// it, in a build of the p2p program with Go's race detector: the progress
// goroutine and the application's goroutines share the device (and the
// blocking calls' spare request and lock-held polls), and a data race
// between them fails the run.
func TestRace(t *testing.T) {
	eachDevice(t, func(t *testing.T, dev string) {
		matrix(t, p2pRace, dev, []string{asyncOpt}, []int{4}, optionChecks, nil)
		matrix(t, p2pRace, dev, nil, []int{4}, optionChecks, nil)
	})
}

// TestCollectives runs every check of conformance/collectives (groups,
// communicators, topologies, every intracommunicator collective blocking
// and non-blocking) under every registered device at np = 1, 2, 3, 4, 8 and
// 16 (2 and 4 with -short, and smaller sizes), at np = 4 with the
// asynchronous progress goroutine, and on netvm at np = 4 with
// MPI_COMM_WORLD on the device's own board (ADIMPI_DEVICE_BOARD=on).
func TestCollectives(t *testing.T) {
	eachDevice(t, func(t *testing.T, dev string) {
		matrix(t, collectives, dev, nil, testNPs(), collectives.checks, nil)
		matrix(t, collectives, dev, []string{asyncOpt}, []int{4}, collectives.checks, nil)
		if dev == "netvm" {
			// netvm's own board, which MPI_COMM_WORLD takes only on request.
			matrix(t, collectives, dev, []string{deviceBoardOpt}, []int{4}, collectives.checks, nil)
		}
	})
}

// TestCollMismatch runs the collectives check mismatch (collectives whose
// counts differ between ranks must fail with ErrTruncate or ErrCount, never
// hang nor return wrong data, and leave the communicator usable: Bcast on
// every path, the board collectives on MPI_COMM_WORLD, and every message
// collective on a duplicate) under every registered device at np = 2, 3
// and 8, with the device's native collectives and without them
// (ADIMPI_NATIVE_COLL=off: the core's message algorithms everywhere).
func TestCollMismatch(t *testing.T) {
	eachDevice(t, func(t *testing.T, dev string) {
		matrix(t, collectives, dev, nil, []int{2, 3, 8}, []string{"mismatch"}, nil)
		matrix(t, collectives, dev, []string{nativeOffOpt}, []int{2, 3, 8}, []string{"mismatch"}, nil)
	})
}

// pretendEnv is the core's test-only knob that places ranks on pretend
// hosts (mpi/hosts.go): a run option "ADIMPI_PRETEND_HOSTS=spec" goes into
// the job's environment.
const pretendEnv = "ADIMPI_PRETEND_HOSTS"

// hierPlacements are the pretend placements TestCollectivesHier runs at
// each process count, on three hosts: block (hosts contiguous:
// non-commutative reductions go in tiers), round-robin (hosts interleaved:
// they go flat; at np = 3 one rank per host, where every collective is
// flat and keeps off the native paths) and uneven (a host of one rank, and
// at np = 12 a host whose ranks are not contiguous).
var hierPlacements = map[int][]string{
	3:  {"map:0,0,1", "rr:3"},
	6:  {"rr:3", "map:0,0,0,0,1,2"},
	12: {"block:3", "map:0,0,0,0,0,0,0,1,1,1,2,0"},
}

// hierChecks are the collectives checks TestCollectivesHier runs: those of
// the tiered collectives (Barrier, Bcast, Reduce, Allreduce, Gather,
// Scatter, Allgather, any root, in place, non-commutative, non-blocking, mismatched
// Bcast counts), of SplitType, whose communicators follow the pretend
// hosts, and subcomms: the communicators made there that lie on one pretend
// host (SplitType's, and the Split halves or Create's odd ranks where the
// placement keeps them on one) run on a board of their own, the others in
// tiers.
var hierChecks = []string{"comms", "barrier", "bcast", "gather", "scatter", "allgather", "reduce", "allreduce", "noncommutative", "inplace", "nbc", "split", "mismatch", "subcomms"}

// TestCollectivesHier runs the collective checks of hierChecks, and every
// check of conformance/intercoll (intercommunicator and persistent
// collectives), under every registered device with the ranks placed on
// pretend hosts (ADIMPI_PRETEND_HOSTS, hierPlacements): the core's
// collectives then run in tiers across hosts and keep off the device's
// board and multidestination sends, while the device itself still runs on
// one host. intercoll runs at np = 6, round-robin.
func TestCollectivesHier(t *testing.T) {
	eachDevice(t, func(t *testing.T, dev string) {
		for _, np := range []int{12, 6, 3} {
			for _, place := range hierPlacements[np] {
				matrix(t, collectives, dev, []string{pretendEnv + "=" + place}, []int{np}, hierChecks, nil)
			}
		}
		matrix(t, intercoll, dev, []string{pretendEnv + "=" + hierPlacements[6][0]}, []int{6}, intercoll.checks, nil)
	})
}

// TestMixedAffinity runs the large collectives on netvm's boards with the
// odd ranks pinned to one CPU (taskset) and the even ones free, so the
// ranks see different runtime.NumCPU: whether ranks outnumber cores picks
// a collective's algorithm, and every rank must pick the same one (a Bcast
// once gave wrong data this way). It needs a machine of two CPUs or more.
func TestMixedAffinity(t *testing.T) {
	if goruntime.NumCPU() < 2 {
		t.Fatalf("this test needs at least 2 CPUs to give ranks different CPU counts; the machine has %d", goruntime.NumCPU())
	}
	taskset, err := exec.LookPath("taskset")
	if err != nil {
		t.Fatalf("taskset (util-linux) is needed to pin ranks: %v", err)
	}
	wrapper := filepath.Join(t.TempDir(), "pin-odd-ranks")
	script := "#!/bin/sh\nif [ $((PMI_RANK % 2)) -eq 1 ]; then exec " + taskset + " -c 0 \"$@\"; fi\nexec \"$@\"\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, np := range []int{2, 3} {
		for _, check := range []string{"bcast", "alltoall", "allreduce", "inplace"} {
			t.Run(fmt.Sprintf("np=%d/%s", np, check), func(t *testing.T) {
				t.Parallel()
				jobs <- struct{}{}
				r := runJob(wrapper, "netvm", nil, np, []string{collectives.bin, check})
				<-jobs
				noteProgress(r, judge(t, r, np, check))
			})
		}
	}
}

// TestInterColl runs every check of conformance/intercoll (collectives on
// intercommunicators, Idup, persistent collectives) under every registered
// device at np = 2, 3, 4 and 8 (2 and 4 with -short), and at np = 4 with the
// asynchronous progress goroutine.
func TestInterColl(t *testing.T) {
	nps := []int{2, 3, 4, 8}
	if testing.Short() {
		nps = shortNPs
	}
	eachDevice(t, func(t *testing.T, dev string) {
		matrix(t, intercoll, dev, nil, nps, intercoll.checks, nil)
		matrix(t, intercoll, dev, []string{asyncOpt}, []int{4}, intercoll.checks, nil)
	})
}

// TestDatatypes runs every check of conformance/datatypes (derived datatypes
// over point-to-point) through mpirun under every registered device at np =
// 1, 2, 3, 4, 8 and 16 (2 and 4 with -short), and with netvm's options
// eager=0, cma=off and scatter=1024 at np = 4.
func TestDatatypes(t *testing.T) {
	eachDevice(t, func(t *testing.T, dev string) {
		matrix(t, datatypes, dev, nil, testNPs(), datatypes.checks, nil)
		if dev != "netvm" {
			return
		}
		for _, opt := range slices.Concat(netvmOptions, []string{scatterOpt}) {
			matrix(t, datatypes, dev, []string{opt}, []int{4}, datatypes.checks, nil)
		}
	})
}

// stressNPs is where each stress check runs (stressShortNPs with -short;
// a check missing there is left out). flood is about many peers at once,
// thresholds about pairs and rings of ranks (odd counts leave a rank to talk
// to itself), longrun sends 10⁵ messages whatever the count, and
// progress-rule runs in pairs.
var (
	stressNPs = map[string][]int{
		"flood":         {2, 16},
		"thresholds":    {1, 2, 3, 4},
		"longrun":       {4, 16},
		"progress-rule": {1, 2, 3, 16},
	}
	stressShortNPs = map[string][]int{
		"flood":         {16},
		"thresholds":    {2},
		"progress-rule": {2},
	}
)

// tinyRing are netvm options under which the thresholds check runs again:
// an eager limit of 1 KiB in 4 KiB rings, so that every ring wraps many
// times (with single-copy writes, and with every byte through the ring),
// and a split copy of every rendezvous message from 1 byte on.
var tinyRing = [][]string{
	{"eager=1024", "ring=4096"},
	{"eager=1024", "ring=4096", "cma=off"},
	{"split=1"},
}

// TestStress runs the checks of conformance/stress under every registered
// device at the counts of stressNPs, and under netvm's options eager=0 and
// cma=off and with mpirun -async-progress at the same counts; thresholds
// runs again with tiny rings (tinyRing) at np = 2 and 3.
func TestStress(t *testing.T) {
	table := stressNPs
	if testing.Short() {
		table = stressShortNPs
	}
	var nps []int
	for _, c := range stress.checks {
		if _, ok := stressNPs[c]; !ok {
			t.Errorf("stress check %s has no entry in stressNPs", c)
		}
		for _, np := range table[c] {
			if !slices.Contains(nps, np) {
				nps = append(nps, np)
			}
		}
	}
	sort.Ints(nps)
	want := func(check string, np int) bool { return slices.Contains(table[check], np) }
	eachDevice(t, func(t *testing.T, dev string) {
		matrix(t, stress, dev, nil, nps, stress.checks, want)
		if dev != "netvm" {
			return
		}
		for _, opt := range slices.Concat(netvmOptions, []string{asyncOpt}) {
			matrix(t, stress, dev, []string{opt}, nps, stress.checks, want)
		}
		if testing.Short() {
			return
		}
		for _, opts := range tinyRing {
			matrix(t, stress, dev, opts, []int{2, 3}, []string{"thresholds"}, nil)
		}
	})
}

// runCheck runs check of prog under mpirun and judges the outcome.
func runCheck(t *testing.T, prog *program, dev string, opts []string, np int, check string) {
	config := dev
	for _, o := range opts {
		config += "/" + o
	}
	config += fmt.Sprintf("/np=%d", np)

	jobs <- struct{}{}
	var args []string
	if prog.short && testing.Short() {
		args = append(args, "-short")
	}
	r := runJob(prog.bin, dev, opts, np, append(args, check))
	<-jobs

	outcome := judge(t, r, np, check)
	noteProgress(r, outcome)
	resultsMu.Lock()
	results = append(results, result{prog: prog.name, device: dev, config: config, check: check, outcome: outcome, elapsed: r.elapsed})
	resultsMu.Unlock()
}

// progressEvery is how often, at most, the suite prints a progress line.
const progressEvery = 10 * time.Second

// progress counts finished jobs for the progress lines.
var progress struct {
	sync.Mutex
	start       time.Time
	last        time.Time
	done, fails int
}

// noteProgress counts a finished job and prints, where "go test ./..."
// shows it while the suite runs (internal/testnote: the go command holds a
// passing package's own output back until the package ends, and then drops
// it), a line for every failing job and a progress line every
// progressEvery.
func noteProgress(j *job, outcome string) {
	progress.Lock()
	defer progress.Unlock()
	now := time.Now()
	if progress.start.IsZero() {
		progress.start, progress.last = now, now
	}
	progress.done++
	if outcome == "FAIL" {
		progress.fails++
		testnote.Printf("conformance: FAIL after %.1fs: %s", j.elapsed.Seconds(), j.command())
	}
	if now.Sub(progress.last) >= progressEvery {
		progress.last = now
		testnote.Printf("conformance: %d jobs done (%d failed) in %v; last: %s (%s, %.1fs)",
			progress.done, progress.fails, now.Sub(progress.start).Round(time.Second), j.command(), outcome, j.elapsed.Seconds())
	}
}

// job is what one mpirun run left behind.
type job struct {
	args           []string
	stdout, stderr string
	err            error // from exec: nil, *exec.ExitError, or a start failure
	elapsed        time.Duration
	leftover       []int // pids of the job's processes still running after mpirun exited
	killed         bool  // the test had to kill mpirun
}

// command is the job's command line as it can be typed at the module root.
func (j *job) command() string {
	args := []string{"go", "run", "./cmd/mpirun"}
	for _, a := range j.args[1:] {
		for _, p := range programs {
			if a == p.bin {
				a = "./conformance/" + p.dir()
			}
		}
		args = append(args, a)
	}
	return strings.Join(args, " ")
}

// runJob runs one job of bin under mpirun. mpirunArgs, when given, go to
// mpirun before the program (the cross-host runs' launcher and placement).
func runJob(bin, dev string, opts []string, np int, progArgs []string, mpirunArgs ...string) *job {
	// On a hang, the failure shows where each rank waits and its stacks.
	args := []string{"-np", strconv.Itoa(np), "-device", dev, "-timeout", mpirunTimeout.String(), "-timeout-stacks"}
	args = append(args, mpirunArgs...)
	var env []string
	for _, o := range opts {
		switch o {
		case asyncOpt:
			args = append(args, "-async-progress")
		case nativeOffOpt, deviceBoardOpt:
			env = append(env, o)
		default:
			if strings.HasPrefix(o, pretendEnv+"=") {
				env = append(env, o)
				continue
			}
			args = append(args, "-device-opt", o)
		}
	}
	args = append(append(args, bin), progArgs...)
	j := &job{args: append([]string{mpirunBin}, args...)}

	ctx, cancel := context.WithTimeout(context.Background(), mpirunTimeout+killGrace)
	defer cancel()
	cmd := exec.CommandContext(ctx, mpirunBin, args...)
	// A marker in the environment finds the job's ranks afterwards, whatever
	// process groups mpirun puts them in.
	marker := fmt.Sprintf("ADIMPI_CONFORMANCE_JOB=%d-%d", os.Getpid(), runSeq.Add(1))
	cmd.Env = append(append(cleanEnv(), env...), marker)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	j.err = cmd.Run()
	j.elapsed = time.Since(start)
	j.killed = ctx.Err() != nil
	j.stdout, j.stderr = stdout.String(), stderr.String()

	// mpirun must not leave ranks behind. Give exiting processes a moment to
	// disappear, then kill (by pid) whatever of this job is still there.
	deadline := time.Now().Add(3 * time.Second)
	for {
		j.leftover = processesWith(marker)
		if len(j.leftover) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, pid := range j.leftover {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	return j
}

// cleanEnv is the test's environment without MPI or PMI settings that could
// change the job.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "ADIMPI_") || strings.HasPrefix(kv, "PMI_") {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// processesWith lists the live (not zombie) processes whose environment holds kv.
func processesWith(kv string) []int {
	var pids []int
	for _, p := range testproc.Find(func(p testproc.Proc) bool { return p.HasEnv(kv) && p.Live() }) {
		pids = append(pids, p.PID)
	}
	return pids
}

// judge decides a subtest's outcome and reports it.
func judge(t *testing.T, j *job, np int, check string) string {
	t.Helper()
	fail := func(format string, args ...any) string {
		t.Errorf("%s\nreproduce (at the module root): %s\nexit: %v, %.2fs\nstdout:\n%s\nstderr:\n%s",
			fmt.Sprintf(format, args...), j.command(), j.err, j.elapsed.Seconds(), indent(j.stdout), indent(j.stderr))
		return "FAIL"
	}
	if len(j.leftover) > 0 {
		return fail("mpirun exited but left %d processes of the job running (pids %v; killed now)", len(j.leftover), j.leftover)
	}
	if j.killed {
		return fail("mpirun did not end within %v although it was given -timeout %v", mpirunTimeout+killGrace, mpirunTimeout)
	}
	var exitErr *exec.ExitError
	if j.err != nil && !errors.As(j.err, &exitErr) {
		return fail("could not run mpirun: %v", j.err)
	}

	if check == "exit-early" {
		// The last rank exits with status 3 right after MPI_Init: mpirun must
		// fail, soon, and say which rank it was.
		if j.err == nil {
			return fail("mpirun exited 0 although rank %d exited with status 3", np-1)
		}
		if j.elapsed > exitEarlyLimit {
			return fail("mpirun took %.1fs to stop the job after rank %d died (limit %v)", j.elapsed.Seconds(), np-1, exitEarlyLimit)
		}
		if !regexp.MustCompile(fmt.Sprintf(`(?i)\brank[ :=#]*%d\b`, np-1)).MatchString(j.stderr) {
			return fail("mpirun's standard error does not name the failed rank %d", np-1)
		}
		if hasLine(j.stdout, "PASS "+check) {
			return fail("exit-early printed PASS")
		}
		t.Logf("mpirun exited with %v after %.2fs and named rank %d", j.err, j.elapsed.Seconds(), np-1)
		return "PASS"
	}

	if j.err != nil {
		if strings.Contains(j.stderr, "timed out") {
			return fail("the job hung: mpirun's -timeout %v fired", mpirunTimeout)
		}
		return fail("mpirun failed")
	}
	if strings.Contains(j.stdout, "FAIL") || strings.Contains(j.stderr, "FAIL "+check) {
		return fail("a rank reported FAIL although mpirun exited 0")
	}
	if hasLine(j.stdout, "PASS "+check) {
		t.Logf("PASS in %.2fs", j.elapsed.Seconds())
		return "PASS"
	}
	if line, ok := findLine(j.stdout, "UNSUPPORTED "+check); ok {
		switch {
		case np == 1 && strings.Contains(line, "needs 2 ranks"):
			t.Logf("counted as UNSUPPORTED (one rank): %s", line)
			return "UNSUPPORTED"
		case strings.Contains(line, "MPI_ERR_UNSUPPORTED_OPERATION"):
			// The device refuses an operation the check needs; the check did
			// not pass, and the table shows it.
			t.Logf("counted as UNSUPPORTED (the device refused an operation): %s", line)
			return "UNSUPPORTED"
		}
		return fail("unexpected UNSUPPORTED at np=%d: %s", np, line)
	}
	return fail("mpirun exited 0 but rank 0 did not print %q", "PASS "+check)
}

// hasLine reports whether some line of out ends with want (mpirun may prefix
// lines with a rank tag).
func hasLine(out, want string) bool {
	_, ok := findLine(out, want)
	return ok
}

// findLine returns the first line of out that contains prefix and, after
// prefix, has nothing or a colon (so "PASS anysource" does not match "PASS
// anysource-race").
func findLine(out, prefix string) (string, bool) {
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		i := strings.Index(line, prefix)
		if i < 0 {
			continue
		}
		if rest := line[i+len(prefix):]; rest == "" || strings.HasPrefix(rest, ":") {
			return line, true
		}
	}
	return "", false
}

func indent(s string) string {
	if s == "" {
		return "\t(empty)"
	}
	const max = 4000
	if len(s) > max {
		s = s[:max] + "\n... (cut)"
	}
	return "\t" + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n\t")
}

// printSummary prints a table per program that ran (one row per check, one
// column per configuration), then a table per device counting each
// program's runs by outcome.
func printSummary(total time.Duration) {
	resultsMu.Lock()
	defer resultsMu.Unlock()
	if len(results) == 0 {
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\nconformance summary (%d runs, %.1fs):\n", len(results), total.Seconds())
	for _, p := range programs {
		var rs []result
		for _, r := range results {
			if r.prog == p.name {
				rs = append(rs, r)
			}
		}
		if len(rs) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n%s:\n", p.name)
		summaryTable(&b, rs, p.checks)
	}
	b.WriteString("\n")
	countTable(&b, results)
	fmt.Print(b.String())
}

// countTable writes, per device, how many runs of each program passed,
// failed and were unsupported, and the totals.
func countTable(b *strings.Builder, rs []result) {
	type key struct{ dev, prog string }
	counts := map[key]map[string]int{}
	var devs []string
	for _, r := range rs {
		if !slices.Contains(devs, r.device) {
			devs = append(devs, r.device)
		}
		for _, k := range []key{{r.device, r.prog}, {r.device, ""}, {"", ""}} {
			if counts[k] == nil {
				counts[k] = map[string]int{}
			}
			counts[k][r.outcome]++
		}
	}
	sort.Strings(devs)
	row := func(dev, prog string, c map[string]int) {
		fmt.Fprintf(b, "%-10s %-10s %6d %6d %12d %6d\n", dev, prog, c["PASS"], c["FAIL"], c["UNSUPPORTED"], c["PASS"]+c["FAIL"]+c["UNSUPPORTED"])
	}
	fmt.Fprintf(b, "%-10s %-10s %6s %6s %12s %6s\n", "device", "program", "PASS", "FAIL", "UNSUPPORTED", "runs")
	for _, dev := range devs {
		for _, p := range programs {
			if c, ok := counts[key{dev, p.name}]; ok {
				row(dev, p.name, c)
			}
		}
		if len(programs) > 1 {
			row(dev, "(all)", counts[key{dev, ""}])
		}
	}
	if len(devs) > 1 {
		row("(all)", "(all)", counts[key{}])
	}
}

// summaryTable writes one program's table of results rs, a row per check.
func summaryTable(b *strings.Builder, rs []result, checks []string) {
	var configs []string
	seen := map[string]bool{}
	// With -count > 1 a cell shows the worst outcome and the longest time.
	rank := map[string]int{"PASS": 0, "UNSUPPORTED": 1, "FAIL": 2}
	cell := map[[2]string]result{}
	for _, r := range rs {
		if !seen[r.config] {
			seen[r.config] = true
			configs = append(configs, r.config)
		}
		k := [2]string{r.check, r.config}
		if c, ok := cell[k]; ok {
			if rank[c.outcome] > rank[r.outcome] {
				r.outcome = c.outcome
			}
			r.elapsed = max(r.elapsed, c.elapsed)
		}
		cell[k] = r
	}
	sort.Slice(configs, func(a, b int) bool { return configKey(configs[a]) < configKey(configs[b]) })
	width := make([]int, len(configs))
	for i, c := range configs {
		width[i] = max(len(c), len("UNSUPPORTED 00.00s"))
	}
	fmt.Fprintf(b, "%-15s", "check")
	for i, c := range configs {
		fmt.Fprintf(b, " %-*s", width[i], c)
	}
	b.WriteString("\n")
	for _, check := range checks {
		fmt.Fprintf(b, "%-15s", check)
		for i, c := range configs {
			r, ok := cell[[2]string{check, c}]
			if !ok {
				fmt.Fprintf(b, " %-*s", width[i], "-")
				continue
			}
			fmt.Fprintf(b, " %-*s", width[i], fmt.Sprintf("%s %.2fs", r.outcome, r.elapsed.Seconds()))
		}
		b.WriteString("\n")
	}
}

// configKey orders configurations: plain runs by np, then option runs.
func configKey(c string) string {
	parts := strings.Split(c, "/")
	np := 0
	if n, err := strconv.Atoi(strings.TrimPrefix(parts[len(parts)-1], "np=")); err == nil {
		np = n
	}
	return fmt.Sprintf("%s|%d|%s|%04d", parts[0], len(parts), strings.Join(parts[1:len(parts)-1], "/"), np)
}
