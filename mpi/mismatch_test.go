package mpi_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/adimpi/adimpi/internal/testbuild"
)

// TestZeroCountMismatch runs testdata/zeromis (Allgather and Gather where
// one rank passes five elements a block and every other rank none) on
// every device, flat and across pretend hosts (tiered): a mismatch that
// two ranks of no elements see between them must still reach every rank
// (Allgather) and the root (Gather), with the class each rank's count
// calls for, and leave the communicator usable.
func TestZeroCountMismatch(t *testing.T) {
	bins := testbuild.Programs(t, "../cmd/mpirun", "./testdata/zeromis")
	for _, dev := range []string{"netvm", "fm", "via", "bip"} {
		for _, c := range []struct {
			np      int
			pretend string
		}{{8, ""}, {6, ""}, {8, "block:2"}, {8, "rr:3"}} {
			t.Run(fmt.Sprintf("%s/np=%d/pretend=%s", dev, c.np, c.pretend), func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				defer cancel()
				cmd := exec.CommandContext(ctx, bins["mpirun"], "-np", strconv.Itoa(c.np), "-device", dev, "-timeout", "50s", bins["zeromis"])
				var env []string
				for _, kv := range os.Environ() {
					if !strings.HasPrefix(kv, "ADIMPI_") && !strings.HasPrefix(kv, "PMI_") {
						env = append(env, kv)
					}
				}
				if c.pretend != "" {
					env = append(env, "ADIMPI_PRETEND_HOSTS="+c.pretend)
				}
				cmd.Env = env
				out, err := cmd.CombinedOutput()
				if err != nil {
					t.Fatalf("%v\n%s", err, out)
				}
				for r := 0; r < c.np; r++ {
					if !strings.Contains(string(out), fmt.Sprintf("rank %d ok\n", r)) {
						t.Errorf("rank %d did not report ok:\n%s", r, out)
					}
				}
			})
		}
	}
}
