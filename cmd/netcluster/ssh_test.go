package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/adimpi/adimpi/internal/netcluster"
	"github.com/adimpi/adimpi/internal/testnote"
)

// TestUpSSH: "up --ssh" gives every host an sshd that the printed ssh
// command logs in to from another host; "down" ends the sshds and removes
// the keys.
func TestUpSSH(t *testing.T) {
	if os.Geteuid() != 0 && os.Getenv("CI") == "" {
		testnote.Skip(t, "netcluster needs root to create namespaces")
	}
	if err := netcluster.CheckSSH(); err != nil {
		if os.Getenv("CI") == "" {
			testnote.Skip(t, err.Error())
		}
		t.Fatal(err)
	}
	dir := t.TempDir()
	t.Setenv(envMain, "1") // for the supervisor that up starts
	var out, errs bytes.Buffer
	if st := run([]string{"up", "-n", "2", "-dir", dir, "--ssh"}, &out, &errs); st != 0 {
		t.Fatalf("up --ssh: status %d: %s", st, errs.String())
	}
	t.Cleanup(func() { netcluster.Stop(dir, 10*time.Second) }) // if the test stops early
	ssh := filepath.Join(dir, "ssh", "ssh")
	if !strings.Contains(out.String(), "netcluster exec -dir "+dir+" h1 -- "+ssh+" h2 hostname") {
		t.Errorf("up --ssh printed %q, want how to ssh from h1 to h2", out.String())
	}
	if got, st := netclusterCmd(t, "exec", "-dir", dir, "h1", "--", ssh, "h2", "hostname"); st != 0 || got != "h2\n" {
		t.Errorf("exec h1 -- %s h2 hostname: %q, status %d", ssh, got, st)
	}
	if got, st := netclusterCmd(t, "down", "-dir", dir); st != 0 {
		t.Fatalf("down: %q, status %d", got, st)
	}
	if _, err := os.Stat(filepath.Dir(ssh)); !os.IsNotExist(err) {
		t.Errorf("down left %s (%v)", filepath.Dir(ssh), err)
	}
	if b, _ := exec.Command("pgrep", "-f", "sshd.*"+dir).Output(); len(b) > 0 {
		t.Errorf("sshd left running after down: %s", b)
	}
}
