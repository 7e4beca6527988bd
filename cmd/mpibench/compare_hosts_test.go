package main

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/adimpi/adimpi/internal/testnote"
)

// compareHostsCSV is a fixed results file of a --hosts 4 run: netvm and
// the two C libraries across hosts, and one single-host row.
const compareHostsCSV = csvHeader + `
pingpong,netvm,2,8,0.5,us
x_pingpong,netvm@2h,2,8,20,us
x_pingpong,openmpi@2h,2,8,40,us
x_pingpong,mpich@2h,2,8,10,us
x_bw,netvm@2h,2,65536,1000,MB/s
x_bw,openmpi@2h,2,65536,500,MB/s
x_bw,netvm@2h,2,4194304,3000,MB/s
x_bw,openmpi@2h,2,4194304,2000,MB/s
x_bw,mpich@2h,2,4194304,1500,MB/s
x_coll_allreduce,netvm@4h,8,8,100,us
x_coll_allreduce,openmpi@4h,8,8,400,us
x_coll_allreduce,netvm@2h,8,8,50,us
x_coll_allreduce,netvm@4h,8,1048576,9000,us
x_coll_barrier,mpich@4h,4,0,70,us
`

// TestCompareReportHosts: the cross-host section gives the headline
// figures, netvm's ratios to each C library, and every point, apart from
// the single-host sections.
func TestCompareReportHosts(t *testing.T) {
	dir := t.TempDir()
	csvPath := filepath.Join(dir, "results.csv")
	if err := os.WriteFile(csvPath, []byte(compareHostsCSV), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := readResults(csvPath)
	if err != nil {
		t.Fatal(err)
	}
	m := compareMeta{hosts: 4, rounds: 3, order: []string{"netvm", "via", "mpich", "openmpi"}}
	if err := writeCompareReport(dir, res, m, nil); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	report := string(b)
	for _, want := range []string{
		"## Across simulated hosts",
		"median of 3 interleaved rounds",
		"| figure | netvm | mpich | openmpi |",
		"| 8 B latency (µs) | 20.000 | **10.000** | 40.000 |",
		"| 4 MiB bandwidth (MB/s) | **3000.0** | 1500.0 | 2000.0 |",
		"| Allreduce 8 B, np 8, 4 hosts (µs) | **100.000** | — | 400.000 |",
		"| Allreduce 1 MiB, np 8, 4 hosts (µs) | 9000.0 | — | — |",
		// ours / theirs: latency 20/40 and 20/10, bandwidth 1000/500, 3000/2000 and 3000/1500.
		"| device | 8 B latency / openmpi | 8 B latency / mpich | 64 KiB bandwidth / openmpi | 64 KiB bandwidth / mpich |",
		"| netvm | 0.50× | 2.00× | 2.00× | — | 1.50× | 2.00× | 0.25× | — | — | — |",
		"| size | netvm@2h | mpich@2h | openmpi@2h |",
		"| collective | np | hosts | netvm | mpich | openmpi |",
		"| Allreduce 8 B | 8 | 2 | 50.000 | — | — |",
		"| Allreduce 8 B | 8 | 4 | **100.000** | — | 400.000 |",
		"| Barrier | 4 | 4 | — | 70.000 | — |",
		"](x-latency.png)",
		// The single-host latency table knows nothing of the cross-host rows.
		"| size | netvm |\n|---|---:|\n| 8 B | 0.5000 |",
	} {
		if !strings.Contains(report, want) {
			t.Errorf("report.md lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("report.md:\n%s", report)
	}
}

func TestCompareHostsFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		err  string
	}{
		{[]string{"--hosts", "1"}, "--hosts 1: want 2 to"},
		{[]string{"--rounds", "5"}, "go with --hosts"},
		{[]string{"--single-host"}, "go with --hosts"},
	} {
		if _, err := parseCompareArgs(c.args, io.Discard); err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%v: error %v, want one containing %q", c.args, err, c.err)
		}
	}
	o, err := parseCompareArgs([]string{"--hosts", "4", "--quick"}, io.Discard)
	if err != nil || o.rounds != 1 {
		t.Errorf("--hosts 4 --quick: %+v, %v; want 1 round", o, err)
	}
}

// TestCompareHostsSmoke runs compare --hosts 2 --quick for real: the
// smallest sizes across two simulated hosts on netvm, and on MPICH and
// Open MPI where they are installed (a missing one is said loudly).
func TestCompareHostsSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the command and starts a simulated cluster")
	}
	if os.Geteuid() != 0 {
		testnote.Skip(t, "compare --hosts needs root to create the simulated hosts' namespaces")
	}
	targets := []string{"netvm"}
	for _, lib := range []string{"mpich", "openmpi"} {
		spec := cmpLibs[lib]
		_, err1 := exec.LookPath(spec.cc)
		_, err2 := exec.LookPath(spec.run)
		if err1 != nil || err2 != nil {
			testnote.Printf("SKIP part of %s: %s is not installed (apt-get install -y %s); netvm runs alone against what is there",
				t.Name(), lib, spec.packages)
			continue
		}
		targets = append(targets, lib)
	}
	bin := buildBench(t)
	out := t.TempDir()
	t0 := time.Now()
	cmd := exec.Command("timeout", "150", bin, "compare", "--hosts", "2", "--quick", "--devices", strings.Join(targets, ","),
		"--benches", "pingpong,bw,coll", "--timeout", "40s", "-o", out)
	b, err := cmd.CombinedOutput()
	t.Logf("compare --hosts 2 --quick on %s took %v", strings.Join(targets, ","), time.Since(t0).Round(time.Second))
	if err != nil {
		// MPICH (ch4:ucx) across simulated hosts often hangs in
		// MPI_Finalize after printing every row (docs/performance.md): such
		// a timeout is tolerated, loudly, as long as its rows arrived
		// (checked below); any other failure fails the test.
		for _, line := range strings.Split(string(b), "\n") {
			if !strings.HasPrefix(line, "[x ") || strings.Contains(line, " ok ") {
				continue
			}
			if f := strings.Fields(line); len(f) > 2 && f[2] == "mpich" && strings.Contains(line, "Timed out") {
				testnote.Printf("NOTE %s: MPICH's run timed out after its output (its Finalize hang across hosts): %s", t.Name(), line)
				continue
			}
			t.Fatalf("compare: %v\n%s", err, b)
		}
	}
	res, err := readResults(filepath.Join(out, "results.csv"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tg := range targets {
		for _, k := range []key{{"x_pingpong", tg + "@2h", 2, 8}, {"x_bw", tg + "@2h", 2, 8},
			{"x_coll_barrier", tg + "@2h", 4, 0}, {"x_coll_allreduce", tg + "@2h", 4, 8}} {
			if v, ok := res[k]; !ok || v <= 0 {
				t.Errorf("results.csv: %v = %v, %v; want a positive value", k, v, ok)
			}
		}
	}
	report, err := os.ReadFile(filepath.Join(out, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(report), "## Across simulated hosts") {
		t.Errorf("report.md has no cross-host section:\n%s", report)
	}
}

// TestCollPlacements checks --host-colls: given placements are kept in
// order, bad ones refused, and none given means every np over every host
// count.
func TestCollPlacements(t *testing.T) {
	got, err := collPlacements([]string{"8@4", "4@2"}, []int{4, 8}, []int{2, 4})
	if err != nil || len(got) != 2 || got[0] != [2]int{8, 4} || got[1] != [2]int{4, 2} {
		t.Errorf("8@4,4@2: %v, %v", got, err)
	}
	for _, bad := range []string{"8", "8@1", "6@4", "x@2", "2@4"} {
		if _, err := collPlacements([]string{bad}, nil, nil); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	got, err = collPlacements(nil, []int{4, 8}, []int{2, 4})
	if err != nil || len(got) != 4 || got[0] != [2]int{4, 2} || got[3] != [2]int{8, 4} {
		t.Errorf("default: %v, %v", got, err)
	}
}
