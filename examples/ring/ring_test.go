package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/adimpi/adimpi/internal/testbuild"
	"github.com/adimpi/adimpi/internal/testnote"
)

// build compiles the ring example and mpirun into a temporary directory.
func build(t *testing.T) (ring, mpirun string) {
	t.Helper()
	bins := testbuild.Programs(t, "../ring", "../../cmd/mpirun")
	return bins["ring"], bins["mpirun"]
}

func checkRing(t *testing.T, out []byte, err error, np string) {
	t.Helper()
	if err != nil {
		t.Fatalf("ring failed: %v\n%s", err, out)
	}
	if want := "ring: " + np + " ranks on device netvm"; !strings.Contains(string(out), want) {
		t.Fatalf("output lacks %q:\n%s", want, out)
	}
}

// TestRingUnderMpirun runs the example the README's first command runs.
func TestRingUnderMpirun(t *testing.T) {
	ring, mpirun := build(t)
	for _, np := range []string{"1", "2", "16"} {
		out, err := exec.Command(mpirun, "-np", np, "-timeout", "60s", ring).CombinedOutput()
		checkRing(t, out, err, np)
	}
}

// TestRingUnderHydra starts an adimpi program with MPICH's Hydra launcher:
// the PMI-1 wire-up is the standard one, and the device comes from the
// environment.
func TestRingUnderHydra(t *testing.T) {
	hydra, err := exec.LookPath("mpiexec.hydra")
	if err != nil {
		testnote.Skip(t, "examples/ring: mpiexec.hydra is not on PATH: install the Debian package mpich (apt-get install -y mpich) to run this test")
	}
	ring, _ := build(t)
	cmd := exec.Command(hydra, "-n", "4", ring)
	cmd.Env = append(os.Environ(), "ADIMPI_DEVICE=netvm")
	out, err := cmd.CombinedOutput()
	checkRing(t, out, err, "4")
}
