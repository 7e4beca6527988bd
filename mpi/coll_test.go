package mpi_test

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// buildProgs compiles mpirun and a test program into a temporary directory.
func buildProgs(t *testing.T, prog string) (bin, mpirun string) {
	t.Helper()
	dir := t.TempDir()
	bin, mpirun = filepath.Join(dir, filepath.Base(prog)), filepath.Join(dir, "mpirun")
	for out, pkg := range map[string]string{bin: prog, mpirun: "../cmd/mpirun"} {
		if b, err := exec.Command("go", "build", "-o", out, pkg).CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", pkg, err, b)
		}
	}
	return bin, mpirun
}

// TestCollectives runs testdata/collprog, which checks groups,
// communicators and every collective against sequential references, under
// mpirun at several process counts. With -short it runs smaller sizes at
// fewer counts.
func TestCollectives(t *testing.T) {
	prog, mpirun := buildProgs(t, "./testdata/collprog")
	nps := []string{"1", "2", "3", "4", "5", "8", "16"}
	args := []string{}
	if testing.Short() {
		nps = []string{"1", "3", "4", "16"}
		args = append(args, "-short")
	}
	for _, np := range nps {
		t.Run("np="+np, func(t *testing.T) {
			cmd := exec.Command(mpirun, append([]string{"-np", np, "-timeout", "120s", prog}, args...)...)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("collprog -np %s: %v\n%s", np, err, out)
			}
			if !strings.Contains(string(out), "ok errors np="+np) {
				t.Fatalf("collprog -np %s did not run every check:\n%s", np, out)
			}
		})
	}
}

// TestCollectivesAsyncProgress runs the collective checks with the progress
// goroutine on (mpirun -async-progress), where it races the application's
// own waiters for the device.
func TestCollectivesAsyncProgress(t *testing.T) {
	prog, mpirun := buildProgs(t, "./testdata/collprog")
	for _, np := range []string{"2", "5"} {
		out, err := exec.Command(mpirun, "-np", np, "-async-progress", "-timeout", "120s", prog, "-short").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "ok errors np="+np) {
			t.Fatalf("collprog -np %s -async-progress: %v\n%s", np, err, out)
		}
	}
}

// TestInterCollectives runs testdata/intercollprog: every collective on
// intercommunicators with uneven groups, Idup among concurrent collectives
// and Idups, and persistent collectives started many times.
func TestInterCollectives(t *testing.T) {
	prog, mpirun := buildProgs(t, "./testdata/intercollprog")
	args := []string{}
	if testing.Short() {
		args = append(args, "-short")
	}
	for _, np := range []string{"2", "3", "4", "5", "8"} {
		t.Run("np="+np, func(t *testing.T) {
			out, err := exec.Command(mpirun, append([]string{"-np", np, "-timeout", "120s", prog}, args...)...).CombinedOutput()
			if err != nil || !strings.Contains(string(out), "ok errors np="+np) {
				t.Fatalf("intercollprog -np %s: %v\n%s", np, err, out)
			}
		})
	}
	t.Run("np=4/async-progress", func(t *testing.T) {
		out, err := exec.Command(mpirun, append([]string{"-np", "4", "-async-progress", "-timeout", "120s", prog}, args...)...).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "ok errors np=4") {
			t.Fatalf("intercollprog -np 4 -async-progress: %v\n%s", err, out)
		}
	})
}
