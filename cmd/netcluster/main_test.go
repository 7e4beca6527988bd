package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/adimpi/adimpi/internal/netcluster"
	"github.com/adimpi/adimpi/internal/testnote"
)

// envMain makes the test binary behave as the netcluster command, so that
// "up" can start it again as the supervisor.
const envMain = "NETCLUSTER_TEST_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(envMain) != "" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// netclusterCmd runs the command in a process of its own (exec replaces
// the process that runs it) and returns its output and exit status.
func netclusterCmd(t *testing.T, args ...string) (string, int) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), envMain+"=1")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return string(out), ee.ExitCode()
	}
	if err != nil {
		t.Fatalf("netcluster %v: %v", args, err)
	}
	return string(out), 0
}

// TestUpExecDown drives the command as the README does: up, exec, link,
// hosts, down, and checks that down leaves no holder.
func TestUpExecDown(t *testing.T) {
	if os.Geteuid() != 0 && os.Getenv("CI") == "" {
		testnote.Skip(t, "netcluster needs root to create namespaces")
	}
	dir := t.TempDir()
	t.Setenv(envMain, "1") // for the supervisor that up starts
	var out, errs bytes.Buffer
	if st := run([]string{"up", "-n", "2", "-dir", dir}, &out, &errs); st != 0 {
		t.Fatalf("up: status %d: %s", st, errs.String())
	}
	t.Cleanup(func() { netcluster.Stop(dir, 10*time.Second) }) // if the test stops early
	if !strings.Contains(out.String(), "h2\t198.18.0.2\n") {
		t.Errorf("up printed %q, want h2's address among the hosts", out.String())
	}
	c, err := netcluster.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	holders := []int{c.Hosts[0].PID, c.Hosts[1].PID}

	if got, st := netclusterCmd(t, "exec", "-dir", dir, "h2", "--", "cat", "/proc/sys/kernel/hostname"); st != 0 || got != "h2\n" {
		t.Errorf("exec h2 -- cat /proc/sys/kernel/hostname: %q, status %d", got, st)
	}
	if _, st := netclusterCmd(t, "exec", "-dir", dir, "h1", "--", "sh", "-c", "exit 3"); st != 3 {
		t.Errorf("exec h1 -- sh -c 'exit 3': status %d, want 3", st)
	}
	if got, st := netclusterCmd(t, "link", "-dir", dir, "h9", "down"); st != 1 || !strings.Contains(got, `no host "h9"`) {
		t.Errorf("link h9 down: %q, status %d; want an error naming h9", got, st)
	}
	if got, st := netclusterCmd(t, "link", "-dir", dir, "h2", "down"); st != 0 {
		t.Errorf("link h2 down: %q, status %d", got, st)
	}
	if got, st := netclusterCmd(t, "up", "-dir", dir); st != 1 || !strings.Contains(got, "already up") {
		t.Errorf("a second up in the same directory: %q, status %d; want it refused", got, st)
	}
	if got, st := netclusterCmd(t, "hosts", "-dir", dir); st != 0 || !strings.Contains(got, "h1\t198.18.0.1") {
		t.Errorf("hosts: %q, status %d", got, st)
	}

	if got, st := netclusterCmd(t, "down", "-dir", dir); st != 0 {
		t.Fatalf("down: %q, status %d", got, st)
	}
	for _, pid := range holders {
		if b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); err == nil && !strings.Contains(string(b), ") Z ") {
			t.Errorf("holder %d still runs after down", pid)
		}
	}
	if got, st := netclusterCmd(t, "exec", "-dir", dir, "h1", "--", "true"); st != 1 || !strings.Contains(got, "no cluster") {
		t.Errorf("exec after down: %q, status %d; want no cluster", got, st)
	}
}
