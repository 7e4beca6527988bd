package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/adimpi/adimpi/internal/slurmcluster"
	"github.com/adimpi/adimpi/internal/testnote"
	"github.com/adimpi/adimpi/internal/testproc"
)

// Slurm's host lists and task counts expand as Slurm writes them.
func TestSlurmHostlist(t *testing.T) {
	for in, want := range map[string]string{
		"h1":                "h1",
		"h[1-3]":            "h1 h2 h3",
		"node[01-03,07],gp": "node01 node02 node03 node07 gp",
		"r[1-2]n[8-9]":      "r1n8 r1n9 r2n8 r2n9",
		"a,b[9-10]":         "a b9 b10",
	} {
		got, err := expandHostlist(in)
		if err != nil || strings.Join(got, " ") != want {
			t.Errorf("expandHostlist(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"h[1-3", "h1]", "h[3-1]", "h[a-b]", "a,,b", ""} {
		if got, err := expandHostlist(bad); err == nil {
			t.Errorf("expandHostlist(%q) = %q, want an error", bad, got)
		}
	}
	for _, tc := range []struct {
		in   string
		n    int
		want []int
	}{
		{"4,1(x2)", 3, []int{4, 1, 1}},
		{"2(x3)", 3, []int{2, 2, 2}},
		{"1", 1, []int{1}},
	} {
		got, err := expandTasksPerNode(tc.in, tc.n)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("expandTasksPerNode(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"2(x3)", "x", "1(x0),1"} {
		if got, err := expandTasksPerNode(bad, 2); err == nil {
			t.Errorf("expandTasksPerNode(%q, 2) = %v, want an error", bad, got)
		}
	}
}

// Inside a Slurm allocation (salloc, sbatch) mpirun takes its hosts and
// slots from the allocation and starts the ranks through srun: they run
// where mpirun's placement says, learn each other through PMI-2, get one
// job secret, and -l labels their lines with rank and node.
func TestSlurmAllocation(t *testing.T) {
	if why := slurmcluster.Missing(); why != "" {
		testnote.Skip(t, "cmd/mpirun: "+why)
	}
	c := slurmcluster.StartT(t, 3)
	// run runs name on h1 and returns its output and exit status (-1 if
	// it did not exit).
	runCode := func(t *testing.T, name string, args ...string) (string, string, int) {
		t.Helper()
		cmd := c.Command("h1", name, args...)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		timer := time.AfterFunc(60*time.Second, func() { cmd.Process.Kill() })
		_ = cmd.Wait() // the exit status says how it ended
		if !timer.Stop() {
			t.Fatalf("%s %q did not end within 60s; stderr:\n%s", name, args, errb.String())
		}
		return out.String(), errb.String(), cmd.ProcessState.ExitCode()
	}
	run := func(t *testing.T, name string, args ...string) (string, string) {
		t.Helper()
		out, errs, code := runCode(t, name, args...)
		if code != 0 {
			t.Fatalf("%s %q: exit %d\nstdout:\n%s\nstderr:\n%s", name, args, code, out, errs)
		}
		return out, errs
	}
	for _, tc := range []struct {
		alloc, mpirun []string
		want          string // each rank's node
	}{
		{[]string{"-N", "3", "--ntasks-per-node=2"}, []string{"-l"}, "h1 h1 h2 h2 h3 h3"},
		{[]string{"-N", "3", "--ntasks-per-node=2"}, []string{"-l", "-rr"}, "h1 h2 h3 h1 h2 h3"},
		{[]string{"-N", "2", "--ntasks-per-node=1"}, []string{"-l", "-np", "4"}, "h1 h2 h1 h2"},
		// -launcher slurm: srun, on the allocation's nodes or on the
		// hosts named (a subset of them).
		{[]string{"-N", "3", "--ntasks-per-node=1"}, []string{"-l", "-launcher", "slurm"}, "h1 h2 h3"},
		{[]string{"-N", "3", "--ntasks-per-node=1"}, []string{"-l", "-launcher", "slurm", "-hosts", "h3,h2", "-np", "2"}, "h3 h2"},
	} {
		t.Run(strings.Join(append(tc.alloc, tc.mpirun...), " "), func(t *testing.T) {
			args := append(append(append(tc.alloc, mpirunBin), tc.mpirun...), hostprobeBin)
			out, errs := run(t, "salloc", args...)
			checkSlurmProbe(t, out, errs, tc.want, true)
		})
	}
	// An MPMD command line runs through srun's --multi-prog, each
	// program's ranks with their -env.
	t.Run("mpmd", func(t *testing.T) {
		out, errs := run(t, "salloc", "-N", "3", "--ntasks-per-node=1", mpirunBin, "-l",
			"-n", "1", hostprobeBin, ":", "-n", "2", "-env", "ADIMPI_JOB_SECRET", strings.Repeat("ab", 32), hostprobeBin)
		checkSlurmProbe(t, out, errs, "h1 h2 h3", true)
		// The first program's -env stays with its ranks.
		out, errs = run(t, "salloc", "-N", "2", "--ntasks-per-node=1", mpirunBin, "-l",
			"-n", "1", "-env", "MPMD_WHO", "first", "/usr/bin/printenv", "MPMD_WHO", ":", "-n", "1", "/usr/bin/env")
		if !strings.Contains(out, "[0@h1] first\n") || !strings.Contains(out, "[1@h2] ADIMPI_APPNUM=1\n") || strings.Contains(out, "[1@h2] MPMD_WHO=") {
			t.Errorf("the programs' -env: want rank 0 to print first, rank 1 ADIMPI_APPNUM=1 and no MPMD_WHO; got\n%s\nstderr:\n%s", out, errs)
		}
	})
	// Inside a job step (as in srun --pty bash) the allocation's CPUs are
	// the slots, and mpirun's srun overlaps mpirun's own step instead of
	// waiting for its CPUs.
	t.Run("in-step", func(t *testing.T) {
		out, errs := run(t, "salloc", "-N", "3", "--ntasks-per-node=1", "srun", "-N", "1", "-n", "1", mpirunBin, "-l", hostprobeBin)
		checkSlurmProbe(t, out, errs, "h1 h2 h3", true)
	})
	// A failing job ends as under mpirun's own launching: a rank's
	// MPI_Abort (here from a panic that Finalize's defer turned into an
	// abort, or the plain exit 2 of an unrecovered panic) gives its code,
	// and -timeout makes every rank say where it waits, then exits 124.
	for _, tc := range []struct {
		name string
		args []string
		code int
		want []string // in mpirun's standard error
	}{
		{"panic", []string{"-np", "3", mpiprogBin, "panic"}, 2, []string{"panic: mpiprog gives up"}},
		{"timeout", []string{"-l", "-np", "3", "-timeout", "2s", mpiprogBin, "wait"}, exitTimeout, []string{
			"mpirun: -timeout 2s expired",
			"[0@h1] adimpi: rank 0: waiting", "in mpi.Recv: receive from rank 1, tag 7, on MPI_COMM_WORLD",
			"[1@h2] adimpi: rank 1: waiting", "in mpi.Ssend: send to rank 0, tag 9, on wait-dup",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"-N", "3", "--ntasks-per-node=1", mpirunBin}, tc.args...)
			out, errs, code := runCode(t, "salloc", args...)
			if code != tc.code {
				t.Errorf("exit %d, want %d", code, tc.code)
			}
			for _, w := range tc.want {
				if !strings.Contains(errs, w) {
					t.Errorf("stderr lacks %q", w)
				}
			}
			if t.Failed() {
				t.Logf("stdout:\n%s\nstderr:\n%s", out, errs)
			}
		})
	}
	// SIGTERM to mpirun reaches every rank through srun: the job ends
	// with 128+15 and no rank is left.
	t.Run("sigterm", func(t *testing.T) {
		cmd := c.Command("h1", "salloc", "-N", "3", "--ntasks-per-node=1", mpirunBin, "-np", "3", mpiprogBin, "wait")
		br, errb := testproc.StartPiped(t, cmd)
		timer := time.AfterFunc(60*time.Second, func() { cmd.Process.Kill() })
		defer timer.Stop()
		for i := 0; i < 3; i++ { // every rank waits
			if l, err := br.ReadString('\n'); !strings.HasPrefix(l, "waiting ") {
				t.Fatalf("line %q (%v), want waiting; stderr:\n%s", l, err, errb.String())
			}
		}
		mpirun := 0
		for _, pid := range testproc.PIDs(mpirunBin) {
			mpirun = pid
		}
		if mpirun == 0 {
			t.Fatal("mpirun's process not found")
		}
		if err := syscall.Kill(mpirun, syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, br)
		cmd.Wait()
		if code := cmd.ProcessState.ExitCode(); code != 128+int(syscall.SIGTERM) {
			t.Errorf("salloc mpirun exited %d after SIGTERM, want %d; stderr:\n%s", code, 128+int(syscall.SIGTERM), errb.String())
		}
		if left := testproc.PIDs(mpiprogBin); len(left) > 0 {
			t.Errorf("ranks left: %v", left)
		}
	})
	t.Run("sbatch", func(t *testing.T) {
		dir, err := os.MkdirTemp("", "sbatch-")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(dir)
		script, outFile := filepath.Join(dir, "job.sh"), filepath.Join(dir, "job.out")
		body := fmt.Sprintf("#!/bin/sh\n#SBATCH --nodes=3\n#SBATCH --ntasks-per-node=1\n#SBATCH --output=%s\n%s %s\n", outFile, mpirunBin, hostprobeBin)
		if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
		run(t, "sbatch", "--wait", "--chdir="+dir, script)
		b, err := os.ReadFile(outFile)
		if err != nil {
			t.Fatal(err)
		}
		checkSlurmProbe(t, string(b), "", "h1 h2 h3", false)
	})
}

// checkSlurmProbe checks hostprobe's lines: one per rank, on the node
// want gives it, every rank seeing the same host list and secret, and (if
// labelled) each line's label naming its rank and node.
func checkSlurmProbe(t *testing.T, out, errs, want string, labelled bool) {
	t.Helper()
	wantHosts := strings.Fields(want)
	got := make([]string, len(wantHosts))
	secret := ""
	for _, l := range lines(out) {
		m := probeLine.FindStringSubmatch(l)
		if m == nil {
			t.Errorf("unexpected line %q", l)
			continue
		}
		var r int
		fmt.Sscan(m[3], &r)
		if r >= len(got) || got[r] != "" {
			t.Errorf("rank %d out of range or twice: %q", r, l)
			continue
		}
		got[r] = m[4]
		if labelled && (m[1] != m[3] || m[2] != m[4]) {
			t.Errorf("line %q: label [%s@%s], want [%s@%s]", l, m[1], m[2], m[3], m[4])
		}
		if m[7] != strings.Join(wantHosts, ",") {
			t.Errorf("rank %d sees hosts %s, want %s", r, m[7], strings.Join(wantHosts, ","))
		}
		if secret == "" {
			secret = m[6]
		}
		if len(m[6]) != 64 || m[6] != secret {
			t.Errorf("rank %d: secret %q, want one 64-digit secret for all", r, m[6])
		}
	}
	if !slices.Equal(got, wantHosts) {
		t.Errorf("ranks ran on %q, want %q\nstdout:\n%s\nstderr:\n%s", got, wantHosts, out, errs)
	}
}
