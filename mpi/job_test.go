package mpi_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The tests in this file start real jobs: cmd/mpirun runs the program in
// testdata/errjob on several ranks, and the tests read what the job printed
// and how it ended.

var (
	jobOnce sync.Once
	jobDir  string // holds the binaries; removed by TestMain
	jobErr  error
)

// jobBinaries builds mpirun and errjob once per test binary.
func jobBinaries(t *testing.T) (mpirun, errjob string) {
	t.Helper()
	jobOnce.Do(func() {
		if jobDir, jobErr = os.MkdirTemp("", "mpi-jobtest-"); jobErr != nil {
			return
		}
		for _, b := range [][2]string{{"mpirun", "../cmd/mpirun"}, {"errjob", "./testdata/errjob"}} {
			out, err := exec.Command("go", "build", "-o", filepath.Join(jobDir, b[0]), b[1]).CombinedOutput()
			if err != nil {
				jobErr = fmt.Errorf("go build %s: %v\n%s", b[1], err, out)
				return
			}
		}
	})
	if jobErr != nil {
		t.Fatal(jobErr)
	}
	return filepath.Join(jobDir, "mpirun"), filepath.Join(jobDir, "errjob")
}

// removeJobBinaries is called by TestMain after the tests.
func removeJobBinaries() {
	if jobDir != "" {
		os.RemoveAll(jobDir)
	}
}

// jobResult is how one job ended.
type jobResult struct {
	stdout, stderr string
	code           int
	elapsed        time.Duration
}

func (r jobResult) String() string {
	return fmt.Sprintf("exit %d after %v\nstdout:\n%s\nstderr:\n%s", r.code, r.elapsed.Round(time.Millisecond), r.stdout, r.stderr)
}

// jobLimit is how long a job may run before the test calls it hung; every
// job here ends in well under a second when it works.
const jobLimit = 20 * time.Second

// promptly is how soon a job with a failing rank must end: mpirun needs a
// moment to notice the rank and stop the others.
const promptly = 10 * time.Second

// runJob runs errjob MODE on np ranks through mpirun, with extra mpirun
// flags and environment, and fails the test if the job outlives jobLimit.
func runJob(t *testing.T, np int, env []string, mode string, mpirunFlags ...string) jobResult {
	t.Helper()
	mpirun, errjob := jobBinaries(t)
	ctx, cancel := context.WithTimeout(context.Background(), jobLimit)
	defer cancel()
	args := append([]string{"-np", fmt.Sprint(np)}, mpirunFlags...)
	cmd := exec.CommandContext(ctx, mpirun, append(args, errjob, mode)...)
	cmd.Env = append(os.Environ(), env...)
	// A hung job is stopped as a user would stop it, so that mpirun ends its
	// ranks; it is killed only if that fails.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	res := jobResult{stdout: stdout.String(), stderr: stderr.String(), elapsed: time.Since(start)}
	if ctx.Err() != nil {
		t.Fatalf("errjob %s on %d ranks did not end within %v (hung)\n%v", mode, np, jobLimit, res)
	}
	if ee, ok := err.(*exec.ExitError); ok {
		res.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("mpirun: %v", err)
	}
	return res
}

// A rank that panics with Finalize deferred, as the README shows, ends the
// job at once with its panic message, the panic site and its rank, while
// the other ranks wait in a receive.
func TestJobPanicWithDeferredFinalize(t *testing.T) {
	res := runJob(t, 3, nil, "panic")
	for _, want := range []string{
		"rank 2: panic: assignment to entry in nil map",
		"errjob/main.go:", // the stack names the panic site
	} {
		if !strings.Contains(res.stderr, want) {
			t.Errorf("stderr lacks %q", want)
		}
	}
	if res.code == 0 {
		t.Errorf("the job exited 0")
	}
	if res.elapsed > promptly {
		t.Errorf("the job took %v to end (more than %v)", res.elapsed, promptly)
	}
	if t.Failed() {
		t.Log(res)
	}
}

// With Finalize deferred inside a function literal (where recover cannot
// see the panic), Finalize does not wait for the other ranks: the panic
// goes on, Go prints it, and the job ends naming the rank.
func TestJobPanicWithWrappedFinalize(t *testing.T) {
	res := runJob(t, 3, nil, "panic-wrapped")
	for _, want := range []string{
		"panic: wrapped boom",
		"rank 2",
	} {
		if !strings.Contains(res.stderr, want) {
			t.Errorf("stderr lacks %q", want)
		}
	}
	if res.code == 0 {
		t.Errorf("the job exited 0")
	}
	if res.elapsed > promptly {
		t.Errorf("the job took %v to end (more than %v)", res.elapsed, promptly)
	}
	if t.Failed() {
		t.Log(res)
	}
}

// Errors read "MPI call: class: detail", the class once, in the program's
// terms: the call it made, the sender's rank in its communicator (the
// program's communicator numbers the ranks the other way round from
// MPI_COMM_WORLD), the tag it gave, and no tag for a collective's message,
// whose tags are the implementation's. The collectives run on messages
// (ADIMPI_NATIVE_COLL=off), where a too-short broadcast buffer is a
// receive's truncation.
func TestJobErrorMessages(t *testing.T) {
	for _, dev := range []string{"netvm", "fm", "via", "bip"} {
		t.Run(dev, func(t *testing.T) { testErrorMessages(t, dev) })
	}
}

func testErrorMessages(t *testing.T, device string) {
	res := runJob(t, 2, []string{"ADIMPI_NATIVE_COLL=off"}, "errors", "-device", device)
	want := []string{
		"recv truncate: MPI_Recv: MPI_ERR_TRUNCATE: message of 80 bytes from rank 1 (tag 7) is longer than the receive buffer (40 bytes)",
		"irecv truncate: MPI_Irecv: MPI_ERR_TRUNCATE: message of 80 bytes from rank 1 (tag 8) is longer than the receive buffer (40 bytes)",
		"bcast truncate: MPI_Bcast: MPI_ERR_TRUNCATE: message of 80 bytes from rank 0 is longer than the receive buffer (40 bytes)",
		"send bad rank: MPI_Send: MPI_ERR_RANK: dest 5 is out of range [0, 2) of MPI_COMM_WORLD.split",
		"send bad tag: MPI_Send: MPI_ERR_TAG: tag -3 is outside [0, 2147483647]",
		"recv bad tag: MPI_Recv: MPI_ERR_TAG: tag 2147483648 is outside [0, 2147483647]",
		"bcast bad root: MPI_Bcast: MPI_ERR_ROOT: root 2 is out of range [0, 2) of MPI_COMM_WORLD",
	}
	got := strings.Split(strings.TrimSuffix(res.stdout, "\n"), "\n")
	if res.code != 0 || !slices.Equal(got, want) {
		t.Fatalf("want exit 0 and these lines:\n%s\ngot %v", strings.Join(want, "\n"), res)
	}
}

// Under MPI_ERRORS_ARE_FATAL, set on MPI_COMM_WORLD and inherited by its
// duplicate, an erroneous call ends the job at once with the error, the
// rank and the communicator, while the other ranks wait in a receive.
func TestJobErrorsAreFatal(t *testing.T) {
	res := runJob(t, 3, nil, "fatal")
	want := "rank 2: MPI_Send: MPI_ERR_RANK: dest 99 is out of range [0, 3) of MPI_COMM_WORLD.dup (MPI_ERRORS_ARE_FATAL on MPI_COMM_WORLD.dup)"
	if res.code == 0 || !strings.Contains(res.stderr, want) || strings.Contains(res.stderr, "returned") || res.elapsed > promptly {
		t.Fatalf("want a non-zero exit and %q on stderr, got %v", want, res)
	}
}
