package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/adimpi/adimpi/internal/netcluster"
	"github.com/adimpi/adimpi/internal/testnote"
)

// startCluster starts n simulated hosts for the test and returns the
// -launcher-exec command that runs a command on one of them. Without root
// the test is skipped loudly (it fails under CI).
func startCluster(t *testing.T, n int) (*netcluster.Cluster, string) {
	t.Helper()
	if os.Geteuid() != 0 {
		testnote.Skip(t, fmt.Sprintf("cmd/mpirun: launching on simulated hosts needs root to create namespaces (running as uid %d)", os.Geteuid()))
	}
	c := netcluster.StartT(t, n)
	return c, fmt.Sprintf("%s exec -dir %s {host} --", netclusterBin, c.Dir)
}

// probeLine is one rank's line of hostprobe, with or without a -l label.
var probeLine = regexp.MustCompile(`^(?:\[(\d+)@(\S+)\] )?rank (\d+) host (\S+) pid (\d+) secret (\S*) hosts (\S+)$`)

// Ranks land on the hosts that the placement says, each learns every
// rank's host through mpirun's PMI server, and all get one job secret.
func TestClusterPlacement(t *testing.T) {
	_, launcher := startCluster(t, 3)
	hostfile := filepath.Join(t.TempDir(), "hosts")
	if err := os.WriteFile(hostfile, []byte("h1:1\nh2 slots=3\n# h4\nh3:2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string // the host of each rank
	}{
		{[]string{"-hosts", "h1,h2,h3", "-np", "3"}, "h1 h2 h3"},
		{[]string{"-hosts", "h1,h2,h3", "-np", "6"}, "h1 h1 h2 h2 h3 h3"},
		{[]string{"-hosts", "h1,h2,h3", "-np", "7"}, "h1 h1 h1 h2 h2 h3 h3"},
		{[]string{"-hosts", "h1,h2,h3", "-np", "3", "-rr"}, "h1 h2 h3"},
		{[]string{"-hosts", "h1,h2,h3", "-np", "6", "-map-by", "node"}, "h1 h2 h3 h1 h2 h3"},
		{[]string{"-hostfile", hostfile}, "h1 h2 h2 h2 h3 h3"},
		{[]string{"-hostfile", hostfile, "-rr"}, "h1 h2 h3 h2 h3 h2"},
		{[]string{"-hosts", "h3,h1", "-ppn", "2"}, "h3 h3 h1 h1"},
		{[]string{"-hosts", "h2:1,h3:1", "-np", "3"}, "h2 h3 h2"},
	} {
		name := strings.Join(tc.args, " ")
		args := append([]string{"-launcher-exec", launcher, "-l"}, tc.args...)
		res := run(t, nil, nil, append(args, hostprobeBin)...)
		want := strings.Fields(tc.want)
		if res.code != 0 {
			t.Errorf("%s: %v", name, res)
			continue
		}
		got := make([]string, len(want))
		secrets := map[string]bool{}
		for _, l := range lines(res.stdout) {
			m := probeLine.FindStringSubmatch(l)
			if m == nil {
				t.Errorf("%s: unexpected line %q", name, l)
				continue
			}
			var r int
			fmt.Sscan(m[3], &r)
			if r >= len(want) || m[1] != m[3] || m[2] != m[4] {
				t.Errorf("%s: line %q: label and rank or host disagree, or rank beyond %d", name, l, len(want))
				continue
			}
			got[r] = m[4]
			secrets[m[6]] = true
			if m[7] != strings.Join(want, ",") {
				t.Errorf("%s: rank %d saw the ranks' hosts %s, want %s", name, r, m[7], strings.Join(want, ","))
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: ranks ran on %v, want %v\n%v", name, got, want, res)
		}
		for s := range secrets {
			if len(secrets) != 1 || !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(s) {
				t.Errorf("%s: job secrets %v: want one secret of 32 bytes in hex", name, secrets)
				break
			}
		}
	}
}

// An MPI program whose MPI_Init fails on the simulated hosts (a bad device
// option); mpirun says which rank on which host, quickly, and leaves
// nothing behind.
func TestClusterMPIInitRefused(t *testing.T) {
	_, launcher := startCluster(t, 3)
	res := run(t, nil, nil, "-launcher-exec", launcher, "-hosts", "h1,h2,h3", "-np", "3", "-device", "netvm", "-device-opt", "ring=1", mpiprogBin, "init")
	if res.code == 0 || !regexp.MustCompile(`mpirun: rank \d on h\d \(launcher pid \d+\) .*stopping the job`).MatchString(res.stderr) ||
		!strings.Contains(res.stderr, "MPI_Init") {
		t.Errorf("want a non-zero exit naming the failed rank and its host, after MPI_Init's error: %v", res)
	}
	if res.elapsed > 5*time.Second {
		t.Errorf("took %v to fail: %v", res.elapsed, res)
	}
	noProcessesLeft(t, mpiprogBin)
}

// A rank killed on its (remote) host ends the job with its rank and host
// named and its signal as the status.
func TestClusterRemoteRankKilled(t *testing.T) {
	c, launcher := startCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, mpirunBin, "-launcher-exec", launcher, "-hosts", "h1,h2,h3", "-np", "3", hostprobeBin, "block")
	sc, stderr := startPiped(t, cmd)
	pid := ""
	for pid == "" && sc.Scan() {
		if m := probeLine.FindStringSubmatch(sc.Text()); m != nil && m[3] == "2" {
			if m[4] != "h3" {
				t.Errorf("rank 2 runs on %s, want h3", m[4])
			}
			pid = m[5]
		}
	}
	killRank2OnH3(t, c, cmd, sc, stderr, pid)
}

// killRank2OnH3 kills rank 2 of hostprobe's "block" job (whose pid it
// said; "" if it never did) on h3, and checks that mpirun, run as cmd,
// ends with its signal as the status, names it, and leaves no rank.
func killRank2OnH3(t *testing.T, c *netcluster.Cluster, cmd *exec.Cmd, sc *bufio.Scanner, stderr *strings.Builder, pid string) {
	t.Helper()
	if pid == "" {
		cmd.Wait()
		t.Fatalf("rank 2 never said its pid; stderr:\n%s", stderr.String())
	}
	if b, err := c.Command("h3", "kill", "-KILL", pid).CombinedOutput(); err != nil {
		t.Fatalf("kill -KILL %s on h3: %v: %s", pid, err, b)
	}
	for sc.Scan() {
	}
	err := cmd.Wait()
	code := cmd.ProcessState.ExitCode()
	if code != 128+int(syscall.SIGKILL) || !strings.Contains(stderr.String(), "mpirun: rank 2 on h3 (launcher pid ") ||
		!strings.Contains(stderr.String(), "was killed by signal 9") {
		t.Errorf("want exit %d naming rank 2 on h3 killed by signal 9; got %v (exit %d), stderr:\n%s", 128+int(syscall.SIGKILL), err, code, stderr.String())
	}
	noProcessesLeft(t, hostprobeBin)
}

// -timeout on ranks that hang on another host prints each rank's wait
// report (a single remote host: no device reaches across hosts yet) and
// leaves nothing behind.
func TestClusterTimeoutAndSignal(t *testing.T) {
	_, launcher := startCluster(t, 3)
	res := run(t, nil, nil, "-launcher-exec", launcher, "-hosts", "h2", "-np", "3", "-timeout", "2s", mpiprogBin, "wait")
	checkWaitReports(t, res)

	// Ranks that are not adimpi programs are named with their hosts.
	res = run(t, nil, nil, "-launcher-exec", launcher, "-hosts", "h1,h3", "-np", "2", "-timeout", "1s", hostprobeBin, "block")
	for _, w := range []string{"mpirun: rank 0 on h1 (launcher pid", "mpirun: rank 1 on h3 (launcher pid"} {
		if res.code != exitTimeout || !strings.Contains(res.stderr, w) {
			t.Errorf("want exit %d and %q: %v", exitTimeout, w, res)
		}
	}
	noProcessesLeft(t, hostprobeBin)
}

// SIGINT to mpirun reaches the ranks on other hosts (through their
// proxies), which die of it; mpirun exits 130 and leaves nothing behind.
func TestClusterSignal(t *testing.T) {
	_, launcher := startCluster(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, mpirunBin, "-launcher-exec", launcher, "-hosts", "h1,h2", "-np", "2", hostprobeBin, "block")
	sc, stderr := startPiped(t, cmd)
	for n := 0; n < 2 && sc.Scan(); {
		if probeLine.MatchString(sc.Text()) {
			n++
		}
	}
	checkSIGINTForwarded(t, cmd.Process.Pid, cmd, sc, stderr)

	// mpirun killed outright: the launchers die with it (their
	// parent-death signal), the proxies with them, and the ranks with
	// their proxies.
	cmd = exec.CommandContext(ctx, mpirunBin, "-launcher-exec", launcher, "-hosts", "h1,h2", "-np", "2", hostprobeBin, "block")
	sc, _ = startPiped(t, cmd)
	for n := 0; n < 2 && sc.Scan(); {
		if probeLine.MatchString(sc.Text()) {
			n++
		}
	}
	cmd.Process.Kill()
	cmd.Wait()
	noProcessesLeft(t, hostprobeBin)
}

// The environment (-genv, -x, -device-opt), the working directory and
// standard input reach ranks on other hosts; an abort or an early exit
// there ends the job with its code, naming rank and host.
func TestClusterEnvStdinAbort(t *testing.T) {
	_, launcher := startCluster(t, 3)
	wdir := t.TempDir()
	res := run(t, nil, []string{"MPIRUN_TEST_B=inherited"}, "-launcher-exec", launcher, "-hosts", "h1,h2", "-np", "2", "-l",
		"-genv", "MPIRUN_TEST_A", "a 1", "-x", "MPIRUN_TEST_B=b1", "-device-opt", "k=v", "-wdir", wdir, rankprogBin, "env", "x y")
	if res.code != 0 {
		t.Fatal(res)
	}
	wantLines(t, "env", res, "[1@h2] rank 1 MPIRUN_TEST_A=a 1", "[1@h2] rank 1 MPIRUN_TEST_B=b1", "[1@h2] rank 1 ADIMPI_DEVICE_OPT=k=v",
		"[1@h2] rank 1 PMI_SIZE=2", "[1@h2] rank 1 cwd="+wdir, `[1@h2] rank 1 args=["x y"]`, "[0@h1] rank 0 MPIRUN_TEST_A=a 1")

	res = run(t, strings.NewReader("hello\n"), nil, "-launcher-exec", launcher, "-hosts", "h3,h2", "-np", "2", rankprogBin, "stdin")
	wantLines(t, "stdin", res, `rank 0 stdin "hello"`, `rank 1 stdin ""`)

	res = run(t, nil, nil, "-launcher-exec", launcher, "-hosts", "h1,h2,h3", "-np", "3", rankprogBin, "abort", "3")
	if res.code != 3 || !regexp.MustCompile(`mpirun: rank 2 on h3 \(launcher pid \d+\) called MPI_Abort with code 3: rankprog gave up; stopping the job`).MatchString(res.stderr) {
		t.Errorf("abort: want exit 3 naming rank 2 on h3: %v", res)
	}
	res = run(t, nil, nil, "-launcher-exec", launcher, "-hosts", "h1,h2,h3", "-np", "3", rankprogBin, "fail-early", "5")
	if res.code != 5 || !strings.Contains(res.stderr, "mpirun: rank 2 on h3 (launcher pid ") || !strings.Contains(res.stderr, "exited with status 5") {
		t.Errorf("fail-early: want exit 5 naming rank 2 on h3: %v", res)
	}
	noProcessesLeft(t, rankprogBin)
}

// noProcessesLeft fails the test if a process of the program bin (a rank,
// or its proxy) is still running anywhere, hosts included (their PID
// namespaces are below this one). A killed process may take a moment to
// exit, so it waits up to two seconds for them to go.
// checkSIGINTForwarded sends SIGINT to the mpirun process pid (cmd runs it,
// sc reads its output) and checks that mpirun forwarded it: exit 130, its
// notice on stderr, the ranks gone well before killDelay (a rank that
// ignored the signal would be killed only then) and no rank left.
func checkSIGINTForwarded(t *testing.T, pid int, cmd *exec.Cmd, sc *bufio.Scanner, stderr *strings.Builder) {
	t.Helper()
	start := time.Now()
	if err := syscall.Kill(pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	for sc.Scan() {
	}
	cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 130 || !strings.Contains(stderr.String(), "mpirun: received signal 2 (interrupt); forwarding it to all ranks") {
		t.Errorf("want exit 130 after forwarding SIGINT; got exit %d, stderr:\n%s", code, stderr.String())
	}
	if d := time.Since(start); d >= killDelay {
		t.Errorf("the ranks took %v to end: SIGINT did not reach them", d)
	}
	noProcessesLeft(t, hostprobeBin)
}

func noProcessesLeft(t *testing.T, bin string) {
	t.Helper()
	var left []string
	for deadline := time.Now().Add(2 * time.Second); ; {
		left = left[:0]
		dirs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
		for _, d := range dirs {
			b, err := os.ReadFile(d)
			if err == nil && strings.Contains(string(b), bin) && !strings.Contains(string(b), mpirunBin+"\x00-launcher-exec") {
				left = append(left, filepath.Base(filepath.Dir(d))+": "+strings.ReplaceAll(string(b), "\x00", " "))
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(left) > 0 {
		t.Errorf("processes left behind:\n%s", strings.Join(left, "\n"))
	}
}
