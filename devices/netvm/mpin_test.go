package netvm_test

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/adimpi/adimpi/internal/testbuild"
)

// TestMPINRefusedProbeThenNext runs the p2p checks probe and cancel in one
// job under MPIN's receiver-initiated protocol (eager=0). Only rank 0
// probes, so only rank 0 sees netvm refuse MPI_Probe(ANY_SOURCE): the job
// must still put every rank through the barrier between the checks (not
// pair rank 0's cancel with rank 1's barrier and hang), and report cancel
// on its own merits, not as UNSUPPORTED for probe's refusal.
func TestMPINRefusedProbeThenNext(t *testing.T) {
	bins := testbuild.Programs(t, "../../cmd/mpirun", "../../conformance/p2p")
	for _, np := range []string{"2", "3"} {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		args := []string{"-np", np, "-device", "netvm", "-device-opt", "eager=0", "-timeout", "30s",
			bins["p2p"], "probe", "cancel", "order"}
		out, err := exec.CommandContext(ctx, bins["mpirun"], args...).CombinedOutput()
		cancel()
		s := string(out)
		if err != nil || !strings.Contains(s, "UNSUPPORTED probe: ") || !strings.Contains(s, "PASS cancel\n") || !strings.Contains(s, "PASS order\n") {
			t.Errorf("mpirun %v: %v; want UNSUPPORTED probe, PASS cancel, PASS order:\n%s", args, err, s)
		}
	}
}
