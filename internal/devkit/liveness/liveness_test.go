package liveness

import (
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
