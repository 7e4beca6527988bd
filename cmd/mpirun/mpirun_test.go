package main

import (
	"bufio"
	"context"
	"fmt"
	"github.com/adimpi/adimpi/internal/testproc"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/adimpi/adimpi/adi"
	"github.com/adimpi/adimpi/internal/testnote"
)

// Binaries built once by TestMain.
var (
	mpirunBin   string
	rankprogBin string
	mpiprogBin  string
	// For the tests across simulated hosts (cluster_test.go).
	hostprobeBin  string
	netclusterBin string
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "mpirun-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	mpirunBin = filepath.Join(dir, "mpirun")
	rankprogBin = filepath.Join(dir, "rankprog")
	mpiprogBin = filepath.Join(dir, "mpiprog")
	hostprobeBin = filepath.Join(dir, "hostprobe")
	netclusterBin = filepath.Join(dir, "netcluster")
	for _, b := range [][2]string{{mpirunBin, "."}, {rankprogBin, "./testdata/rankprog"}, {mpiprogBin, "./testdata/mpiprog"},
		{hostprobeBin, "./testdata/hostprobe"}, {netclusterBin, "../netcluster"}} {
		out, err := exec.Command("go", "build", "-o", b[0], b[1]).CombinedOutput()
		if err != nil {
			fmt.Fprintf(os.Stderr, "go build %s: %v\n%s", b[1], err, out)
			os.RemoveAll(dir)
			os.Exit(1)
		}
	}
	// The mpirun runs of the tests keep their build cache in dir, and go's
	// where it is.
	gocache, err := exec.Command("go", "env", "GOCACHE").Output()
	if err != nil {
		fmt.Fprintln(os.Stderr, "go env GOCACHE:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	os.Setenv("GOCACHE", strings.TrimSpace(string(gocache)))
	os.Setenv("XDG_CACHE_HOME", filepath.Join(dir, "cache"))
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// result is one finished mpirun.
type result struct {
	stdout, stderr string
	code           int
	elapsed        time.Duration
}

// run runs mpirun with args and stdin (nil: empty) and waits for it; a
// hard limit keeps a broken mpirun from hanging the test.
func run(t *testing.T, stdin io.Reader, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, mpirunBin, args...)
	cmd.Stdin = stdin
	cmd.Env = append(os.Environ(), env...)
	return finish(t, ctx, cmd, fmt.Sprintf("mpirun %q", args), "20s")
}

// finish runs cmd (made with ctx) to its end and returns what it printed
// and its status (128+N for a death by signal N); the test fails at once
// when ctx ended it (limit says how long it had) or it could not start.
func finish(t *testing.T, ctx context.Context, cmd *exec.Cmd, what, limit string) result {
	t.Helper()
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	res := result{stdout: stdout.String(), stderr: stderr.String(), elapsed: time.Since(start)}
	if ctx.Err() != nil {
		t.Fatalf("%s did not finish within %s\nstdout:\n%s\nstderr:\n%s", what, limit, res.stdout, res.stderr)
	}
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("%s: %v", what, err)
		}
		res.code = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			res.code = 128 + int(ws.Signal())
		}
	}
	return res
}

// startPiped starts cmd with its standard output read line by line
// through the returned scanner and its standard error kept in the
// returned builder.
func startPiped(t *testing.T, cmd *exec.Cmd) (*bufio.Scanner, *strings.Builder) {
	t.Helper()
	out, stderr := testproc.StartPiped(t, cmd)
	return bufio.NewScanner(out), stderr
}

// checkWaitReports checks that mpiprog's "wait" mode, stopped by mpirun
// -timeout, ended with exitTimeout and each rank's wait report, and that
// no rank is left.
func checkWaitReports(t *testing.T, res result) {
	t.Helper()
	if res.code != exitTimeout {
		t.Errorf("want exit %d: %v", exitTimeout, res)
	}
	for _, w := range []string{
		"adimpi: rank 0: waiting .* in mpi.Recv: receive from rank 1, tag 7, on MPI_COMM_WORLD",
		"adimpi: rank 1: waiting .* in mpi.Ssend: send to rank 0, tag 9, on wait-dup",
		"adimpi: rank 2: waiting .* in mpi.Barrier",
	} {
		if !regexp.MustCompile(w).MatchString(res.stderr) {
			t.Errorf("missing %q: %v", w, res)
		}
	}
	noProcessesLeft(t, mpiprogBin)
}

func (r result) String() string {
	return fmt.Sprintf("exit %d after %v\nstdout:\n%s\nstderr:\n%s", r.code, r.elapsed.Round(time.Millisecond), r.stdout, r.stderr)
}

func lines(s string) []string {
	s = strings.TrimSuffix(s, "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// (a) Every line of every rank arrives whole, with correct tags.
func TestOutputForwarding(t *testing.T) {
	const np, n = 4, 200
	for _, tag := range []bool{false, true} {
		args := []string{"-np", fmt.Sprint(np)}
		if tag {
			args = append(args, "-tag-output")
		}
		res := run(t, nil, nil, append(args, rankprogBin, "print", fmt.Sprint(n))...)
		if res.code != 0 {
			t.Fatalf("tag=%t: %v", tag, res)
		}
		lineRE := regexp.MustCompile(`^(\[(\d)\] )?rank (\d) (of 4 line (\d+)|partial)$`)
		next := make([]int, np) // next line number expected per rank
		partial := make([]bool, np)
		for _, l := range lines(res.stdout) {
			m := lineRE.FindStringSubmatch(l)
			if m == nil {
				t.Fatalf("tag=%t: bad stdout line %q", tag, l)
			}
			if (m[1] != "") != tag || (tag && m[2] != m[3]) {
				t.Fatalf("tag=%t: wrong tag in %q", tag, l)
			}
			r := int(m[3][0] - '0')
			if m[4] == "partial" {
				partial[r] = true
				continue
			}
			if want := fmt.Sprint(next[r]); m[5] != want || partial[r] {
				t.Fatalf("tag=%t: rank %d: got %q, want line %s", tag, r, l, want)
			}
			next[r]++
		}
		for r := 0; r < np; r++ {
			if next[r] != n || !partial[r] {
				t.Errorf("tag=%t: rank %d: %d lines, partial line seen %t", tag, r, next[r], partial[r])
			}
		}
		errLines := lines(res.stderr)
		slices.Sort(errLines)
		var want []string
		for r := 0; r < np; r++ {
			prefix := ""
			if tag {
				prefix = fmt.Sprintf("[%d] ", r)
			}
			want = append(want, fmt.Sprintf("%srank %d stderr", prefix, r))
		}
		if !slices.Equal(errLines, want) {
			t.Errorf("tag=%t: stderr lines %q, want %q", tag, errLines, want)
		}
	}
}

// (b) A rank that exits early with status 3 stops the job, and mpirun
// blames it, not the ranks whose barrier failed as a consequence.
func TestRankExitsEarly(t *testing.T) {
	msg := regexp.MustCompile(`(?m)^mpirun: rank 3 \(pid \d+\) exited with status 3 before MPI_Finalize; stopping the job$`)
	for i := 0; i < 5; i++ {
		res := run(t, nil, nil, "-np", "4", rankprogBin, "fail-early", "3")
		if res.code != 3 || !msg.MatchString(res.stderr) || res.elapsed > 10*time.Second {
			t.Fatalf("run %d: want exit 3 with the rank 3 message: %v", i, res)
		}
		if n := strings.Count(res.stderr, "mpirun: "); n != 1 {
			t.Fatalf("run %d: want exactly one mpirun message: %v", i, res)
		}
	}
}

// (c) MPI_Abort: the aborting rank blocks afterwards; mpirun must end it.
func TestAbort(t *testing.T) {
	res := run(t, nil, nil, "-np", "3", rankprogBin, "abort", "5")
	msg := regexp.MustCompile(`(?m)^mpirun: rank 2 \(pid \d+\) called MPI_Abort with code 5: rankprog gave up; stopping the job$`)
	if res.code != 5 || !msg.MatchString(res.stderr) || res.elapsed > 10*time.Second {
		t.Fatalf("want exit 5 with the abort message: %v", res)
	}
}

// (d) -timeout ends a hung job, killing a rank that ignores SIGTERM.
func TestTimeout(t *testing.T) {
	pr, pw, err := os.Pipe() // rank 0 blocks reading this; it never ends
	if err != nil {
		t.Fatal(err)
	}
	defer pw.Close()
	defer pr.Close()
	res := run(t, pr, nil, "-np", "3", "-timeout", "500ms", rankprogBin, "hang")
	if res.code != 124 || !strings.Contains(res.stderr, "mpirun: job timed out after 500ms; stopping the job\n") || res.elapsed > 10*time.Second {
		t.Fatalf("want exit 124 with the timeout message: %v", res)
	}
	// rankprog uses PMI but not package mpi: its ranks cannot say where
	// they wait, and mpirun says so for each.
	silent := regexp.MustCompile(`(?m)^mpirun: rank \d \(pid \d+\) did not say where it waits within 2s \(not an adimpi program, or not in MPI\)$`)
	if n := strings.Count(res.stderr, "mpirun: "); n != 4 || len(silent.FindAllString(res.stderr, -1)) != 3 {
		t.Fatalf("want the timeout message and one per silent rank: %v", res)
	}
}

// -timeout: every rank says in one line where it waits (call, peer, tag,
// communicator, for how long); goroutine stacks only with -timeout-stacks,
// each line labelled with its rank.
func TestTimeoutReport(t *testing.T) {
	for _, stacks := range []bool{false, true} {
		args := []string{"-np", "4", "-timeout", "1s"}
		if stacks {
			args = append(args, "-timeout-stacks")
		}
		res := run(t, nil, nil, append(args, mpiprogBin, "wait")...)
		if res.code != exitTimeout {
			t.Fatalf("stacks=%t: want exit %d: %v", stacks, exitTimeout, res)
		}
		d := `waiting \d+(\.\d+)?m?s in `
		for _, re := range []string{
			`(?m)^mpirun: job timed out after 1s; stopping the job$`,
			`(?m)^adimpi: rank 0: ` + d + `mpi\.Recv: receive from rank 1, tag 7, on MPI_COMM_WORLD$`,
			`(?m)^adimpi: rank 1: ` + d + `mpi\.Ssend: send to rank 0, tag 9, on wait-dup$`,
			`(?m)^adimpi: rank 2: ` + d + `mpi\.Barrier$`,
			`(?m)^adimpi: rank 3: ` + d + `mpi\.Barrier$`,
		} {
			if !regexp.MustCompile(re).MatchString(res.stderr) {
				t.Errorf("stacks=%t: stderr lacks %s: %v", stacks, re, res)
			}
		}
		goroutines := regexp.MustCompile(`(?m)^(\[\d\] )?goroutine \d+`).FindAllString(res.stderr, -1)
		if !stacks {
			if len(goroutines) > 0 {
				t.Errorf("stacks printed without -timeout-stacks: %v", res)
			}
			continue
		}
		for r := 0; r < 4; r++ {
			if !strings.Contains(res.stderr, fmt.Sprintf("\n[%d] goroutine 1 ", r)) {
				t.Errorf("-timeout-stacks: no stack of rank %d: %v", r, res)
			}
		}
		for _, l := range lines(res.stderr) {
			if !regexp.MustCompile(`^(\[\d\] |mpirun: |adimpi: rank \d: )`).MatchString(l) {
				t.Errorf("-timeout-stacks: unlabelled line %q", l)
			}
		}
	}
}

// -timeout while ranks wait in MPI_Init for one that never calls it.
func TestTimeoutInInit(t *testing.T) {
	res := run(t, nil, nil, "-np", "3", "-timeout", "1s", mpiprogBin, "noinit")
	for _, re := range []string{
		`(?m)^adimpi: rank 0: in MPI_Init, wiring up with the other ranks \(all of them must call MPI_Init\)$`,
		`(?m)^adimpi: rank 2: in MPI_Init, wiring up with the other ranks \(all of them must call MPI_Init\)$`,
		`(?m)^mpirun: rank 1 \(pid \d+\) did not say where it waits within 2s`,
	} {
		if res.code != exitTimeout || !regexp.MustCompile(re).MatchString(res.stderr) {
			t.Errorf("want exit %d and %s: %v", exitTimeout, re, res)
		}
	}
}

// (e) Standard input reaches rank 0 and only rank 0.
func TestStdin(t *testing.T) {
	res := run(t, strings.NewReader("line one\nline two\n"), nil, "-np", "3", rankprogBin, "stdin")
	got := lines(res.stdout)
	slices.Sort(got)
	want := []string{`rank 0 stdin "line one\nline two"`, `rank 1 stdin ""`, `rank 2 stdin ""`}
	if res.code != 0 || !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q: %v", got, want, res)
	}
}

// (f) A .go file and a package directory are built once and cleaned up.
func TestGoSources(t *testing.T) {
	for _, prog := range []string{"testdata/hello/main.go", "./testdata/hello", "testdata/hello"} {
		tmp := t.TempDir()
		res := run(t, nil, []string{"TMPDIR=" + tmp}, "-np", "2", prog, "x", "-y")
		got := lines(res.stdout)
		slices.Sort(got)
		want := []string{
			`hello from rank 0 of 2, args ["x" "-y"]`,
			`hello from rank 1 of 2, args ["x" "-y"]`,
		}
		if res.code != 0 || !slices.Equal(got, want) {
			t.Fatalf("%s: got %q, want %q: %v", prog, got, want, res)
		}
		left, err := os.ReadDir(tmp)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range left {
			if strings.HasPrefix(e.Name(), "mpirun-build-") {
				t.Errorf("%s: build directory %s left behind", prog, e.Name())
			}
		}
	}
	res := run(t, nil, nil, "-np", "1", "testdata/no-such.go")
	if res.code != exitNotFound {
		t.Errorf("missing .go file: %v", res)
	}
}

func TestSignalForwarding(t *testing.T) {
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pw.Close()
	defer pr.Close()
	cmd := exec.Command(mpirunBin, "-np", "3", rankprogBin, "ready")
	cmd.Stdin = pr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	timer := time.AfterFunc(20*time.Second, func() { cmd.Process.Kill() })
	defer timer.Stop()
	sc := bufio.NewScanner(out)
	for ready := 0; ready < 3 && sc.Scan(); {
		if strings.HasPrefix(sc.Text(), "ready ") {
			ready++
		}
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, out)
	err = cmd.Wait()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 130 || !strings.Contains(stderr.String(), "mpirun: received signal 2 (interrupt); forwarding it to all ranks") {
		t.Fatalf("want exit 130 and the forwarding message, got %v\nstderr:\n%s", err, stderr.String())
	}
}

func TestExitWithoutFinalize(t *testing.T) {
	res := run(t, nil, nil, "-np", "2", rankprogBin, "nofinalize")
	msg := regexp.MustCompile(`(?m)^mpirun: rank \d \(pid \d+\) exited with status 0 without calling MPI_Finalize; stopping the job$`)
	if res.code != 1 || !msg.MatchString(res.stderr) {
		t.Fatalf("want exit 1 and the no-finalize message: %v", res)
	}
	// A program that never uses PMI may exit 0 freely.
	res = run(t, nil, nil, "-np", "2", "true")
	if res.code != 0 || res.stderr != "" {
		t.Fatalf("true: %v", res)
	}
}

func TestKilledBySignal(t *testing.T) {
	res := run(t, nil, nil, "-np", "2", "sh", "-c", `if [ "$PMI_RANK" = 1 ]; then kill -KILL $$; fi`)
	msg := regexp.MustCompile(`(?m)^mpirun: rank 1 \(pid \d+\) was killed by signal 9 \(killed\); stopping the job$`)
	if res.code != 128+9 || !msg.MatchString(res.stderr) {
		t.Fatalf("want exit 137 and the signal message: %v", res)
	}
}

func TestEnvironment(t *testing.T) {
	res := run(t, nil, []string{"PMI_PORT=1.2.3.4:5", "ADIMPI_DEVICE_OPT=c=3, a=0", "GLIBC_TUNABLES=glibc.malloc.arena_max=2"},
		"--np=2", "-device-opt", "a=1", "--device-opt=b=x=y", "-async-progress", "-tag-output",
		rankprogBin, "env", "-np", "7", "--", "-x")
	if res.code != 0 {
		t.Fatal(res)
	}
	for _, want := range []string{
		"[1] rank 1 PMI_FD=3", "[1] rank 1 PMI_RANK=1", "[0] rank 0 PMI_SIZE=2",
		"[0] rank 0 ADIMPI_DEVICE=netvm", "[0] rank 0 ADIMPI_DEVICE_OPT=c=3,a=0,a=1,b=x=y",
		"[1] rank 1 ADIMPI_ASYNC_PROGRESS=1", `[0] rank 0 args=["-np" "7" "--" "-x"]`,
		"[1] rank 1 GLIBC_TUNABLES=glibc.malloc.arena_max=2:glibc.pthread.rseq=0",
	} {
		if !slices.Contains(lines(res.stdout), want) {
			t.Errorf("missing %q: %v", want, res)
		}
	}
	// -keep-rseq, or a GLIBC_TUNABLES that names the tunable, leaves it be.
	res = run(t, nil, []string{"GLIBC_TUNABLES=glibc.pthread.rseq=1"}, "-np", "1", rankprogBin, "env")
	if !slices.Contains(lines(res.stdout), "rank 0 GLIBC_TUNABLES=glibc.pthread.rseq=1") {
		t.Errorf("the user's rseq tunable was not kept: %v", res)
	}
	res = run(t, nil, []string{"GLIBC_TUNABLES=x=1"}, "-np", "1", "-keep-rseq", rankprogBin, "env")
	if !slices.Contains(lines(res.stdout), "rank 0 GLIBC_TUNABLES=x=1") {
		t.Errorf("-keep-rseq changed GLIBC_TUNABLES: %v", res)
	}
}

func TestUsageErrors(t *testing.T) {
	known := strings.Join(adi.Devices(), ", ")
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"-device", "no-such-device", "true"}, exitUsage, `unknown device "no-such-device"; known devices: ` + known},
		{[]string{"-np", "0", "true"}, exitUsage, "-np must be at least 1"},
		{[]string{}, exitUsage, "no program given"},
		{[]string{"-bogus", "true"}, exitUsage, "unknown flag: --bogus"},
		{[]string{"-hostsx", "localhost", "true"}, exitUsage, "unknown flag: --hostsx"},
		{[]string{"-device-opt", "novalue", "true"}, exitUsage, "want key=value"},
		{[]string{"-n", "1", "true", ":"}, exitUsage, "program 2 of the command line (after 1 \":\"): no program given"},
		{[]string{"-n", "1", "true", ":", "-device", "fm", "true"}, exitUsage, "program 2 of the command line: unknown flag: --device (job-wide flags go before the first program)"},
		{[]string{"-genv", "1A", "x", "true"}, exitUsage, `-genv "1A=x": want -genv NAME VALUE`},
		{[]string{"-x", "NO_SUCH_VAR_XYZ", "true"}, exitUsage, "-x NO_SUCH_VAR_XYZ: mpirun's environment has no NO_SUCH_VAR_XYZ"},
		{[]string{"-hosts", "localhost,nosuchhost.example:2", "true"}, exitUnreachable, `mpirun: cannot start ranks on nosuchhost.example through ssh (exit status 255): ssh: Could not resolve hostname nosuchhost.example`},
		{[]string{"-launcher", "ssh", "-launcher-exec", "no-such-ssh-xyz -p 22", "-hosts", "h2", "true"}, exitNotFound, `-launcher-exec "no-such-ssh-xyz -p 22": exec: "no-such-ssh-xyz": executable file not found`},
		{[]string{"-launcher", "exec", "-hosts", "h2", "true"}, exitUsage, "-launcher exec needs the command: -launcher-exec 'CMD {host}'"},
		{[]string{"-launcher", "rsh", "true"}, exitUsage, `-launcher "rsh": want ssh, exec or slurm`},
		{[]string{"-launcher", "slurm", "true"}, exitUsage, "-launcher slurm: not inside a Slurm allocation (SLURM_JOB_ID and SLURM_JOB_NODELIST are not set)"},
		{[]string{"-launcher", "slurm", "-launcher-exec", "x", "true"}, exitUsage, "-launcher slurm takes no -launcher-exec"},
		{[]string{"-map-by", "socket", "true"}, exitUsage, `-map-by "socket": want slot or node`},
		{[]string{"-launcher-exec", "nsenter 'x", "-hosts", "h2", "true"}, exitNotFound, `-launcher-exec "nsenter 'x": unterminated single quote`},
		{[]string{"-launcher-exec", "no-such-launcher-xyz {host}", "-hosts", "h2", "true"}, exitNotFound, `-launcher-exec "no-such-launcher-xyz {host}": exec: "no-such-launcher-xyz": executable file not found`},
		{[]string{"-hosts", "localhost:0", "true"}, exitUsage, `"localhost:0": want host or host:slots`},
		{[]string{"-hostfile", "testdata/hostfiles/remote", "true"}, exitUnreachable, `mpirun: cannot start ranks on node7 through ssh (exit status 255)`},
		{[]string{"-f", "testdata/hostfiles/bad", "true"}, exitUsage, `testdata/hostfiles/bad:2: "cpus=4": want host, host:slots or host slots=N`},
		{[]string{"-f", "testdata/hostfiles/no-such", "true"}, exitUsage, "hostfile: open testdata/hostfiles/no-such"},
		{[]string{"-wdir", "testdata/no-such-dir", "true"}, exitUsage, "-wdir testdata/no-such-dir: not a directory"},
		{[]string{"no-such-program-xyz"}, exitNotFound, "no-such-program-xyz"},
		{[]string{"testdata/hello/main.go/"}, exitNotFound, "main.go"},
		{[]string{"testdata/not-a-dir/prog"}, exitNotFound, "not-a-dir"},
	} {
		res := run(t, nil, nil, tc.args...)
		if res.code != tc.code || !strings.Contains(res.stderr, tc.want) {
			t.Errorf("mpirun %q: want exit %d and %q: %v", tc.args, tc.code, tc.want, res)
		}
	}
	if res := run(t, nil, []string{"ADIMPI_DEVICE_OPT=a=1,novalue"}, "true"); res.code != exitUsage || !strings.Contains(res.stderr, `ADIMPI_DEVICE_OPT: "novalue": want key=value`) {
		t.Errorf("a bad inherited ADIMPI_DEVICE_OPT: want exit 2 and its message: %v", res)
	}
	res := run(t, nil, nil, "-list-devices")
	if res.code != 0 || !slices.Equal(lines(res.stdout), adi.Devices()) || len(adi.Devices()) == 0 {
		t.Errorf("-list-devices: %v", res)
	}
	// Every device describes its options from its option table.
	for _, dev := range adi.Devices() {
		res = run(t, nil, nil, "-device", dev, "-device-help")
		if res.code != 0 || !strings.HasPrefix(res.stdout, "device "+dev+" options (-device-opt key=value):\n  ") || strings.Count(res.stdout, "\n") < 3 {
			t.Errorf("-device %s -device-help: %v", dev, res)
		}
	}
	if res = run(t, nil, nil, "-device", "nope", "-device-help"); res.code != exitUsage || !strings.Contains(res.stderr, `unknown device "nope"`) {
		t.Errorf("-device-help of an unknown device: %v", res)
	}
	res = run(t, nil, nil, "-h")
	for _, want := range []string{"-n, -np N", "-device-help", "-device name", "-device-opt key=value", "-l, -tag-output", "-timeout duration",
		"-list-devices", "-async-progress", "ADIMPI_DEVICE_OPT", "PMI_FD", "-hosts", "-f, -hostfile file", "-x NAME",
		"-genv NAME VALUE", "-env NAME VALUE", "-wdir dir", "-ppn N", "-version", "-timeout-stacks", "ADIMPI_APPNUM",
		"64       usage error", "(2: a Go panic)"} {
		if res.code != 0 || !strings.Contains(res.stdout, want) {
			t.Errorf("-h lacks %q: %v", want, res)
		}
	}
}

func TestNormalizeArgs(t *testing.T) {
	for _, tc := range []struct{ in, want []string }{
		{[]string{"-np", "4", "prog", "-np", "2"}, []string{"--np", "4", "prog", "-np", "2"}},
		{[]string{"-np=4", "-tag-output", "-device", "netvm", "p"}, []string{"--np=4", "--tag-output", "--device", "netvm", "p"}},
		{[]string{"-n", "3", "-h"}, []string{"-n", "3", "-h"}},
		{[]string{"-n4", "--timeout", "1s", "p"}, []string{"-n4", "--timeout", "1s", "p"}},
		{[]string{"-device-opt", "-x=1", "p"}, []string{"--device-opt", "-x=1", "p"}},
		{[]string{"-bogus", "p"}, []string{"--bogus", "p"}},
		{[]string{"--", "-np"}, []string{"--", "-np"}},
		{[]string{"-hosts", "localhost", "-l", "p"}, []string{"--hosts", "localhost", "-l", "p"}},
		{[]string{"-genv", "A", "1 2", "-env", "B", "x=y", "p"}, []string{"--genv=A=1 2", "--env=B=x=y", "p"}},
		{[]string{"-x", "HOME", "-f", "hf", "-ppn", "2", "-wdir", "/tmp", "p"}, []string{"-x", "HOME", "-f", "hf", "--ppn", "2", "--wdir", "/tmp", "p"}},
		{[]string{"-genv", "A"}, []string{"--genv", "A"}},
	} {
		var o options
		var a appOptions
		if got := normalizeArgs(newFlagSet(&o, &a, true), tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("normalizeArgs(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestForwardLines(t *testing.T) {
	long := strings.Repeat("x", 100_000)
	var b strings.Builder
	sink := &lineSink{w: &b}
	forwardLines(io.NopCloser(strings.NewReader("a\n\nb\n"+long+"\nend")), sink, []byte("[7] "), nil, nil)
	want := "[7] a\n[7] \n[7] b\n[7] " + long + "\n[7] end\n"
	if b.String() != want {
		t.Errorf("forwarded %d bytes, want %d", b.Len(), len(want))
	}
}

// TestForwardLinesReportBeforeLabels: once a wait report line is heard
// (and -timeout-stacks may then label every line), the report itself is
// already written as it came; only the lines after it are labelled.
// TestTimeoutReport failed 1 run in CI on this when the two raced.
func TestForwardLinesReportBeforeLabels(t *testing.T) {
	var b strings.Builder
	sink := &lineSink{w: &b}
	in := "adimpi: rank 2: waiting 1s in mpi.Barrier\ngoroutine 1 [running]:\n"
	forwardLines(io.NopCloser(strings.NewReader(in)), sink, nil, []byte("[2] "), func(line []byte) {
		if strings.HasPrefix(string(line), "adimpi: rank ") {
			sink.labelAll.Store(true)
		}
	})
	want := "adimpi: rank 2: waiting 1s in mpi.Barrier\n[2] goroutine 1 [running]:\n"
	if b.String() != want {
		t.Errorf("forwarded %q, want %q", b.String(), want)
	}
}

// TestMPICHProgram runs a C program built with MPICH's mpicc under mpirun,
// which starts it on adimpi's libmpich.so.12, and spawns it from a Go
// program. Skipped when MPICH's compiler wrapper is not installed.
func TestMPICHProgram(t *testing.T) {
	mpicc, err := exec.LookPath("mpicc.mpich")
	if err != nil {
		testnote.Skip(t, "cmd/mpirun: mpicc.mpich is not on PATH: install the Debian package libmpich-dev to run this test")
	}
	bin := filepath.Join(t.TempDir(), "mpich-hello")
	if out, err := exec.Command(mpicc, "-o", bin, "testdata/mpich/hello.c").CombinedOutput(); err != nil {
		testnote.Skip(t, fmt.Sprintf("cmd/mpirun: mpicc.mpich cannot build a program here: %v\n%s", err, out))
	}
	// mpirun builds the library on a C program's first run: a cgo link of
	// the whole project, which under CI's parallel package builds can take
	// longer than run allows a job. Build it first, without that limit.
	var out strings.Builder
	if _, err := buildLibmpich(&out); err != nil {
		t.Fatalf("building libmpich.so.12: %v\n%s", err, out.String())
	}
	res := run(t, nil, nil, "-np", "3", "-timeout", "15s", bin)
	got := lines(res.stdout)
	slices.Sort(got)
	want := []string{"mpich rank 0 of 3 sum 3", "mpich rank 1 of 3 sum 3", "mpich rank 2 of 3 sum 3"}
	if res.code != 0 || !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q: %v", got, want, res)
	}

	// A Go program spawning it: mpirun gives the C children the library
	// too, although the parent's environment does not name it.
	res = run(t, nil, nil, "-np", "2", "-timeout", "15s", mpiprogBin, "spawn", bin, "2")
	got = lines(res.stdout)
	slices.Sort(got)
	want = []string{"mpich rank 0 of 2 sum 1", "mpich rank 1 of 2 sum 1", "spawned 2"}
	if res.code != 0 || !slices.Equal(got, want) {
		t.Fatalf("Go parent spawning the C program: got %q, want %q: %v", got, want, res)
	}
}

// wantLines fails the test unless every line of want is in out.
func wantLines(t *testing.T, what string, res result, want ...string) {
	t.Helper()
	for _, w := range want {
		if !slices.Contains(lines(res.stdout), w) {
			t.Errorf("%s: missing %q: %v", what, w, res)
		}
	}
}

// The flags users bring from Hydra and Open MPI, on one host.
func TestHydraOpenMPIFlags(t *testing.T) {
	wdir := t.TempDir()
	res := run(t, nil, []string{"MPIRUN_TEST_B=inherited"}, "-n", "2", "-hosts", "localhost,127.0.0.1", "-l",
		"-genv", "MPIRUN_TEST_A", "a 1", "-x", "MPIRUN_TEST_B=b1", "-wdir", wdir, "-ppn", "2", rankprogBin, "env")
	if res.code != 0 {
		t.Fatal(res)
	}
	wantLines(t, "-hosts -l -genv -x -wdir", res, "[0] rank 0 PMI_SIZE=2", "[1] rank 1 MPIRUN_TEST_A=a 1",
		"[0] rank 0 MPIRUN_TEST_B=b1", "[1] rank 1 cwd="+wdir, "[1] rank 1 ADIMPI_APPNUM=0")

	// A hostfile's slots make the number of ranks (2 + 1 + none).
	res = run(t, nil, nil, "--hostfile", "testdata/hostfiles/local", rankprogBin, "env")
	wantLines(t, "-hostfile", res, "rank 2 PMI_SIZE=3")
	if res.code != 0 || strings.Contains(res.stdout, "rank 3 ") {
		t.Errorf("-hostfile: want 3 ranks: %v", res)
	}
	hn, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	res = run(t, nil, nil, "-host", hn+":2", "-machinefile", "testdata/hostfiles/local", "-n", "1", rankprogBin, "env")
	wantLines(t, "-host hostname", res, "rank 0 PMI_SIZE=1")

	// MPMD: the world is the concatenation; each program has its APPNUM,
	// its own -env and -wdir.
	res = run(t, nil, nil, "-tag-output", "-genv", "MPIRUN_TEST_A", "all", "-np", "1", rankprogBin, "env", "first",
		":", "-n", "2", "-env", "MPIRUN_TEST_B", "second", "-wdir", wdir, rankprogBin, "env", "second")
	if res.code != 0 {
		t.Fatal(res)
	}
	wantLines(t, "MPMD", res, "[0] rank 0 PMI_SIZE=3", "[2] rank 2 PMI_SIZE=3",
		"[0] rank 0 ADIMPI_APPNUM=0", "[1] rank 1 ADIMPI_APPNUM=1", "[2] rank 2 ADIMPI_APPNUM=1",
		`[0] rank 0 args=["first"]`, `[2] rank 2 args=["second"]`, "[2] rank 2 MPIRUN_TEST_B=second",
		"[0] rank 0 MPIRUN_TEST_B=", "[1] rank 1 MPIRUN_TEST_A=all", "[1] rank 1 cwd="+wdir)
	if strings.Contains(res.stdout, `":"`) {
		t.Errorf("MPMD: a \":\" reached a program: %v", res)
	}

	// The same package twice is built once (its cache entry is locked
	// until the ranks start: a second build would wait for the first).
	res = run(t, nil, nil, "-n", "1", "./testdata/hello", "a", ":", "-n", "1", "./testdata/hello", "b")
	got := lines(res.stdout)
	slices.Sort(got)
	if want := []string{`hello from rank 0 of 2, args ["a"]`, `hello from rank 1 of 2, args ["b"]`}; res.code != 0 || !slices.Equal(got, want) {
		t.Errorf("MPMD of one package twice: got %q, want %q: %v", got, want, res)
	}

	for _, v := range []string{"--version", "-version"} {
		res = run(t, nil, nil, v)
		if res.code != 0 || !strings.HasPrefix(res.stdout, "mpirun (adimpi) ") {
			t.Errorf("%s: %v", v, res)
		}
	}
}

// A package mpirun builds lives in its build cache: neither a SIGPIPE
// ("mpirun ... | head") nor a SIGKILL of mpirun leaves a binary in the
// temporary directory, and a later run reuses the cached binary.
func TestBuildCache(t *testing.T) {
	tmp, cache := t.TempDir(), t.TempDir()
	env := append(os.Environ(), "TMPDIR="+tmp, "XDG_CACHE_HOME="+cache) // GOCACHE: see TestMain
	start := func(args ...string) (*exec.Cmd, *bufio.Scanner, io.Closer) {
		cmd := exec.Command(mpirunBin, args...)
		cmd.Env = env
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.AfterFunc(20*time.Second, func() { cmd.Process.Kill() })
		return cmd, bufio.NewScanner(out), out
	}
	leftovers := func(what string) {
		t.Helper()
		left, err := os.ReadDir(tmp)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range left {
			t.Errorf("%s: %s left behind in the temporary directory", what, e.Name())
		}
	}

	// SIGPIPE: the reader goes away after one line.
	cmd, sc, out := start("-np", "2", "./testdata/rankprog", "print", "1000000")
	if !sc.Scan() {
		t.Fatalf("no output from mpirun: %v", sc.Err())
	}
	out.Close()
	err := cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGPIPE {
		t.Errorf("mpirun whose output is closed: want death by SIGPIPE, got %v", err)
	}
	leftovers("SIGPIPE")
	bins, err := filepath.Glob(filepath.Join(cache, "adimpi", "mpirun", "*", "rankprog"))
	if err != nil || len(bins) != 1 {
		t.Fatalf("want one cached rankprog binary, got %q (%v)", bins, err)
	}
	before, err := os.Stat(bins[0])
	if err != nil {
		t.Fatal(err)
	}

	// SIGKILL once the ranks run; then the next run reuses the binary.
	cmd, sc, _ = start("-np", "2", "./testdata/rankprog", "ready")
	for ready := 0; ready < 2 && sc.Scan(); {
		if strings.HasPrefix(sc.Text(), "ready ") {
			ready++
		}
	}
	cmd.Process.Kill()
	cmd.Wait()
	leftovers("SIGKILL")
	after, err := os.Stat(bins[0])
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(before, after) { // go build replaces a binary it relinks
		t.Errorf("the second run rebuilt %s instead of reusing it", bins[0])
	}
}

// A rank whose MPI_Init fails (here over a bad device option) is reported
// with Init's error, not as a call of MPI_Abort; a panicking rank's status
// 2 is not mpirun's usage status.
func TestRankErrors(t *testing.T) {
	res := run(t, nil, nil, "-np", "2", "-device", "netvm", "-device-opt", "ring=abc", mpiprogBin, "init")
	msg := regexp.MustCompile(`(?m)^mpirun: rank \d \(pid \d+\) failed: MPI_Init: .*netvm: option ring=abc: .*; stopping the job$`)
	if res.code != 1 || !msg.MatchString(res.stderr) || strings.Contains(res.stderr, "MPI_Abort") {
		t.Errorf("a bad device option: want exit 1 and MPI_Init's error as the rank's: %v", res)
	}
	res = run(t, nil, nil, "-np", "2", mpiprogBin, "panic")
	msg = regexp.MustCompile(`(?m)^mpirun: rank 1 \(pid \d+\) exited with status 2 before MPI_Finalize; stopping the job$`)
	if res.code != 2 || res.code == exitUsage || !msg.MatchString(res.stderr) || !strings.Contains(res.stderr, "panic: mpiprog gives up") {
		t.Errorf("a panicking rank: want exit 2 with its panic: %v", res)
	}
}

// An MPI program started by a launcher that offers no PMI-1 (here, the
// environment Open MPI's mpiexec gives each of its processes) fails in
// MPI_Init saying what to use, instead of running as rank 0 of 1.
func TestForeignLauncherInit(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for r := 0; r < 2; r++ {
		cmd := exec.CommandContext(ctx, mpiprogBin, "init")
		var env []string
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "PMI_") {
				env = append(env, kv)
			}
		}
		cmd.Env = append(env, "OMPI_COMM_WORLD_SIZE=2", fmt.Sprintf("OMPI_COMM_WORLD_RANK=%d", r))
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 ||
			!strings.Contains(string(out), "MPI_Init") || !strings.Contains(string(out), "Open MPI's mpirun/mpiexec") ||
			!strings.Contains(string(out), "adimpi's mpirun") {
			t.Errorf("rank %d under Open MPI's environment: want exit 1 and Init's refusal, got %v:\n%s", r, err, out)
		}
	}
}
