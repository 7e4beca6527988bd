package pmi

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/adimpi/adimpi/internal/testnote"
)

// TestHydraInterop runs testdata/hydraprobe under MPICH's mpiexec.hydra.
// Without mpiexec.hydra the test is skipped, saying so in go test's output
// even when the package passes, except in CI (CI=true), where it fails: CI
// installs the mpich package.
func TestHydraInterop(t *testing.T) {
	hydra, err := exec.LookPath("mpiexec.hydra")
	if err != nil {
		testnote.Skip(t, "internal/pmi: mpiexec.hydra is not on PATH: install the Debian package mpich (apt-get install -y mpich) to run this test")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		testnote.Skip(t, "internal/pmi: the go command is not on PATH")
	}
	bin := filepath.Join(t.TempDir(), "hydraprobe")
	build := exec.Command(goTool, "build", "-o", bin, "./testdata/hydraprobe")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building hydraprobe: %v\n%s", err, out)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, hydra, "-n", "3", bin)
	// Do not let an enclosing launcher's PMI settings leak into Hydra.
	cmd.Env = filterEnv(os.Environ(), EnvFD, EnvPort, EnvID, EnvRank, EnvSize)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("mpiexec.hydra -n 3 hydraprobe: %v\nstdout:\n%s\nstderr:\n%s", err, out, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	sort.Strings(lines)
	want := []string{
		"hydraprobe rank=0 size=3 singleton=false kvsname_set=true missing_key_error=true values=v0:x,v1:xx,v2:xxx",
		"hydraprobe rank=1 size=3 singleton=false kvsname_set=true missing_key_error=true values=v0:x,v1:xx,v2:xxx",
		"hydraprobe rank=2 size=3 singleton=false kvsname_set=true missing_key_error=true values=v0:x,v1:xx,v2:xxx",
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Fatalf("hydraprobe output:\n%s\nwant (in any order):\n%s\nstderr:\n%s",
			strings.Join(lines, "\n"), strings.Join(want, "\n"), stderr.String())
	}
}

// filterEnv returns env without the named variables.
func filterEnv(env []string, drop ...string) []string {
	var out []string
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		keep := true
		for _, d := range drop {
			if name == d {
				keep = false
			}
		}
		if keep {
			out = append(out, kv)
		}
	}
	return out
}

// TestHydraSpawn: an adimpi program that calls MPI_Comm_spawn under
// mpiexec.hydra (which serves PMI-1's spawn) gets its children, on this
// host, and an intercommunicator to them that carries point-to-point,
// collectives and a merge (mpi/testdata/dynprog checks each), and a child
// spawns again.
func TestHydraSpawn(t *testing.T) {
	hydra, bin := hydraAndDynprog(t)
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"-n", "2", bin, "spawn", "2"}, []string{"parent 0: 2 children ok", "parent 1: 2 children ok",
			"child 0 of 2 (child): ok", "child 1 of 2 (child): ok"}},
		{[]string{"-n", "1", bin, "nested"}, []string{"parent 0: 1 children ok", "child 0 of 1 (nested-child): ok", "child 0 of 1 (child): ok"}},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		cmd := exec.CommandContext(ctx, hydra, tc.args...)
		cmd.Env = filterEnv(os.Environ(), EnvFD, EnvPort, EnvID, EnvRank, EnvSize, "ADIMPI_JOB_SECRET", "ADIMPI_DEVICE")
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		cancel()
		if err != nil {
			t.Errorf("mpiexec.hydra %q: %v\nstdout:\n%s\nstderr:\n%s", tc.args, err, out, stderr.String())
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains("\n"+string(out), "\n"+w+"\n") {
				t.Errorf("mpiexec.hydra %q: no line %q\nstdout:\n%s\nstderr:\n%s", tc.args, w, out, stderr.String())
			}
		}
	}
}

// TestHydraSpawnMissing: Hydra answers a spawn before it runs the program,
// so a missing program used to leave the spawning ranks waiting for ever.
// Now the spawn fails with MPI_ERR_SPAWN on every rank and the job goes
// on: when the spawn names this host the root finds the program missing
// before asking; otherwise it gives up when no child has connected within
// the spawn's bound (Info "timeout" or ADIMPI_SPAWN_TIMEOUT, 3 s here).
func TestHydraSpawnMissing(t *testing.T) {
	hydra, bin := hydraAndDynprog(t)
	host, _ := os.Hostname()
	const failed = "spawn failed as expected: MPI_Comm_spawn: MPI_ERR_SPAWN: child 0: command 0 (/nonexistent/dynprog-missing"
	for _, tc := range []struct {
		name string
		env  []string
		want string
	}{
		{"Info timeout", []string{"DYNPROG_SPAWN_TIMEOUT=3"}, "no child connected within 3s"},
		{"ADIMPI_SPAWN_TIMEOUT", []string{"ADIMPI_SPAWN_TIMEOUT=3s"}, "no child connected within 3s"},
		{"this host", []string{"DYNPROG_SPAWN_HOST=" + host}, "no executable file /nonexistent/dynprog-missing on host " + host},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		cmd := exec.CommandContext(ctx, hydra, "-n", "2", bin, "missing")
		cmd.Env = append(filterEnv(os.Environ(), EnvFD, EnvPort, EnvID, EnvRank, EnvSize, "ADIMPI_JOB_SECRET", "ADIMPI_DEVICE", "ADIMPI_SPAWN_TIMEOUT"), tc.env...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		start := time.Now()
		out, err := cmd.Output()
		cancel()
		if err != nil {
			t.Errorf("%s: mpiexec.hydra -n 2 dynprog missing (after %v): %v\nstdout:\n%s\nstderr:\n%s", tc.name, time.Since(start), err, out, stderr.String())
			continue
		}
		if !strings.Contains(string(out), failed) || !strings.Contains(string(out), tc.want) {
			t.Errorf("%s: want a line with %q and %q\nstdout:\n%s\nstderr:\n%s", tc.name, failed, tc.want, out, stderr.String())
		}
	}
}

// hydraAndDynprog finds mpiexec.hydra (skipping the test, loudly, without
// it) and builds mpi/testdata/dynprog for a spawn test.
func hydraAndDynprog(t *testing.T) (hydra, bin string) {
	t.Helper()
	hydra, err := exec.LookPath("mpiexec.hydra")
	if err != nil {
		testnote.Skip(t, "internal/pmi: mpiexec.hydra is not on PATH: install the Debian package mpich (apt-get install -y mpich) to run this test")
	}
	bin = filepath.Join(t.TempDir(), "dynprog")
	if out, err := exec.Command("go", "build", "-o", bin, "../../mpi/testdata/dynprog").CombinedOutput(); err != nil {
		t.Fatalf("building dynprog: %v\n%s", err, out)
	}
	return hydra, bin
}
