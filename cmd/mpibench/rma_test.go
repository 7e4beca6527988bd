package main

import (
	"fmt"
	"os/exec"
	"slices"
	"testing"
)

// TestRMARuns runs the rma pattern under mpirun at np 3 on an allocated
// window and with --win-create, and checks that every row is there once,
// positive, with the right np.
func TestRMARuns(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs mpirun jobs")
	}
	bin, launcher := buildBench(t), buildLauncher(t)
	for _, create := range []bool{false, true} {
		args := []string{"120", launcher, "-np", "3", bin, "rma", "--csv", "--iters", "5", "--reps", "1", "--min-size", "4096", "--max-size", "8192"}
		pre := "rma_"
		if create {
			args = append(args, "--win-create")
			pre = "rma_create_"
		}
		out, err := exec.Command("timeout", args...).CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
		var got []string
		for _, r := range parseRows(string(out)) {
			want := 2
			if r.bench == pre+"fop_rate" || r.bench == pre+"halo" {
				want = 3
			}
			if r.np != want || r.value <= 0 || r.device != "netvm" {
				t.Errorf("create=%v: unexpected row %+v", create, r)
			}
			got = append(got, fmt.Sprintf("%s/%d", r.bench, r.size))
		}
		var want []string
		for _, n := range []int{4096, 8192} {
			for _, b := range []string{"put_lat", "get_lat", "put_bw", "get_bw"} {
				want = append(want, fmt.Sprintf("%s%s/%d", pre, b, n))
			}
		}
		want = append(want, pre+"acc_rate/8", pre+"fop_rate/8", pre+"halo/1024")
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("create=%v: rows %v, want %v\n%s", create, got, want, out)
		}
	}
}
