package mpi_test

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/adimpi/adimpi/adi"
	"github.com/adimpi/adimpi/internal/testbuild"
)

// The tests in this file start real jobs through cmd/mpirun running
// testdata/dynprog: spawned children, jobs started by separate mpiruns
// meeting through ports and the name service, and CommJoin, on every
// device. dynprog checks every exchange itself and prints one line per
// process that passed.

// dynLimit is how long one dynamic-process job may run.
const dynLimit = 60 * time.Second

func dynBinaries(t *testing.T) (mpirun, prog string) {
	t.Helper()
	b := testbuild.Programs(t, "../cmd/mpirun", "./testdata/dynprog")
	return b["mpirun"], b["dynprog"]
}

// dynRun runs mpirun with args and env and returns its output and status.
func dynRun(t *testing.T, mpirun string, env []string, args ...string) jobResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), dynLimit)
	defer cancel()
	cmd := exec.CommandContext(ctx, mpirun, args...)
	cmd.Env = append(dynEnv(), env...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err := cmd.Run()
	res := jobResult{stdout: out.String(), stderr: errb.String(), elapsed: time.Since(start)}
	if ctx.Err() != nil {
		t.Fatalf("mpirun %v hung (killed after %v):\n%v", args, dynLimit, res)
	}
	if ee, ok := err.(*exec.ExitError); ok {
		res.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("mpirun %v: %v", args, err)
	}
	return res
}

// dynEnv is the environment of the jobs: without an inherited name
// service directory or device.
func dynEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ADIMPI_NAMESERV_DIR=") && !strings.HasPrefix(kv, "ADIMPI_DEVICE") {
			env = append(env, kv)
		}
	}
	return env
}

// wantLines fails t unless out has every line of want (in any order).
func wantLines(t *testing.T, res jobResult, want ...string) {
	t.Helper()
	have := map[string]bool{}
	for _, l := range strings.Split(res.stdout, "\n") {
		have[strings.TrimSpace(l)] = true
	}
	for _, w := range want {
		if !have[w] {
			t.Fatalf("missing line %q:\n%v", w, res)
		}
	}
}

// TestSpawn spawns children from every rank of a world of 2, on every
// device: point-to-point both ways, intercommunicator Bcast and
// Allreduce, IntercommMerge, disconnect; the children's output comes out
// of the parents' mpirun, labelled [spawn.rank].
func TestSpawn(t *testing.T) {
	mpirun, prog := dynBinaries(t)
	for _, dev := range adi.Devices() {
		t.Run(dev, func(t *testing.T) {
			res := dynRun(t, mpirun, nil, "-device", dev, "-np", "2", "-l", prog, "spawn", "2")
			if res.code != 0 {
				t.Fatalf("exit %d:\n%v", res.code, res)
			}
			wantLines(t, res, "[0] parent 0: 2 children ok", "[1] parent 1: 2 children ok",
				"[1.0] child 0 of 2 (child): ok", "[1.1] child 1 of 2 (child): ok")
		})
	}
}

// TestSpawnFromOneRank: rank 0 of 2 spawns on MPI_COMM_SELF; rank 1
// takes no part.
func TestSpawnFromOneRank(t *testing.T) {
	mpirun, prog := dynBinaries(t)
	res := dynRun(t, mpirun, nil, "-np", "2", "-l", prog, "selfspawn")
	if res.code != 0 {
		t.Fatalf("exit %d:\n%v", res.code, res)
	}
	wantLines(t, res, "[0] parent 0: 2 children ok", "[1.0] child 0 of 2 (child): ok", "[1.1] child 1 of 2 (child): ok")
}

// TestSpawnNested: a child spawns a grandchild; a spawned job's PMI
// server serves spawn too.
func TestSpawnNested(t *testing.T) {
	mpirun, prog := dynBinaries(t)
	res := dynRun(t, mpirun, nil, "-np", "2", "-l", prog, "nested")
	if res.code != 0 {
		t.Fatalf("exit %d:\n%v", res.code, res)
	}
	wantLines(t, res, "[0] parent 0: 1 children ok", "[1.0] child 0 of 1 (nested-child): ok",
		"[1.0] parent 0: 1 children ok", "[2.0] child 0 of 1 (child): ok")
}

// TestSpawnMultiple: two commands started as one job, their MPI_APPNUM
// their command's index; MPI_UNIVERSE_SIZE is mpirun's -usize.
func TestSpawnMultiple(t *testing.T) {
	mpirun, prog := dynBinaries(t)
	res := dynRun(t, mpirun, nil, "-usize", "8", "-np", "2", "-l", prog, "multiple")
	if res.code != 0 {
		t.Fatalf("exit %d:\n%v", res.code, res)
	}
	wantLines(t, res, "[0] parent 0: 3 children ok", "[1.0] child 0 of 3 (app0): ok",
		"[1.1] child 1 of 3 (app1): ok", "[1.2] child 2 of 3 (app1): ok")
}

// TestSpawnMissing: spawning a program that does not exist fails with
// MPI_ERR_SPAWN for each child, and the parents' job goes on.
func TestSpawnMissing(t *testing.T) {
	mpirun, prog := dynBinaries(t)
	res := dynRun(t, mpirun, nil, "-np", "2", prog, "missing")
	if res.code != 0 || !strings.Contains(res.stdout, "spawn failed as expected: MPI_Comm_spawn: MPI_ERR_SPAWN: child 0: command 0 (/nonexistent/dynprog-missing)") {
		t.Fatalf("exit %d:\n%v", res.code, res)
	}
}

// TestSpawnChildDeath: a child that exits with status 3 stops the whole
// job, whose parents wait on it, with a message naming the child.
func TestSpawnChildDeath(t *testing.T) {
	mpirun, prog := dynBinaries(t)
	res := dynRun(t, mpirun, nil, "-np", "2", prog, "childdie")
	if res.code != 3 || !strings.Contains(res.stderr, "mpirun: spawned rank ") ||
		!strings.Contains(res.stderr, "of spawn 1 ("+prog) || !strings.Contains(res.stderr, "exited with status 3 before MPI_Finalize; stopping the job") {
		t.Fatalf("want exit 3 and mpirun naming the spawned rank:\n%v", res)
	}
	if res.elapsed > promptly {
		t.Fatalf("the job took %v to stop", res.elapsed)
	}
}

// TestSpawnTimeout: under mpirun -timeout a spawned child that waits
// says where, like the world's ranks, and the job stops.
func TestSpawnTimeout(t *testing.T) {
	mpirun, prog := dynBinaries(t)
	res := dynRun(t, mpirun, nil, "-timeout", "3s", "-np", "1", prog, "childhang")
	if res.code == 0 || !strings.Contains(res.stderr, "job timed out") || strings.Contains(res.stderr, "did not say where it waits") ||
		strings.Count(res.stderr, "adimpi: rank 0: waiting") != 2 {
		t.Fatalf("want a timeout with a wait report from the parent and from the child:\n%v", res)
	}
}

// TestNameServiceMpirun: a port published in mpirun's name service is
// found by a spawned job, which connects to it.
func TestNameServiceMpirun(t *testing.T) {
	mpirun, prog := dynBinaries(t)
	res := dynRun(t, mpirun, nil, "-np", "2", "-l", prog, "pubspawn")
	if res.code != 0 {
		t.Fatalf("exit %d:\n%v", res.code, res)
	}
	wantLines(t, res, "[0] parent 0: 2 children ok", "[1.0] child 0 of 2 (lookup): ok", "[1.1] child 1 of 2 (lookup): ok")
}

// server is a job running in the background.
type server struct {
	cmd    *exec.Cmd
	out    strings.Builder // stdout, complete once wait returns
	errb   strings.Builder
	copied chan struct{}
}

// wait waits for the job and returns its error and output.
func (s *server) wait() (string, error) {
	<-s.copied
	err := s.cmd.Wait()
	return "stdout:\n" + s.out.String() + "stderr:\n" + s.errb.String(), err
}

// startServer starts a job in the background and returns it once a line
// of its standard output starts with ready (that line's rest is returned).
func startServer(t *testing.T, mpirun string, env []string, ready string, args ...string) (*server, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), dynLimit)
	t.Cleanup(cancel)
	s := &server{cmd: exec.CommandContext(ctx, mpirun, args...), copied: make(chan struct{})}
	s.cmd.Env = append(dynEnv(), env...)
	s.cmd.Stderr = &s.errb
	stdout, err := s.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(stdout)
	for {
		line, err := br.ReadString('\n')
		s.out.WriteString(line)
		if err != nil {
			close(s.copied)
			out, werr := s.wait()
			t.Fatalf("server %v ended (%v) before saying %q:\n%s", args, werr, ready, out)
		}
		if after, ok := strings.CutPrefix(line, ready); ok {
			go func() {
				defer close(s.copied)
				_, _ = io.Copy(&s.out, br)
			}()
			return s, strings.TrimSpace(after)
		}
	}
}

// TestConnectAccept: two jobs started by separate mpiruns meet through a
// port published in a name service directory (ADIMPI_NAMESERV_DIR), each
// on its own device: the client uses the next device of the list.
func TestConnectAccept(t *testing.T) {
	mpirun, prog := dynBinaries(t)
	devs := adi.Devices()
	for i, dev := range devs {
		other := devs[(i+1)%len(devs)]
		t.Run(dev+"-"+other, func(t *testing.T) {
			env := []string{"ADIMPI_NAMESERV_DIR=" + t.TempDir()}
			srv, _ := startServer(t, mpirun, env, "published", "-device", dev, "-np", "2", prog, "server", "svc")
			res := dynRun(t, mpirun, env, "-device", other, "-np", "3", prog, "client", "svc")
			if srvOut, err := srv.wait(); err != nil || res.code != 0 {
				t.Fatalf("client exit %d:\n%v\nserver: %v\n%s", res.code, res, err, srvOut)
			}
			wantLines(t, res, "client 0: 1 connections ok", "client 1: 1 connections ok", "client 2: 1 connections ok")
		})
	}
}

// TestReconnect: a client job connects to a server job and disconnects 100
// times; the inter-job channel's connections, peers and queues must not
// grow (dynprog compares mpi.Counters after each round with the first).
func TestReconnect(t *testing.T) {
	mpirun, prog := dynBinaries(t)
	env := []string{"ADIMPI_NAMESERV_DIR=" + t.TempDir()}
	srv, _ := startServer(t, mpirun, env, "published", "-np", "2", prog, "reconnect", "svc", "100")
	res := dynRun(t, mpirun, env, "-device", "fm", "-np", "2", prog, "reclient", "svc", "100")
	srvOut, err := srv.wait()
	if err != nil || res.code != 0 {
		t.Fatalf("client exit %d:\n%v\nserver: %v\n%s", res.code, res, err, srvOut)
	}
	wantLines(t, res, "client 0: 100 connections ok", "client 1: 100 connections ok")
	if !strings.Contains(srvOut, "server 0: 100 connections ok") {
		t.Fatalf("server:\n%s", srvOut)
	}
}

// TestCommJoin: two single-process jobs of separate mpiruns, on every
// device, join over a TCP connection one of them accepted.
func TestCommJoin(t *testing.T) {
	mpirun, prog := dynBinaries(t)
	for _, dev := range adi.Devices() {
		t.Run(dev, func(t *testing.T) {
			srv, addr := startServer(t, mpirun, nil, "listening", "-device", dev, "-np", "1", prog, "joinserver")
			res := dynRun(t, mpirun, nil, "-device", dev, "-np", "1", prog, "joinclient", addr)
			if srvOut, err := srv.wait(); err != nil || res.code != 0 {
				t.Fatalf("client exit %d:\n%v\nserver: %v\n%s", res.code, res, err, srvOut)
			}
			wantLines(t, res, "joined 2 ok")
		})
	}
}
