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
