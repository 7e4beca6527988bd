package slurmcluster

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/adimpi/adimpi/internal/testnote"
	"github.com/adimpi/adimpi/internal/testproc"
)

// The tests share one cluster of three hosts (starting one takes a few
// seconds); TestMain tears it down.
var shared struct {
	once sync.Once
	c    *Cluster
	err  error
}

// cluster returns the shared cluster, starting it on first use; without
// root or Slurm the test is skipped loudly (and fails under CI).
func cluster(t *testing.T) *Cluster {
	t.Helper()
	if why := Missing(); why != "" {
		testnote.Skip(t, why)
	}
	shared.once.Do(func() { shared.c, shared.err = Start(Options{Hosts: 3}) })
	if shared.err != nil {
		t.Fatalf("starting the shared Slurm cluster: %v", shared.err)
	}
	return shared.c
}

func TestMain(m *testing.M) {
	code := m.Run()
	for _, d := range programs.dirs {
		os.RemoveAll(d)
	}
	if shared.c != nil {
		if err := shared.c.Close(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

// result is what a command run on a host did.
type result struct {
	stdout, stderr string
	err            error
	elapsed        time.Duration
}

// runOn runs name with args on host h of c, with env added to the
// environment, killed after limit.
func runOn(t *testing.T, c *Cluster, h string, limit time.Duration, env []string, name string, args ...string) result {
	t.Helper()
	cmd := c.Command(h, name, args...)
	cmd.Env = append(cmd.Env, env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	timer := time.AfterFunc(limit, func() { cmd.Process.Kill() })
	err := cmd.Wait()
	if !timer.Stop() {
		t.Fatalf("%s %s: still running after %v; stderr:\n%s", name, strings.Join(args, " "), limit, errb.String())
	}
	return result{out.String(), errb.String(), err, time.Since(start)}
}

// programs are the test's MPI programs, built once: they outlive the test
// that first needs them, and live outside its temporary directory, whose
// path may be long.
var programs = struct {
	sync.Mutex
	bins map[string]string
	dirs []string // removed by TestMain
}{}

// program builds pkg once and returns its binary.
func program(t *testing.T, pkg string) string {
	t.Helper()
	programs.Lock()
	defer programs.Unlock()
	if bin, ok := programs.bins[pkg]; ok {
		return bin
	}
	// The binaries must outlive the first test that builds them and be
	// visible on every host: the shared file system.
	dir, err := os.MkdirTemp("", "slurmprogs-")
	if err != nil {
		t.Fatal(err)
	}
	programs.dirs = append(programs.dirs, dir)
	bin := filepath.Join(dir, filepath.Base(pkg))
	if out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, out)
	}
	if programs.bins == nil {
		programs.bins = map[string]string{}
	}
	programs.bins[pkg] = bin
	return bin
}

// The cluster comes up with every node idle, srun runs a task on each
// host, and after Close no process of the cluster is left and its
// directory is gone.
func TestClusterUpAndDown(t *testing.T) {
	if why := Missing(); why != "" {
		testnote.Skip(t, why)
	}
	c, err := Start(Options{Hosts: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := runOn(t, c, "h1", 30*time.Second, nil, "srun", "-N", "2", "-n", "2", "hostname")
	if r.err != nil {
		t.Fatalf("srun hostname: %v\n%s", r.err, r.stderr)
	}
	got := strings.Fields(r.stdout)
	sort.Strings(got)
	if !slices.Equal(got, []string{"h1", "h2"}) {
		t.Errorf("srun -N 2 hostname printed %q, want h1 and h2", r.stdout)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if pids := processesWith(c.Dir); len(pids) > 0 {
		t.Errorf("processes of the cluster left after Close: %v", pids)
	}
	if _, err := os.Stat(c.Dir); !os.IsNotExist(err) {
		t.Errorf("the cluster's directory %s is still there (%v)", c.Dir, err)
	}
}

// processesWith lists processes whose command line or environment holds s.
func processesWith(s string) []string {
	var found []string
	for _, p := range testproc.Find(func(p testproc.Proc) bool { return p.Mentions(s) }) {
		found = append(found, fmt.Sprintf("%d %s", p.PID, p.Cmdline()))
	}
	return found
}

// probeLine is one rank's line of testdata/slurmprobe.
var probeLine = regexp.MustCompile(`^rank (\d+) size (\d+) host (\S+) slurm-procid (\d+) slurm-node (\S+) local (\d+)/(\d+) sum (\d+) token (\d+) device (\S+)$`)

// checkProbe checks slurmprobe's output for np ranks: every rank reports
// once, on the node Slurm put it on, running device dev; the ring and the
// Allreduce worked; and
// each rank's shared-memory communicator holds exactly the ranks Slurm put
// on its node, in world order. It returns each rank's host.
func checkProbe(t *testing.T, out string, np int, dev string) []string {
	t.Helper()
	hosts := make([]string, np)
	type line struct{ local, localSize int }
	lines := make([]*line, np)
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		m := probeLine.FindStringSubmatch(l)
		if m == nil {
			t.Errorf("unexpected output line %q", l)
			continue
		}
		n := func(i int) int { v, _ := strconv.Atoi(m[i]); return v }
		r := n(1)
		if r >= np || lines[r] != nil {
			t.Errorf("rank %d reported twice or out of range: %q", r, l)
			continue
		}
		if n(2) != np || n(4) != r || m[3] != m[5] || n(8) != np*(np-1)/2 || n(9) != np*(np-1)/2+np || m[10] != dev {
			t.Errorf("rank %d: %q: want size %d, SLURM_PROCID %d, the host Slurm gives, sum %d, token %d, device %s",
				r, l, np, r, np*(np-1)/2, np*(np-1)/2+np, dev)
		}
		hosts[r] = m[3]
		lines[r] = &line{n(6), n(7)}
	}
	for r, l := range lines {
		if l == nil {
			t.Errorf("rank %d printed nothing", r)
			continue
		}
		var same []int
		for p, h := range hosts {
			if h == hosts[r] {
				same = append(same, p)
			}
		}
		if want := slices.Index(same, r); l.local != want || l.localSize != len(same) {
			t.Errorf("rank %d on %s: shared-memory communicator rank %d of %d, want %d of %d (ranks %v share the node)",
				r, hosts[r], l.local, l.localSize, want, len(same), same)
		}
	}
	return hosts
}

// srun --mpi=pmi2 starts adimpi ranks on three hosts: they wire up through
// PMI-2, talk across hosts, and the core's host map (SplitType shared,
// ProcessorName) is Slurm's placement, block and cyclic.
func TestSrunPMI2(t *testing.T) {
	c := cluster(t)
	prog := program(t, "./testdata/slurmprobe")
	for _, tc := range []struct {
		args []string
		want []string // each rank's host, nil: whatever Slurm chose
		env  []string
	}{
		// ADIMPI_PMI_DEBUG shows that the ranks speak PMI-2 (Slurm's
		// plugin would serve PMI-1 as well).
		{[]string{"-N", "3", "-n", "6"}, nil, []string{"ADIMPI_PMI_DEBUG=1"}},
		{[]string{"-N", "3", "-n", "6", "--ntasks-per-node=2"}, []string{"h1", "h1", "h2", "h2", "h3", "h3"}, nil},
		{[]string{"-N", "3", "-n", "6", "--ntasks-per-node=2", "--distribution=cyclic"}, []string{"h1", "h2", "h3", "h1", "h2", "h3"}, nil},
		// Every device, chosen by ADIMPI_DEVICE as srun passes the
		// environment on.
		{[]string{"-N", "3", "-n", "6", "--ntasks-per-node=2"}, []string{"h1", "h1", "h2", "h2", "h3", "h3"}, []string{"ADIMPI_DEVICE=fm"}},
		{[]string{"-N", "3", "-n", "6", "--ntasks-per-node=2"}, []string{"h1", "h1", "h2", "h2", "h3", "h3"}, []string{"ADIMPI_DEVICE=via"}},
		{[]string{"-N", "3", "-n", "6", "--ntasks-per-node=2"}, []string{"h1", "h1", "h2", "h2", "h3", "h3"}, []string{"ADIMPI_DEVICE=bip"}},
	} {
		t.Run(strings.Join(append(tc.args, tc.env...), " "), func(t *testing.T) {
			args := append(append([]string{"--mpi=pmi2"}, tc.args...), prog)
			r := runOn(t, c, "h1", 60*time.Second, tc.env, "srun", args...)
			if r.err != nil {
				t.Fatalf("srun %s: %v\n%s", strings.Join(args, " "), r.err, r.stderr)
			}
			dev := "netvm"
			for _, kv := range tc.env {
				if d, ok := strings.CutPrefix(kv, "ADIMPI_DEVICE="); ok {
					dev = d
				}
			}
			hosts := checkProbe(t, r.stdout, 6, dev)
			if slices.Contains(tc.env, "ADIMPI_PMI_DEBUG=1") {
				for _, want := range []string{"cmd=fullinit;pmijobid=", "cmd=kvs-fence;", "cmd=kvs-get-response;rc=0;found=TRUE;", "cmd=finalize-response;rc=0;"} {
					if !strings.Contains(r.stderr, want) {
						t.Errorf("the PMI traffic the ranks logged lacks %q:\n%s", want, r.stderr)
					}
				}
			}
			if tc.want != nil && !slices.Equal(hosts, tc.want) {
				t.Errorf("ranks ran on %v, want %v", hosts, tc.want)
			}
			if distinct := len(slices.Compact(slices.Sorted(slices.Values(hosts)))); distinct != 3 {
				t.Errorf("ranks ran on %d hosts (%v), want 3", distinct, hosts)
			}
			t.Logf("srun %s: %v", strings.Join(tc.args, " "), r.elapsed)
		})
	}
}

// sbatch of a script that runs srun: the batch job's srun starts the ranks
// on the three nodes of the allocation.
func TestSbatch(t *testing.T) {
	c := cluster(t)
	prog := program(t, "./testdata/slurmprobe")
	dir, err := os.MkdirTemp("", "sbatch-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	script := filepath.Join(dir, "job.sh")
	out := filepath.Join(dir, "job.out")
	body := fmt.Sprintf("#!/bin/sh\n#SBATCH --nodes=3\n#SBATCH --ntasks=6\n#SBATCH --output=%s\nsrun --mpi=pmi2 %s\n", out, prog)
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	r := runOn(t, c, "h1", 60*time.Second, nil, "sbatch", "--wait", "--chdir="+dir, script)
	b, _ := os.ReadFile(out)
	if r.err != nil {
		t.Fatalf("sbatch --wait: %v\n%s%s\njob output:\n%s", r.err, r.stdout, r.stderr, b)
	}
	checkProbe(t, string(b), 6, "netvm")
}

// A rank that calls MPI_Abort ends the whole step: srun exits non-zero,
// the aborting rank's message is on standard error, and no rank is left.
func TestSrunAbort(t *testing.T) {
	c := cluster(t)
	prog := program(t, "./testdata/slurmprobe")
	r := runOn(t, c, "h1", 60*time.Second, nil, "srun", "--mpi=pmi2", "-N", "3", "-n", "6", "--ntasks-per-node=2", prog, "abort")
	if r.err == nil {
		t.Fatalf("srun of an aborting job exited 0; stderr:\n%s", r.stderr)
	}
	const want = "adimpi: rank 1 aborts the job (exit code 7): MPI_Abort(MPI_COMM_WORLD, 7) called by rank 1"
	if !strings.Contains(r.stderr, want) {
		t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
	}
	if left := processesWith(prog); len(left) > 0 {
		t.Errorf("ranks left after srun returned: %v", left)
	}
	t.Logf("abort: srun %v after %v; stderr:\n%s", r.err, r.elapsed, r.stderr)
}

// The conformance programs pass under srun on three hosts: p2p (every
// check but exit-early, which ends its job on purpose) and collectives.
func TestSrunConformance(t *testing.T) {
	c := cluster(t)
	for _, tc := range []struct {
		pkg  string
		args []string
	}{
		{"github.com/adimpi/adimpi/conformance/p2p", nil},
		{"github.com/adimpi/adimpi/conformance/collectives", []string{"all"}},
	} {
		name := filepath.Base(tc.pkg)
		t.Run(name, func(t *testing.T) {
			prog := program(t, tc.pkg)
			checks := tc.args
			if checks == nil {
				out, err := exec.CommandContext(context.Background(), prog, "-list").Output()
				if err != nil {
					t.Fatalf("%s -list: %v", name, err)
				}
				for _, ch := range strings.Fields(string(out)) {
					if ch != "exit-early" {
						checks = append(checks, ch)
					}
				}
			}
			args := append([]string{"--mpi=pmi2", "-N", "3", "-n", "6", "--ntasks-per-node=2", prog}, checks...)
			r := runOn(t, c, "h1", 120*time.Second, nil, "srun", args...)
			if r.err != nil {
				t.Fatalf("srun %s: %v\nstdout:\n%s\nstderr:\n%s", name, r.err, r.stdout, r.stderr)
			}
			lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
			passed := 0
			for _, l := range lines {
				switch {
				case strings.HasPrefix(l, "PASS "):
					passed++
				case strings.HasPrefix(l, "UNSUPPORTED "):
				default:
					t.Errorf("%s: unexpected line %q", name, l)
				}
			}
			if passed == 0 {
				t.Errorf("%s: no check passed:\n%s", name, r.stdout)
			}
			t.Logf("%s: %d checks passed in %v", name, passed, r.elapsed)
		})
	}
}

// A rank killed on a remote node ends the whole step: the ranks that
// waited for it fail naming it (and its node, for those on other nodes),
// srun names the task and node, exits non-zero, and no rank is left.
func TestSrunRankKilled(t *testing.T) {
	c := cluster(t)
	prog := program(t, "./testdata/slurmprobe")
	cmd := c.Command("h1", "srun", "--mpi=pmi2", "-N", "3", "-n", "6", "--ntasks-per-node=2", prog, "block")
	out, errb := testproc.StartPiped(t, cmd)
	timer := time.AfterFunc(60*time.Second, func() { cmd.Process.Kill() })
	defer timer.Stop()
	line, _ := out.ReadString('\n')
	if line != "blocking\n" {
		cmd.Wait()
		t.Fatalf("srun printed %q, want blocking; stderr:\n%s", line, errb.String())
	}
	victim := testproc.Rank(prog, "SLURM_PROCID=5")
	if victim == 0 {
		t.Fatalf("no process of rank 5 found")
	}
	if err := syscall.Kill(victim, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	err := cmd.Wait()
	if !timer.Stop() {
		t.Fatalf("srun still ran 60 s after it started; stderr:\n%s", errb.String())
	}
	if err == nil {
		t.Errorf("srun exited 0 after rank 5 was killed")
	}
	for _, want := range []string{"h3: task 5: Killed", "rank 5 "} {
		if !strings.Contains(errb.String(), want) {
			t.Errorf("stderr lacks %q", want)
		}
	}
	if left := processesWith(prog); len(left) > 0 {
		t.Errorf("ranks left after srun returned: %v", left)
	}
	t.Logf("srun ended %v after the kill (%v); stderr:\n%s", time.Since(killed).Round(time.Millisecond), err, errb.String())
}

// MPI_Comm_spawn under srun --mpi=pmi2: the ranks' PMI-2 spawn makes
// Slurm's pmi2 plugin start the children with a new srun inside the
// allocation (which must have room for them), Info "host" becoming srun's
// --nodelist; the children learn their parents' port from their key-value
// space, and the intercommunicator carries point-to-point, collectives and
// a merge between the nodes (dynprog checks each).
func TestSrunSpawn(t *testing.T) {
	c := cluster(t)
	prog := program(t, "../../mpi/testdata/dynprog")
	r := runOn(t, c, "h1", 90*time.Second, []string{"DYNPROG_SPAWN_HOST=h2"},
		"salloc", "-N", "3", "-n", "6", "srun", "--mpi=pmi2", "-N", "1", "-n", "2", "--nodelist=h1", prog, "spawn", "2")
	if r.err != nil {
		t.Fatalf("salloc srun dynprog spawn 2: %v\nstdout:\n%s\nstderr:\n%s", r.err, r.stdout, r.stderr)
	}
	out := "\n" + r.stdout
	for _, want := range []string{"parent 0: 2 children ok", "parent 1: 2 children ok", "child 0 of 2 (child): ok", "child 1 of 2 (child): ok", "child 0 runs on h2"} {
		if !strings.Contains(out, "\n"+want+"\n") {
			t.Errorf("no line %q\nstdout:\n%s\nstderr:\n%s", want, r.stdout, r.stderr)
		}
	}
	if left := processesWith(prog); len(left) > 0 {
		t.Errorf("processes left after salloc returned: %v", left)
	}
	t.Logf("spawn under srun: %v", r.elapsed)
}

// MPI_Comm_spawn of a missing program under srun --mpi=pmi2. With the
// children placed by Slurm, its pmi2 plugin never answers the spawn (the
// children's step stays pending), so the parents used to wait for ever:
// now they give up after the spawn's Info "timeout" (3 s) with
// MPI_ERR_SPAWN on every rank, and since the root's PMI connection cannot
// be read again, its MPI_Finalize ends the job with an abort instead of
// leaving the other ranks in their fence. For this node (Info "host") the
// root finds the program missing before asking and the job goes on.
func TestSrunSpawnMissing(t *testing.T) {
	c := cluster(t)
	prog := program(t, "../../mpi/testdata/dynprog")
	const failed = "spawn failed as expected: MPI_Comm_spawn: MPI_ERR_SPAWN: child 0: command 0 (/nonexistent/dynprog-missing"
	for _, tc := range []struct {
		host, want string
		aborts     bool
	}{
		{"", "within 3s", true},
		{"h1", "no executable file /nonexistent/dynprog-missing on host h1", false},
	} {
		r := runOn(t, c, "h1", 60*time.Second, []string{"DYNPROG_SPAWN_HOST=" + tc.host, "DYNPROG_SPAWN_TIMEOUT=3"},
			"salloc", "-N", "3", "-n", "6", "srun", "--mpi=pmi2", "-N", "1", "-n", "2", "--nodelist=h1", prog, "missing")
		switch {
		case tc.aborts && r.err == nil:
			t.Errorf("host %s: the job ended with status 0, want the root's abort\nstdout:\n%s\nstderr:\n%s", tc.host, r.stdout, r.stderr)
		case tc.aborts && !strings.Contains(r.stderr, "aborts the job"):
			t.Errorf("host %s: no abort message (after %v: %v)\nstdout:\n%s\nstderr:\n%s", tc.host, r.elapsed, r.err, r.stdout, r.stderr)
		case !tc.aborts && r.err != nil:
			t.Errorf("host %s: salloc srun dynprog missing (after %v): %v\nstdout:\n%s\nstderr:\n%s", tc.host, r.elapsed, r.err, r.stdout, r.stderr)
			continue
		}
		if !strings.Contains(r.stdout, failed) || !strings.Contains(r.stdout, tc.want) {
			t.Errorf("host %s: want a line with %q and %q\nstdout:\n%s\nstderr:\n%s", tc.host, failed, tc.want, r.stdout, r.stderr)
		}
		if left := processesWith(prog); len(left) > 0 {
			t.Errorf("host %s: processes left after salloc returned: %v", tc.host, left)
		}
	}
}
