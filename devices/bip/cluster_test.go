package bip

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/adimpi/adimpi/internal/netcluster"
	"github.com/adimpi/adimpi/internal/testbuild"
	"github.com/adimpi/adimpi/internal/testnote"
)

// TestStandaloneAcrossHosts runs BIP's own API checks (testdata/bipprog:
// Open, short messages, long messages, BIP's bound) with one rank on each
// of 3 simulated hosts, with the defaults and with tiny queues, chunks
// instead of remote write and maxlong=3; and, over MPI-BIP, the protocol
// thresholds with the same tiny options and the credit check with a queue
// of 4.
func TestStandaloneAcrossHosts(t *testing.T) {
	if os.Geteuid() != 0 {
		testnote.Skip(t, fmt.Sprintf("bip: simulated hosts need root to create namespaces (running as uid %d)", os.Geteuid()))
	}
	c := netcluster.StartT(t, 3)
	bins := testbuild.Programs(t, "../../cmd/mpirun", "../../cmd/netcluster", "./testdata/bipprog", "./testdata/thresholdprog", "./testdata/creditprog")
	launch := []string{"-launcher-exec", fmt.Sprintf("%s exec -dir %s {host} --", bins["netcluster"], c.Dir), "-hosts", "h1,h2,h3"}
	small := []string{"-device-opt", "cma=off", "-device-opt", "maxlong=3", "-device-opt", "queue=4", "-device-opt", "short=256", "-device-opt", "chunk=4096"}
	run := func(np string, opts []string, prog, check string, args ...string) {
		all := append(append(append([]string{"-np", np, "-timeout", "60s"}, launch...), opts...), append([]string{bins[prog]}, args...)...)
		out, err := exec.Command(bins["mpirun"], all...).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "PASS "+check) || strings.Contains(string(out), "FAIL") {
			t.Errorf("mpirun %v: %v\n%s", all, err, out)
		}
	}
	for _, check := range []string{"short", "long", "bound"} {
		for _, opts := range [][]string{nil, small} {
			run("3", opts, "bipprog", check, check)
		}
	}
	run("3", append([]string{"-device", "bip"}, small...), "thresholdprog", "thresholds")
	run("2", []string{"-device", "bip", "-device-opt", "queue=4"}, "creditprog", "credits")
}
