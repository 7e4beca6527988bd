package main

import (
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/adimpi/adimpi/adi"
	"github.com/adimpi/adimpi/internal/testnote"
)

// TestDMCSRuns runs the dmcs pattern under mpirun at np 2 on every device,
// polling and with the poll thread, and checks that every row is there
// once and positive.
func TestDMCSRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs mpirun jobs")
	}
	bin, launcher := buildBench(t), buildLauncher(t)
	for _, dev := range adi.Devices() {
		for _, thread := range []bool{false, true} {
			args := []string{"120", launcher, "-device", dev, "-np", "2", bin, "dmcs", "--csv", "--iters", "64", "--reps", "1"}
			pre := "dmcs_"
			if thread {
				args = append(args, "--dmcs-thread")
				pre = "dmcs_thread_"
			}
			out, err := exec.Command("timeout", args...).CombinedOutput()
			if err != nil {
				t.Fatalf("%v: %v\n%s", args, err, out)
			}
			var got, want []string
			for _, r := range parseRows(string(out)) {
				if r.np != 2 || r.value <= 0 || r.device != dev {
					t.Errorf("%s: unexpected row %+v", dev, r)
				}
				got = append(got, fmt.Sprintf("%s/%d", r.bench, r.size))
			}
			for _, b := range dmcsRows(pre) {
				for _, n := range dmcsSizes {
					if n == 0 && (strings.Contains(b, "put") || strings.Contains(b, "get")) {
						continue
					}
					want = append(want, fmt.Sprintf("%s/%d", b, n))
				}
			}
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("%s thread=%v: rows %v, want %v\n%s", dev, thread, got, want, out)
			}
		}
	}
}

// TestSpawnRuns runs the spawn pattern under mpirun (2 children) and
// spawn-compare against Open MPI (1 and 2 children), which must print a
// row per count.
func TestSpawnRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs mpirun jobs")
	}
	bin, launcher := buildBench(t), buildLauncher(t)
	args := []string{"120", launcher, "-np", "1", bin, "spawn", "--csv", "--reps", "1", "--spawn-children", "2"}
	out, err := exec.Command("timeout", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %v\n%s", args, err, out)
	}
	rows := parseRows(string(out))
	if len(rows) != 1 || rows[0].bench != "spawn_time" || rows[0].size != 2 || rows[0].value <= 0 {
		t.Fatalf("spawn rows %+v\n%s", rows, out)
	}
	for _, tool := range []string{"mpicc.openmpi", "mpirun.openmpi"} {
		if _, err := exec.LookPath(tool); err != nil {
			testnote.Skip(t, "spawn-compare needs Open MPI ("+tool+": apt-get install -y openmpi-bin libopenmpi-dev)")
		}
	}
	args = []string{"300", bin, "spawn-compare", "--reps", "1", "--children", "1,2", "--mpirun", launcher, "--c-source", "../../bench/c/spawn.c"}
	out, err = exec.Command("timeout", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %v\n%s", args, err, out)
	}
	for _, n := range []int{1, 2} {
		if !strings.Contains(string(out), fmt.Sprintf("\n| %d | ", n)) {
			t.Fatalf("spawn-compare: no row for %d children:\n%s", n, out)
		}
	}
}
