package main

import (
	"fmt"
	"image/png"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// compareCSV is a fixed results file with every benchmark of compare, two
// adimpi devices (one of them missing some rows, as after a failed run) and
// the two C libraries.
const compareCSV = csvHeader + `
pingpong,netvm,2,0,0.5,us
pingpong,netvm,2,8,0.6,us
pingpong,netvm,2,1048576,80,us
pingpong,via,2,0,0.9,us
pingpong,via,2,8,0.4,us
pingpong,mpich,2,0,0.3,us
pingpong,mpich,2,8,0.35,us
pingpong,mpich,2,1048576,120,us
bw,netvm,2,1,2.5,MB/s
bw,netvm,2,1048576,12000,MB/s
bw,openmpi,2,1,9,MB/s
bw,openmpi,2,1048576,3000,MB/s
anysource_any,netvm,2,8,0.4,us
anysource_specific,netvm,2,8,0.32,us
anysource_ratio,netvm,2,8,1.25,x
anysource_any,netvm,4,8,0.8,us
anysource_specific,netvm,4,8,1,us
anysource_ratio,netvm,4,8,0.8,x
anysource_any,mpich,4,8,2,us
coll_barrier,netvm,2,0,0.4,us
coll_barrier,netvm,4,0,3,us
coll_barrier,mpich,2,0,0.7,us
coll_allreduce,netvm,2,8,0.9,us
coll_allreduce,netvm,2,8388608,8000,us
coll_alltoall,netvm,2,65536,30,us
overlap_plain,netvm,2,0,0,x
overlap_plain,netvm,2,1024,0.25,x
overlap_iprobe,netvm,2,1024,0.75,x
overlap_tcomm,netvm,2,1024,2,us
overlap_async,netvm+async,2,1024,1,x
overlap_plain,mpich,2,1024,0.5,x
example_jacobi,netvm,4,0,0.031,s
example_jacobi,via,4,0,0.05,s
example_ring,netvm,4,0,0.012,s
example_ring,netvm,2,0,0.01,s
`

func TestCompareReport(t *testing.T) {
	dir := t.TempDir()
	csvPath := filepath.Join(dir, "results.csv")
	if err := os.WriteFile(csvPath, []byte(compareCSV), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := readResults(csvPath)
	if err != nil {
		t.Fatal(err)
	}
	m := compareMeta{
		when: "2026-01-02 03:04 UTC", goVer: "go1.26", cpus: 2, exReps: 3, compute: 500, elapsed: 90 * time.Second,
		order:   []string{"netvm", "via", "mpich", "openmpi"},
		targets: [][2]string{{"netvm", "adimpi device"}, {"via", "adimpi device"}, {"mpich", "MPICH 4"}, {"openmpi", "Open MPI 4"}},
		notes:   []string{"openmpi skipped: a note"},
	}
	runs := []cmpRun{
		{label: "netvm-pingpong-np2", target: "netvm", bench: "pingpong", what: "pingpong np2", np: 2, ok: true, status: "ok", secs: 1.5, rows: 3},
		{label: "via-bw-np2", target: "via", bench: "bw", what: "bw np2", np: 2, status: "timed out (1m0s)", secs: 60, errLine: "rank 1 | stuck"},
	}
	if err := writeCompareReport(dir, res, m, runs); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	report := string(b)
	for _, want := range []string{
		// Summary: geometric means of the ratios to netvm.
		"| target | latency ≤ 1 KiB | latency ≥ 64 KiB | bandwidth ≥ 64 KiB | ANY_SOURCE | collectives | examples |",
		"| netvm | 1× (reference) | 1× (reference) | 1× (reference) | 1× (reference) | 1× (reference) | 1× (reference) |",
		"| via | 1.10× | — | — | — | — | 1.61× |",
		"| mpich | 0.59× | 1.50× | — | 2.50× | 1.75× | — |",
		"| openmpi | — | — | 0.25× | — | — | — |",
		// Latency: sizes as rows, targets with pingpong rows as columns, the best in bold, missing as —.
		"| size | netvm | via | mpich |",
		"| 0 B | 0.5000 | 0.9000 | **0.3000** |",
		"| 8 B | 0.6000 | 0.4000 | **0.3500** |",
		"| 1 MiB | **80.000** | — | 120.000 |",
		// Bandwidth: higher is better.
		"| size | netvm | openmpi |",
		"| 1 B | 2.500 | **9.000** |",
		"| 1 MiB | **12000.0** | 3000.0 |",
		// ANY_SOURCE: by senders (np−1), with the ratio to specific-source receives.
		"| senders | netvm | mpich |",
		"| 1 | 0.4000 (1.25×) | — |",
		"| 3 | **0.8000** (0.80×) | 2.000 |",
		// Collectives: one row per collective and np.
		"| collective | np | netvm | mpich |",
		"| Barrier | 2 | **0.4000** | 0.7000 |",
		"| Barrier | 4 | 3.000 | — |",
		"| Allreduce 8 B | 2 | 0.9000 | — |",
		"| Allreduce 8 MiB | 2 | 8000.0 | — |",
		"| Alltoall 64 KiB/pair | 2 | 30.000 | — |",
		// Overlap: the async run sits next to its device; overlap_tcomm is not a column.
		"| size | netvm | netvm iprobe | netvm async | mpich |",
		"| 0 B | 0.00 | — | — | — |",
		"| 1 KiB | 0.25 | 0.75 | **1.00** | 0.50 |",
		// Examples: one row per example and np.
		"| example | np | netvm | via |",
		"| jacobi | 4 | **0.031** | 0.050 |",
		"| ring | 2 | 0.010 | — |",
		"| ring | 4 | 0.012 | — |",
		// The header, the notes and the runs.
		"| mpich | MPICH 4 |",
		"- openmpi skipped: a note",
		"**1 of 2 runs failed or timed out**",
		"| 1 | netvm | pingpong np2 | ok | 1.5 | 3 | `logs/netvm-pingpong-np2.{out,err}` |",
		"| 2 | via | bw np2 | **timed out (1m0s)**: rank 1 \\| stuck | 60.0 | 0 |",
	} {
		if !strings.Contains(report, want) {
			t.Errorf("report.md lacks %q", want)
		}
	}
	if strings.Contains(report, "netvm+async |") {
		t.Error("the async device got a column of its own")
	}
	for _, name := range []string{"latency.png", "bandwidth.png", "anysource.png", "coll-barrier-0.png",
		"coll-allreduce-8.png", "coll-allreduce-8M.png", "coll-alltoall-64K.png", "overlap.png", "examples.png"} {
		if !strings.Contains(report, "]("+name+")") {
			t.Errorf("report.md does not show %s", name)
		}
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			t.Error(err)
			continue
		}
		img, err := png.Decode(f)
		f.Close()
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if sz := img.Bounds().Size(); sz.X < 400 || sz.Y < 200 {
			t.Errorf("%s is %v, too small", name, sz)
		}
	}
}

// TestCompareReportEmpty: with no rows at all every section says so and no plot is drawn.
func TestCompareReportEmpty(t *testing.T) {
	dir := t.TempDir()
	if err := writeCompareReport(dir, results{}, compareMeta{order: []string{"netvm"}}, nil); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "_No results"); n != 7 {
		t.Errorf("%d sections say they have no results, want 7:\n%s", n, b)
	}
	if pngs, _ := filepath.Glob(filepath.Join(dir, "*.png")); len(pngs) != 0 {
		t.Errorf("plots drawn without data: %v", pngs)
	}
}

func TestParseRows(t *testing.T) {
	out := "bench,device,np,size,value,unit\npingpong,netvm,2,8,0.61,us\nsome log line, with, commas\n" +
		"bw,mpich,2,1024,1234.5,MB/s\r\nbad,netvm,x,8,1,us\n"
	rows := parseRows(out)
	want := []row{{"pingpong", "netvm", 2, 8, 0.61, "us"}, {"bw", "mpich", 2, 1024, 1234.5, "MB/s"}}
	if len(rows) != len(want) || rows[0] != want[0] || rows[1] != want[1] {
		t.Errorf("parseRows = %v, want %v", rows, want)
	}
}

// builtBench is this command built once for the tests that run it.
var builtBench struct {
	sync.Once
	dir, bin string
	err      error
	out      []byte
}

// buildBench builds this command into a temporary directory (once).
func buildBench(t *testing.T) string {
	t.Helper()
	b := &builtBench
	b.Do(func() {
		if b.dir, b.err = os.MkdirTemp("", "mpibench-test-"); b.err != nil {
			return
		}
		b.bin = filepath.Join(b.dir, "mpibench")
		b.out, b.err = exec.Command("go", "build", "-o", b.bin, ".").CombinedOutput()
	})
	if b.err != nil {
		t.Fatalf("go build: %v\n%s", b.err, b.out)
	}
	return b.bin
}

func TestMain(m *testing.M) {
	code := m.Run()
	if builtBench.dir != "" {
		os.RemoveAll(builtBench.dir)
	}
	os.Exit(code)
}

// TestCompareQuick runs compare --quick for real on netvm, restricted to
// the ANY_SOURCE benchmark and the examples at np 2, and reads its report.
func TestCompareQuick(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs mpirun jobs")
	}
	bin := buildBench(t)
	out := t.TempDir()
	cmd := exec.Command("timeout", "120", bin, "compare", "--quick", "--devices", "netvm", "--benches", "anysource,examples",
		"--nps", "2", "--example-reps", "1", "-o", out)
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("compare: %v\n%s", err, b)
	}
	for _, want := range []string{"[1/4] netvm      anysource np2", "[4/4] netvm      ring np2", "4 runs (0 failed)"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("progress output lacks %q:\n%s", want, b)
		}
	}
	res, err := readResults(filepath.Join(out, "results.csv"))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []key{{"anysource_any", "netvm", 2, 8}, {"anysource_specific", "netvm", 2, 8}, {"example_jacobi", "netvm", 2, 0},
		{"example_masterworker", "netvm", 2, 0}, {"example_ring", "netvm", 2, 0}} {
		if v, ok := res[k]; !ok || v <= 0 {
			t.Errorf("results.csv: %v = %v, %v; want a positive value", k, v, ok)
		}
	}
	report, err := os.ReadFile(filepath.Join(out, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| senders | netvm |", "| example | np | netvm |", "](anysource.png)", "](examples.png)"} {
		if !strings.Contains(string(report), want) {
			t.Errorf("report.md lacks %q", want)
		}
	}
	if _, err := png.Decode(mustOpen(t, filepath.Join(out, "anysource.png"))); err != nil {
		t.Errorf("anysource.png: %v", err)
	}
}

// TestCompareFailures: a launcher that fails, and one that hangs past the
// time limit, are recorded in the report and the runs go on.
func TestCompareFailures(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the command")
	}
	bin := buildBench(t)
	dir := t.TempDir()
	hang := filepath.Join(dir, "hang.sh")
	if err := os.WriteFile(hang, []byte("#!/bin/sh\necho 'about to hang' >&2\nsleep 300\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for i, c := range []struct {
		mpirun string
		quick  bool
		status []string // of the three runs: pingpong, coll np2, coll np3
	}{
		{"/bin/false", false, []string{"failed (exit 1)", "failed (exit 1)", "failed (exit 1)"}},
		{hang, false, []string{"timed out (1s)", "timed out (1s)", "timed out (1s)"}},
		// A quick run gives a target up after two timeouts.
		{hang, true, []string{"timed out (1s)", "timed out (1s)", "skipped"}},
	} {
		out := filepath.Join(dir, "out"+strconv.Itoa(i))
		t0 := time.Now()
		args := []string{"60", bin, "compare", "--devices", "netvm", "--benches", "pingpong,coll",
			"--nps", "2,3", "--timeout", "1s", "--mpirun", c.mpirun, "-o", out}
		if c.quick {
			args = append(args, "--quick")
		}
		b, err := exec.Command("timeout", args...).CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
			t.Errorf("case %d: %v, want exit status 1:\n%s", i, err, b)
		}
		if d := time.Since(t0); d > 30*time.Second {
			t.Errorf("case %d: took %v", i, d)
		}
		report, err := os.ReadFile(filepath.Join(out, "report.md"))
		if err != nil {
			t.Fatal(err)
		}
		if want := "**3 of 3 runs failed or timed out**"; !strings.Contains(string(report), want) {
			t.Errorf("case %d: report.md lacks %q:\n%s", i, want, report)
		}
		for j, what := range []string{"pingpong np2", "coll np2", "coll np3"} {
			progress := fmt.Sprintf("netvm      %-28s %s after", what, strings.ToUpper(c.status[j][:1])+c.status[j][1:])
			if !strings.Contains(string(b), progress) {
				t.Errorf("case %d: progress output lacks %q:\n%s", i, progress, b)
			}
			if row := fmt.Sprintf("| %d | netvm | %s | **%s**", j+1, what, c.status[j]); !strings.Contains(string(report), row) {
				t.Errorf("case %d: report.md lacks %q", i, row)
			}
		}
	}
}

func mustOpen(t *testing.T, path string) *os.File {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func TestParseCompareArgs(t *testing.T) {
	o, err := parseCompareArgs(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.out != filepath.Join("bench-out", "compare") || !slices.Equal(o.nps, []int{2, 4, 8, 16}) || o.limit != 180*time.Second ||
		!slices.Equal(o.benches, compareBenches) || o.exReps != 5 || len(o.devices) != 0 {
		t.Errorf("defaults: %+v", o)
	}
	o, err = parseCompareArgs([]string{"--quick", "-o", "x", "--devices", "netvm,mpich", "--benches", "bw"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.out != "x" || !slices.Equal(o.nps, []int{2, 4}) || o.limit != 60*time.Second || !slices.Equal(o.benches, []string{"bw"}) ||
		o.exReps != 3 || !slices.Equal(o.devices, []string{"netvm", "mpich"}) {
		t.Errorf("--quick: %+v", o)
	}
	for _, bad := range [][]string{{"--devices", "nosuch"}, {"--benches", "pingpong,nosuch"}, {"--nps", "1"}, {"extra"}} {
		if _, err := parseCompareArgs(bad, io.Discard); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
}

func TestDecadeTicks(t *testing.T) {
	var labels []string
	for _, tk := range (decadeTicks{}).Ticks(0.01, 1e6) {
		if tk.Label != "" {
			labels = append(labels, tk.Label)
		}
	}
	if want := []string{"0.01", "0.1", "1", "10", "100", "1000", "10000", "100000", "1e6"}; !slices.Equal(labels, want) {
		t.Errorf("labels %v, want %v", labels, want)
	}
	if n := len((decadeTicks{}).Ticks(1, 10)); n != 10 {
		t.Errorf("1..10: %d ticks, want 10 (1, 2..9, 10)", n)
	}
}
