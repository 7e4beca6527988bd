package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/adimpi/adimpi/internal/netcluster"
	"github.com/adimpi/adimpi/internal/testnote"
)

// The tests of the ssh launcher run mpirun on h1 of a simulated cluster
// whose hosts run sshd (netcluster's Options.SSH), as a user logged in to
// a cluster's node would: ranks on h1 start as usual, the others through
// ssh. "ssh" is the cluster's wrapper (ssh -F with the cluster's key and
// known hosts), first in PATH: mpirun runs it as it would the real ssh.

// startSSHCluster starts n hosts running sshd. Without root, sshd or ssh
// the test is skipped loudly (it fails under CI, which installs them).
func startSSHCluster(t *testing.T, n int) *netcluster.Cluster {
	t.Helper()
	if os.Geteuid() != 0 {
		testnote.Skip(t, fmt.Sprintf("cmd/mpirun: the ssh launcher tests need root to create namespaces (running as uid %d)", os.Geteuid()))
	}
	if err := netcluster.CheckSSH(); err != nil && os.Getenv("CI") == "" {
		testnote.Skip(t, fmt.Sprintf("cmd/mpirun: %v", err))
	}
	return netcluster.StartSSHT(t, n)
}

// sshEnv is the environment of mpirun on a host: the test's, with the
// cluster's ssh wrapper first in PATH.
func sshEnv(c *netcluster.Cluster, extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PATH=") {
			env = append(env, kv)
		}
	}
	return append(append(env, "PATH="+c.SSHDir()+":"+os.Getenv("PATH")), extra...)
}

// mpirunOn is the command that runs mpirun with args on host, killed
// when ctx ends.
func mpirunOn(ctx context.Context, c *netcluster.Cluster, host string, args ...string) *exec.Cmd {
	nc := c.Command(host, mpirunBin, args...)
	cmd := exec.CommandContext(ctx, nc.Path, nc.Args[1:]...)
	cmd.Env = sshEnv(c)
	return cmd
}

// runOn runs mpirun with args on h1 and waits for it, as run does here.
func runOn(t *testing.T, c *netcluster.Cluster, stdin io.Reader, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := mpirunOn(ctx, c, "h1", args...)
	cmd.Stdin = stdin
	return finish(t, ctx, cmd, fmt.Sprintf("mpirun %q on h1", args), "30s")
}

// With -hosts naming other hosts and no launcher flag, ranks start
// through ssh: placement, labels, the job secret, the hosts every rank
// learns through PMI; the environment, working directory, arguments and
// rank 0's standard input reach a rank on another host; an abort, an early
// exit and an MPI program's failure there end the job naming rank and host.
func TestSSHLaunch(t *testing.T) {
	c := startSSHCluster(t, 3)
	hostfile := filepath.Join(t.TempDir(), "hosts")
	if err := os.WriteFile(hostfile, []byte("h1:1\nh2 slots=3 max_slots=4\n# h4\nh3:2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-hosts", "h1,h2,h3", "-np", "6"}, "h1 h1 h2 h2 h3 h3"},
		{[]string{"-launcher", "ssh", "-host", "h2,h3", "-np", "3", "-map-by", "node"}, "h2 h3 h2"},
		{[]string{"-f", hostfile}, "h1 h2 h2 h2 h3 h3"},
		{[]string{"-hostfile", hostfile, "-rr"}, "h1 h2 h3 h2 h3 h2"},
	} {
		name := strings.Join(tc.args, " ")
		res := runOn(t, c, nil, append(append([]string{"-l"}, tc.args...), hostprobeBin)...)
		want := strings.Fields(tc.want)
		if res.code != 0 {
			t.Errorf("%s: %v", name, res)
			continue
		}
		got := make([]string, len(want))
		secrets := map[string]bool{}
		for _, l := range lines(res.stdout) {
			m := probeLine.FindStringSubmatch(l)
			r := len(want)
			if m != nil {
				r, _ = strconv.Atoi(m[3])
			}
			if m == nil || r >= len(want) || m[1] != m[3] || m[2] != m[4] || m[7] != strings.Join(want, ",") {
				t.Errorf("%s: unexpected line %q (want ranks on %s)", name, l, strings.Join(want, ","))
				continue
			}
			got[r] = m[4]
			secrets[m[6]] = true
		}
		if !slices.Equal(got, want) || len(secrets) != 1 {
			t.Errorf("%s: ranks ran on %v, want %v, with one secret (got %d)\n%v", name, got, want, len(secrets), res)
		}
	}

	wdir := t.TempDir()
	res := runOn(t, c, strings.NewReader("hello\n"), "-hosts", "h2,h3", "-np", "2", "-l", "-genv", "MPIRUN_TEST_A", "a 1",
		"-x", "MPIRUN_TEST_B=b1", "-wdir", wdir, rankprogBin, "env", "x y")
	if res.code != 0 {
		t.Fatal(res)
	}
	wantLines(t, "env", res, "[1@h3] rank 1 MPIRUN_TEST_A=a 1", "[1@h3] rank 1 MPIRUN_TEST_B=b1", "[1@h3] rank 1 PMI_SIZE=2",
		"[1@h3] rank 1 cwd="+wdir, `[1@h3] rank 1 args=["x y"]`, "[0@h2] rank 0 PMI_RANK=0")
	res = runOn(t, c, strings.NewReader("hello\n"), "-hosts", "h2,h3", "-np", "2", rankprogBin, "stdin")
	wantLines(t, "stdin", res, `rank 0 stdin "hello"`, `rank 1 stdin ""`)

	res = runOn(t, c, nil, "-hosts", "h1,h2,h3", "-np", "3", rankprogBin, "abort", "3")
	if res.code != 3 || !regexp.MustCompile(`mpirun: rank 2 on h3 \(launcher pid \d+\) called MPI_Abort with code 3: rankprog gave up; stopping the job`).MatchString(res.stderr) {
		t.Errorf("abort: want exit 3 naming rank 2 on h3: %v", res)
	}
	res = runOn(t, c, nil, "-hosts", "h1,h2,h3", "-np", "3", rankprogBin, "fail-early", "5")
	if res.code != 5 || !strings.Contains(res.stderr, "mpirun: rank 2 on h3 (launcher pid ") || !strings.Contains(res.stderr, "exited with status 5") {
		t.Errorf("fail-early: want exit 5 naming rank 2 on h3: %v", res)
	}
	// MPI programs across the three hosts: a token passed around a ring
	// whose every hop crosses hosts; then one whose MPI_Init fails.
	ring := filepath.Join(t.TempDir(), "ring")
	if out, err := exec.Command("go", "build", "-o", ring, "../../examples/ring").CombinedOutput(); err != nil {
		t.Fatalf("go build examples/ring: %v\n%s", err, out)
	}
	res = runOn(t, c, nil, "-hosts", "h1,h2,h3", "-np", "6", "-map-by", "node", ring)
	if res.code != 0 || !strings.Contains(res.stdout, "ring: 6 ranks on device netvm, 3 laps, token 48 (want 48)") {
		t.Errorf("MPI across hosts over ssh: %v", res)
	}
	res = runOn(t, c, nil, "-hosts", "h1,h2,h3", "-np", "3", "-device-opt", "ring=1", mpiprogBin, "init")
	if res.code == 0 || !regexp.MustCompile(`mpirun: rank \d on h\d \((launcher )?pid \d+\) .*stopping the job`).MatchString(res.stderr) ||
		!strings.Contains(res.stderr, "MPI_Init") {
		t.Errorf("want a non-zero exit naming the failed rank and its host, after MPI_Init's error: %v", res)
	}
	noProcessesLeft(t, rankprogBin)
	noProcessesLeft(t, mpiprogBin)
	noProcessesLeft(t, hostprobeBin)
	noProcessesLeft(t, sshProxyFlag)
}

// A program missing on one host, and a host ssh cannot reach, stop the job
// before any rank starts, with one line naming the host (and the path).
func TestSSHMissingBinaryAndHost(t *testing.T) {
	c := startSSHCluster(t, 3)
	// /dev/shm is private to each host: the program is on h1 and h2 only.
	dir := "/dev/shm/mpirun-ssh-test"
	prog := filepath.Join(dir, "hostprobe")
	for _, h := range []string{"h1", "h2"} {
		if out, err := c.Command(h, "sh", "-c", "mkdir -p "+dir+" && cp "+hostprobeBin+" "+prog).CombinedOutput(); err != nil {
			t.Fatalf("copying hostprobe to %s on %s: %v: %s", prog, h, err, out)
		}
	}
	res := runOn(t, c, nil, "-hosts", "h1,h2,h3", "-np", "3", prog)
	want := "mpirun: h3 has no executable program " + prog + " (the program must be at the same path on every host); not starting the job\n"
	if res.code != exitNotFound || res.stderr != want || res.stdout != "" {
		t.Errorf("want exit %d, no output and only %q: %v", exitNotFound, want, res)
	}
	res = runOn(t, c, nil, "-hosts", "h1,h2,h3", "-np", "3", "-wdir", dir, hostprobeBin)
	wantDir := "mpirun: h3 has no directory " + dir + " (the ranks' working directory, -wdir or mpirun's, must exist on every host); not starting the job\n"
	if res.code != exitNotFound || res.stderr != wantDir || res.stdout != "" {
		t.Errorf("want exit %d, no output and only %q: %v", exitNotFound, wantDir, res)
	}
	// The same check through -launcher-exec, with mpirun on this machine
	// (whose /dev/shm gets the program too).
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if out, err := exec.Command("cp", hostprobeBin, prog).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, out)
	}
	res = run(t, nil, nil, "-launcher-exec", netclusterBin+" exec -dir "+c.Dir+" {host} --", "-hosts", "h1,h2,h3", "-np", "3", prog)
	if res.code != exitNotFound || res.stderr != want || res.stdout != "" {
		t.Errorf("-launcher-exec: want exit %d, no output and only %q: %v", exitNotFound, want, res)
	}
	// mpirun itself only on h1: ssh's complaint about h2 is the one line.
	self := filepath.Join(dir, "mpirun")
	if out, err := c.Command("h1", "cp", mpirunBin, self).CombinedOutput(); err != nil {
		t.Fatalf("copying mpirun to %s on h1: %v: %s", self, err, out)
	}
	nc := c.Command("h1", self, "-hosts", "h1,h2", "-np", "2", hostprobeBin)
	nc.Env = sshEnv(c)
	out, err := nc.CombinedOutput()
	if code := nc.ProcessState.ExitCode(); err == nil || code != exitUnreachable || strings.Count(string(out), "\n") != 1 ||
		!regexp.MustCompile(`^mpirun: cannot start ranks on h2 through ssh \(exit status 127\): .*`+regexp.QuoteMeta(self)+`: (No such file or directory|not found) \(mpirun itself, which runs there as the ranks' proxy, must be at the same path on every host\); not starting the job\n$`).Match(out) {
		t.Errorf("mpirun missing on h2: want exit %d and one line saying so: exit %d: %s", exitUnreachable, code, out)
	}
	res = runOn(t, c, nil, "-hosts", "h1,h2,nosuchhost", "-np", "3", hostprobeBin)
	if res.code != exitUnreachable || strings.Count(res.stderr, "\n") != 1 || res.stdout != "" ||
		!strings.HasPrefix(res.stderr, "mpirun: cannot start ranks on nosuchhost through ssh (exit status 255): ssh: Could not resolve hostname nosuchhost") {
		t.Errorf("want exit %d and one line naming nosuchhost: %v", exitUnreachable, res)
	}
	// A host whose cable is out: ssh gives up (after 2 s here), the proxies
	// already waiting on the other hosts leave, nothing starts.
	if err := c.SetLink("h3", false); err != nil {
		t.Fatal(err)
	}
	res = runOn(t, c, nil, "-launcher", "ssh", "-launcher-exec", c.SSHCommand()+" -o ConnectTimeout=2", "-hosts", "h1,h2,h3", "-np", "3", hostprobeBin)
	if res.code != exitUnreachable || strings.Count(res.stderr, "\n") != 1 || res.stdout != "" ||
		!regexp.MustCompile(`^mpirun: cannot start ranks on h3 through ssh \(.*\) \(exit status 255\): ssh: connect to host h3 port 22: .*; not starting the job\n$`).MatchString(res.stderr) {
		t.Errorf("h3 unreachable: want exit %d and one line naming h3: %v", exitUnreachable, res)
	}
	// The same with ssh's 10 s but -timeout 6s: mpirun gives up first
	// (6 s, not less: on a loaded machine h2's login alone may take 3).
	res = runOn(t, c, nil, "-timeout", "6s", "-hosts", "h1,h2,h3", "-np", "3", hostprobeBin)
	if res.code != exitTimeout || res.stderr != "mpirun: cannot start ranks on h3 through ssh: no answer within 6s; not starting the job\n" || res.stdout != "" {
		t.Errorf("h3 unreachable, -timeout 6s: want exit %d and one line naming h3: %v", exitTimeout, res)
	}
	noProcessesLeft(t, hostprobeBin)
	noProcessesLeft(t, sshProxyFlag)
}

// A rank killed on its host ends the job with the signal as its status,
// naming rank and host (the proxy reports the rank's death, which ssh
// would turn into its own status 255); SIGINT to mpirun reaches ranks on
// other hosts through their proxies; -timeout gets their wait reports; a
// killed mpirun leaves nothing behind.
func TestSSHSignalsAndTimeout(t *testing.T) {
	c := startSSHCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	start := func(args ...string) (*exec.Cmd, *bufio.Scanner, *strings.Builder) {
		cmd := mpirunOn(ctx, c, "h1", args...)
		sc, stderr := startPiped(t, cmd)
		return cmd, sc, stderr
	}
	cmd, sc, stderr := start("-hosts", "h1,h2,h3", "-np", "3", hostprobeBin, "block")
	pid := ""
	for n := 0; n < 3 && sc.Scan(); {
		if m := probeLine.FindStringSubmatch(sc.Text()); m != nil {
			n++
			if m[3] == "2" {
				pid = m[5]
			}
		}
	}
	killRank2OnH3(t, c, cmd, sc, stderr, pid)

	// SIGINT, sent to mpirun itself (not to the nsenter that runs it on h1).
	cmd, sc, stderr = start("-hosts", "h2,h3", "-np", "2", hostprobeBin, "block")
	for n := 0; n < 2 && sc.Scan(); {
		if probeLine.MatchString(sc.Text()) {
			n++
		}
	}
	checkSIGINTForwarded(t, findProcess(t, mpirunBin+"\x00-hosts\x00h2,h3"), cmd, sc, stderr)

	res := runOn(t, c, nil, "-hosts", "h2,h3", "-np", "3", "-timeout", "3s", mpiprogBin, "wait")
	checkWaitReports(t, res)

	// mpirun killed outright: its ssh clients die with it, the proxies
	// lose mpirun and kill their ranks.
	cmd, sc, _ = start("-hosts", "h2,h3", "-np", "2", hostprobeBin, "block")
	for n := 0; n < 2 && sc.Scan(); {
		if probeLine.MatchString(sc.Text()) {
			n++
		}
	}
	syscall.Kill(findProcess(t, mpirunBin+"\x00-hosts\x00h2,h3"), syscall.SIGKILL)
	cmd.Wait()
	noProcessesLeft(t, hostprobeBin)
	noProcessesLeft(t, sshProxyFlag)
}

// findProcess returns the PID (in this PID namespace) of the one process
// whose command line starts with prefix (NUL-separated arguments).
func findProcess(t *testing.T, prefix string) int {
	t.Helper()
	dirs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, d := range dirs {
		if b, err := os.ReadFile(d); err == nil && strings.HasPrefix(string(b), prefix) {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(d)))
			return pid
		}
	}
	t.Fatalf("no process runs %q", strings.ReplaceAll(prefix, "\x00", " "))
	return 0
}

// MPI_Comm_spawn with Info "host" naming another host of the job starts
// the children there through the job's launcher: through an ssh proxy of
// their own (mpirun on h1, parents on h1 and h2, children on h3), and
// through -launcher-exec. The children's output comes out of mpirun
// labelled [spawn.rank@host]; the intercommunicator between the hosts
// carries point-to-point, collectives and a merge (dynprog checks each). A
// program missing on the children's host, and a host not of the job, fail
// the spawn with an error per child and the parents' job goes on; a
// child that dies there ends the job, naming it and its host.
func TestSSHSpawn(t *testing.T) {
	c := startSSHCluster(t, 3)
	dynprog := filepath.Join(filepath.Dir(mpirunBin), "dynprog")
	if out, err := exec.Command("go", "build", "-o", dynprog, "../../mpi/testdata/dynprog").CombinedOutput(); err != nil {
		t.Fatalf("go build dynprog: %v\n%s", err, out)
	}
	onH3 := []string{"-hosts", "h1,h2,h3", "-np", "2", "-l", "-genv", "DYNPROG_SPAWN_HOST", "h3"}
	wantSpawn := []string{"[0@h1] parent 0: 2 children ok", "[1@h2] parent 1: 2 children ok",
		"[1.0@h3] child 0 runs on h3", "[1.1@h3] child 1 runs on h3",
		"[1.0@h3] child 0 of 2 (child): ok", "[1.1@h3] child 1 of 2 (child): ok"}
	res := runOn(t, c, nil, append(onH3, dynprog, "spawn", "2")...)
	if res.code != 0 {
		t.Fatalf("spawn on h3 through ssh: %v", res)
	}
	wantLines(t, "spawn on h3 through ssh", res, wantSpawn...)

	res = run(t, nil, nil, append([]string{"-launcher-exec", netclusterBin + " exec -dir " + c.Dir + " {host} --"}, append(onH3, dynprog, "spawn", "2")...)...)
	if res.code != 0 {
		t.Fatalf("spawn on h3 through -launcher-exec: %v", res)
	}
	wantLines(t, "spawn on h3 through -launcher-exec", res, wantSpawn...)

	// /dev/shm is private to each host: the program is on h1 only.
	dir := "/dev/shm/mpirun-spawn-test"
	prog := filepath.Join(dir, "dynprog")
	if out, err := c.Command("h1", "sh", "-c", "mkdir -p "+dir+" && cp "+dynprog+" "+prog).CombinedOutput(); err != nil {
		t.Fatalf("copying dynprog to %s on h1: %v: %s", prog, err, out)
	}
	res = runOn(t, c, nil, append(onH3, "-genv", "DYNPROG_MISSING", prog, dynprog, "missing")...)
	if want := "spawn failed as expected: MPI_Comm_spawn: MPI_ERR_SPAWN: child 0: h3 has no executable program " + prog; res.code != 0 || !strings.Contains(res.stdout, want) {
		t.Errorf("a program missing on h3: want exit 0 and %q: %v", want, res)
	}
	res = runOn(t, c, nil, "-hosts", "h1,h2,h3", "-np", "2", "-genv", "DYNPROG_SPAWN_HOST", "h9", dynprog, "missing")
	if want := `host "h9" is not a host of this job (h1, h2, h3)`; res.code != 0 || !strings.Contains(res.stdout, want) {
		t.Errorf("a host not of the job: want exit 0 and %q: %v", want, res)
	}

	res = runOn(t, c, nil, append(onH3, dynprog, "childdie")...)
	if res.code != 3 || !regexp.MustCompile(`mpirun: spawned rank \d of spawn 1 \(\S+\) on h3 \(launcher pid \d+\) exited with status 3`).MatchString(res.stderr) {
		t.Errorf("a child dying on h3: want exit 3 naming it and h3: %v", res)
	}
	noProcessesLeft(t, dynprog)
	noProcessesLeft(t, sshProxyFlag)
}
