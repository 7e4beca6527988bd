package testproc

import (
	"os/exec"
	"slices"
	"testing"
)

// A child started with a marker in its environment is found by its
// executable and marker while it runs, and no longer once it has been
// reaped.
func TestFindChild(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatalf("this test needs sleep(1): %v", err)
	}
	cmd := exec.Command(sleep, "60")
	cmd.Env = []string{"TESTPROC_MARK=7"}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	exe := Proc{pid}.Exe()
	if got := Rank(exe, "TESTPROC_MARK=7"); got != pid {
		t.Errorf("Rank(%q, TESTPROC_MARK=7) = %d, want %d", exe, got, pid)
	}
	if got := Rank(exe, "TESTPROC_MARK=8"); got != 0 {
		t.Errorf("Rank with the wrong marker = %d, want 0", got)
	}
	if !slices.Contains(PIDs(exe), pid) {
		t.Errorf("PIDs(%q) lacks %d", exe, pid)
	}
	if p := (Proc{pid}); !p.Live() || !p.Mentions("TESTPROC_MARK=7") || p.Cmdline() != sleep+" 60" {
		t.Errorf("child %d: live %v, mentions marker %v, cmdline %q", pid, p.Live(), p.Mentions("TESTPROC_MARK=7"), p.Cmdline())
	}
	cmd.Process.Kill()
	cmd.Wait()
	if got := Rank(exe, "TESTPROC_MARK=7"); got != 0 {
		t.Errorf("after the child was reaped Rank found %d", got)
	}
}
