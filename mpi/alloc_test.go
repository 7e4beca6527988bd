package mpi_test

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/adimpi/adimpi/internal/testbuild"
)

// allocLine is what testdata/allocprog prints per rank and communicator.
var allocLine = regexp.MustCompile(`^rank (\d+) comm (\S+) allreduce (\S+) barrier (\S+) bcast (\S+) reduce (\S+)$`)

// TestSmallCollectivesNoAlloc: on every device, once a communicator has its
// board, a blocking Allreduce, Barrier, Bcast and Reduce of 8 B allocate
// nothing, on MPI_COMM_WORLD and on a Dup of it (testing.AllocsPerRun in
// every rank of testdata/allocprog at np 4).
func TestSmallCollectivesNoAlloc(t *testing.T) {
	bins := testbuild.Programs(t, "../cmd/mpirun", "./testdata/allocprog")
	for _, dev := range []string{"netvm", "fm", "via", "bip"} {
		t.Run(dev, func(t *testing.T) {
			const np = 4
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, bins["mpirun"], "-np", "4", "-device", dev, "-timeout", "50s", bins["allocprog"])
			var env []string
			for _, kv := range os.Environ() {
				if !strings.HasPrefix(kv, "ADIMPI_") && !strings.HasPrefix(kv, "PMI_") {
					env = append(env, kv)
				}
			}
			cmd.Env = env
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			seen := 0
			for _, line := range strings.Split(string(out), "\n") {
				m := allocLine.FindStringSubmatch(strings.TrimSpace(line))
				if m == nil {
					continue
				}
				seen++
				for i, name := range []string{"Allreduce", "Barrier", "Bcast", "Reduce"} {
					if m[3+i] != "0" {
						t.Errorf("rank %s on %s: %s of 8 B makes %s allocations, want 0", m[1], m[2], name, m[3+i])
					}
				}
			}
			if seen != 2*np {
				t.Fatalf("%d of %d lines reported:\n%s", seen, 2*np, out)
			}
		})
	}
}
