package mpi_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/adimpi/adimpi/internal/hostid"
	"github.com/adimpi/adimpi/internal/testbuild"
	"github.com/adimpi/adimpi/internal/testnote"
)

// hydra returns mpiexec.hydra's path; without it the test fails in CI
// (which installs it) and is skipped, loudly, elsewhere.
func hydra(t *testing.T) string {
	p, err := exec.LookPath("mpiexec.hydra")
	if err != nil {
		testnote.Skip(t, "mpi: mpiexec.hydra is not on PATH: install the Debian package mpich (apt-get install -y mpich) to run this test")
	}
	return p
}

// runHydra runs args under mpiexec.hydra with a time limit.
func runHydra(t *testing.T, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, hydra(t), args...)
	cmd.Env = append(os.Environ(), "ADIMPI_DEVICE=netvm")
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("mpiexec.hydra %v did not end within 60 s:\n%s", args, out)
	}
	return string(out), err
}

// TestSplitTypeSharedOneHost: ranks of one host form one shared
// communicator, and name the host as the kernel does.
func TestSplitTypeSharedOneHost(t *testing.T) {
	bin := testbuild.Programs(t, "./testdata/hostprog")["hostprog"]
	out, err := runHydra(t, "-n", "3", bin)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	sort.Strings(lines)
	var want []string
	for r := 0; r < 3; r++ {
		want = append(want, fmt.Sprintf("rank %d shared 3 of 3 host %s", r, hostid.Name()))
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got\n%s\nwant\n%s", out, strings.Join(want, "\n"))
	}
}

// TestOtherHostJoins: a rank in other PID and mount namespaces is on
// another host, as far as shared memory goes (it cannot see the other
// rank's segments); the job still runs, over the device's network wire, and
// each rank's shared communicator holds only itself.
func TestOtherHostJoins(t *testing.T) {
	if os.Geteuid() != 0 {
		testnote.Skip(t, "mpi: not root, so no rank can be put in namespaces of its own")
	}
	bin := testbuild.Programs(t, "./testdata/hostprog")["hostprog"]
	out, err := runHydra(t, "-n", "1", bin, ":", "-n", "1", "unshare", "--pid", "--fork", "--mount", bin)
	if err != nil {
		t.Fatalf("a job across two hosts failed: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	sort.Strings(lines)
	want := []string{"rank 0 shared 1 of 2 host " + hostid.Name(), "rank 1 shared 1 of 2 host " + hostid.Name()}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got\n%s\nwant\n%s", out, strings.Join(want, "\n"))
	}
}
