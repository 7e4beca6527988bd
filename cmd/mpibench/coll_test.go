package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const collCSV = `bench,device,np,size,value,unit
coll_barrier,netvm,2,0,9.000,us
pingpong,netvm,2,8,0.5000,us
bench,device,np,size,value,unit
coll_barrier,netvm,2,0,3.000,us
coll_barrier,mpich,2,0,2.000,us
coll_barrier,openmpi,2,0,1.500,us
coll_allreduce,netvm,4,8388608,5000.0,us
coll_allreduce,openmpi,4,8388608,1000.0,us

coll_bcast,netvm,8,1048576,100.000,us
`

func TestReadCollResults(t *testing.T) {
	res, err := readCollResults(strings.NewReader(collCSV))
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 6 {
		t.Errorf("got %d rows, want 6 (coll_ rows only, duplicates merged): %v", len(res), res)
	}
	if v := res[collKey{"coll_barrier", "netvm", 2, 0}]; v != 3 {
		t.Errorf("netvm barrier = %g, want the later row's 3", v)
	}
	if _, ok := res[collKey{"pingpong", "netvm", 2, 8}]; ok {
		t.Error("a pingpong row was kept")
	}
	if got := res.ourDevices(); len(got) != 1 || got[0] != "netvm" {
		t.Errorf("ourDevices = %v, want [netvm]", got)
	}
	if r, ok := collRatio(res, collKey{"coll_barrier", "netvm", 2, 0}); !ok || r != 2 {
		t.Errorf("barrier ratio = %g, %v; want 2 (3 over Open MPI's 1.5)", r, ok)
	}
	if _, ok := collRatio(res, collKey{"coll_bcast", "netvm", 8, 1 << 20}); ok {
		t.Error("bcast ratio without any C MPI row")
	}
}

func TestReadCollResultsBadRow(t *testing.T) {
	for _, in := range []string{
		"coll_barrier,netvm,two,0,1.0,us\n",
		"coll_barrier,netvm,2,0,fast,us\n",
		"coll_barrier,netvm,2,0\n",
	} {
		if _, err := readCollResults(strings.NewReader(in)); err == nil {
			t.Errorf("no error for %q", in)
		}
	}
}

func TestSummarizeColl(t *testing.T) {
	res, err := readCollResults(strings.NewReader(collCSV))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	summarizeColl(&buf, res)
	out := buf.String()
	for _, want := range []string{"Barrier", "Allreduce 8 MiB", "Bcast 1 MiB", "netvm/best", "2.00", "5.00", "!"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "Alltoall") {
		t.Errorf("summary has an Alltoall row without data:\n%s", out)
	}
}

// TestSummarizeCollMedians: several rounds' results merge into the
// median of each cell, and _dup rows get sections of their own.
func TestSummarizeCollMedians(t *testing.T) {
	var rounds []collResults
	for _, v := range []string{"30", "10", "20"} {
		res, err := readCollResults(strings.NewReader("coll_barrier_dup,netvm,4,0," + v + ",us\ncoll_barrier_dup,openmpi,4,0,40,us\n"))
		if err != nil {
			t.Fatal(err)
		}
		rounds = append(rounds, res)
	}
	res := medianCollResults(rounds)
	if got := res[collKey{"coll_barrier_dup", "netvm", 4, 0}]; got != 20 {
		t.Errorf("median of 30, 10, 20 is %v, want 20", got)
	}
	var buf bytes.Buffer
	summarizeColl(&buf, res)
	if out := buf.String(); !strings.Contains(out, "Barrier (Dup)") || !strings.Contains(out, "0.50") {
		t.Errorf("summary lacks the Dup section or its ratio 0.50:\n%s", out)
	}
}

// TestBcastSweep runs the bcast sweep for real on fm at np 8 (where the
// core takes fm's multidestination Bcast) and with the core's own
// algorithms (ADIMPI_NATIVE_COLL=off): every size is checked on every rank,
// and a positive time comes out for each.
// buildLauncher builds cmd/mpirun next to the benchmark binary (once per
// test binary) and returns its path.
func buildLauncher(t *testing.T) string {
	t.Helper()
	launcher := filepath.Join(filepath.Dir(buildBench(t)), "mpirun")
	if _, err := os.Stat(launcher); err == nil {
		return launcher
	}
	if out, err := exec.Command("go", "build", "-o", launcher, "../mpirun").CombinedOutput(); err != nil {
		t.Fatalf("go build mpirun: %v\n%s", err, out)
	}
	return launcher
}

func TestBcastSweep(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs mpirun jobs")
	}
	bin, launcher := buildBench(t), buildLauncher(t)
	for _, native := range []string{"on", "off"} {
		cmd := exec.Command("timeout", "120", launcher, "-np", "8", "-device", "fm", bin, "bcast", "--max-size", "4096", "--csv", "--iters", "3", "--reps", "1")
		cmd.Env = append(os.Environ(), "ADIMPI_NATIVE_COLL="+native)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("native=%s: %v\n%s", native, err, out)
		}
		rows := parseRows(string(out))
		var got []int
		for _, r := range rows {
			if r.bench != "bcast" || r.device != "fm" || r.np != 8 || r.value <= 0 {
				t.Errorf("native=%s: unexpected row %+v", native, r)
			}
			got = append(got, r.size)
		}
		if want := []int{8, 64, 512, 4096}; !slices.Equal(got, want) {
			t.Errorf("native=%s: sizes %v, want %v", native, got, want)
		}
	}
}

// TestCollOnDup: coll --comm dup times (and checks) every collective on a
// duplicate of the world, in rows named with a _dup suffix, and an unknown
// --comm is refused.
func TestCollOnDup(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs mpirun jobs")
	}
	bin, launcher := buildBench(t), buildLauncher(t)
	out, err := exec.Command("timeout", "120", launcher, "-np", "2", "-device", "netvm", bin, "coll", "--comm", "dup", "--allreduce-large", "4096", "--csv", "--iters", "3", "--reps", "1").CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	benches := map[string]bool{}
	for _, r := range parseRows(string(out)) {
		if r.np != 2 || r.value <= 0 {
			t.Errorf("unexpected row %+v", r)
		}
		benches[r.bench] = true
	}
	for _, b := range []string{"coll_barrier_dup", "coll_allreduce_dup", "coll_bcast_dup", "coll_alltoall_dup"} {
		if !benches[b] {
			t.Errorf("no %s row in\n%s", b, out)
		}
	}
	out, err = exec.Command("timeout", "120", launcher, "-np", "1", "-device", "netvm", bin, "coll", "--comm", "half").CombinedOutput()
	if err == nil || !strings.Contains(string(out), `--comm "half"`) {
		t.Errorf("--comm half: error %v, output\n%s", err, out)
	}
}
