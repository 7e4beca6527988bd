package via_test

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestRMANative: one-sided communication on WinCreate windows (the
// program's memory) goes by RDMA. In conformance/rma's passive-progress
// check rank 0 computes without any MPI call while the last rank locks,
// puts, accumulates and fetches on its memory; -want-native fails unless
// the origin reaches rank 0 natively and the device's RDMA-write counter
// grew. With rma=off (everything through the target's agent) the same job
// must fail: the check does see the difference. Then every check of
// conformance/rma on WinCreate windows at np=3, with the default design
// options and with the host-translating, kernel-doorbell, uncached ones.
func TestRMANative(t *testing.T) {
	build(t)
	native := []string{"-create", "-want-native", "rma_rdma_writes", "passive-progress"}
	run(t, 2, nil, "PASS passive-progress", "rma", native...)
	out, err := mpirun(2, []string{"rma=off"}, "rma", native...)
	if err == nil || !strings.Contains(out, "does not reach rank 0's WinCreate window natively") {
		t.Fatalf("with rma=off the -want-native check did not fail as it should (err %v):\n%s", err, out)
	}
	for _, opts := range [][]string{nil, {"doorbell=d2", "at=at1", "desccache=off", "cq=cq2"}} {
		run(t, 3, opts, "PASS lock-handoff", "rma", "-create", "all")
	}
}

// mpirun runs prog under mpirun like run, and returns its output and error.
func mpirun(np int, opts []string, prog string, args ...string) (string, error) {
	a := []string{"-np", fmt.Sprint(np), "-device", "via", "-timeout", "120s"}
	for _, o := range opts {
		a = append(a, "-device-opt", o)
	}
	a = append(append(a, bins[prog]), args...)
	cmd := exec.Command(bins["mpirun"], a...)
	for _, kv := range os.Environ() { // as run: none of the caller's MPI settings
		if !strings.HasPrefix(kv, "ADIMPI_") && !strings.HasPrefix(kv, "PMI_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}
