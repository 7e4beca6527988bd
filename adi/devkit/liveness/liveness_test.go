package liveness

import (
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// A peer whose process has exited (and been reaped) is found by the next
// scan, once, and the errors name its rank and pid; this process is never
// reported, whatever pid it was given.
func TestScanFindsAnExitedPeer(t *testing.T) {
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skipf("SKIP: cannot run true to get the pid of an exited process: %v", err)
	}
	p := New(0, 3, 4)
	p.SetPid(0, 1<<30) // this process: never scanned
	p.SetPid(1, os.Getpid())
	p.SetPid(2, cmd.Process.Pid)
	if gone := p.Scan(); len(gone) != 1 || gone[0] != 2 {
		t.Fatalf("Scan = %v, want [2]", gone)
	}
	if !p.Alive(0) || !p.Alive(1) || p.Alive(2) {
		t.Errorf("alive: %v %v %v", p.Alive(0), p.Alive(1), p.Alive(2))
	}
	if gone := p.Scan(); len(gone) != 0 {
		t.Errorf("second Scan = %v, want nothing new", gone)
	}
	for _, err := range []error{p.Exited("send", 2), p.Lost(2)} {
		if want := "rank 2 (pid " + strconv.Itoa(cmd.Process.Pid) + ")"; !strings.Contains(err.Error(), want) {
			t.Errorf("%v does not name %s", err, want)
		}
	}
}

// Idle makes a scan due every `every` idle polls, not before, and at once
// after a sleep, but never twice within Interval.
func TestIdleSchedule(t *testing.T) {
	p := New(0, 2, 4)
	p.last = p.last.Add(-2 * Interval)
	for i := 1; i <= 3; i++ {
		if p.Idle() {
			t.Fatalf("scan due after %d idle polls, want 4", i)
		}
	}
	if !p.Idle() {
		t.Fatal("no scan due after 4 idle polls")
	}
	p.Scan()
	p.Slept()
	if p.Idle() {
		t.Fatal("a scan due right after one, within Interval")
	}
	p.last = p.last.Add(-2 * Interval)
	p.Slept()
	if !p.Idle() {
		t.Fatal("no scan due after a sleep")
	}
}

// A rank on another host is left to the device: Scan does not look at it
// even when its recorded pid is that of an exited process, MarkLost marks
// it gone once, Lost returns the device's own error and Exited names the
// host.
func TestHostRankIsJudgedByTheDevice(t *testing.T) {
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skipf("SKIP: cannot run true to get the pid of an exited process: %v", err)
	}
	p := New(0, 2, 4)
	p.SetPid(1, cmd.Process.Pid)
	p.SetHost(1, "hostb")
	if gone := p.Scan(); len(gone) != 0 || !p.Alive(1) {
		t.Fatalf("Scan = %v, alive %v: a rank on another host was scanned", gone, p.Alive(1))
	}
	broke := errors.New("connection reset")
	if !p.MarkLost(1, broke) {
		t.Fatal("MarkLost of a live rank reported it already gone")
	}
	if p.Alive(1) || p.MarkLost(1, errors.New("again")) {
		t.Fatalf("after MarkLost: alive %v, or a second MarkLost reported it alive", p.Alive(1))
	}
	if err := p.Lost(1); err != broke {
		t.Errorf("Lost = %v, want the error MarkLost was given", err)
	}
	if err := p.Exited("send", 1); !strings.Contains(err.Error(), "rank 1 (on host hostb)") {
		t.Errorf("Exited = %v, does not name the host", err)
	}
}
