package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/adimpi/adimpi/internal/netcluster"
	"github.com/adimpi/adimpi/internal/slurmcluster"
	"github.com/adimpi/adimpi/internal/testnote"
	"github.com/adimpi/adimpi/internal/testproc"
)

// "up --slurm" starts a Slurm cluster on the hosts that "exec" reaches
// without setting SLURM_CONF, and "down" ends every daemon with the hosts.
func TestUpSlurm(t *testing.T) {
	if why := slurmcluster.Missing(); why != "" {
		testnote.Skip(t, "cmd/netcluster: "+why)
	}
	// A short directory: Slurm's Unix sockets live below it.
	dir, err := os.MkdirTemp("", "nc-slurm-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	t.Setenv(envMain, "1") // for the supervisor that up starts
	t.Setenv("SLURM_CONF", "")
	os.Unsetenv("SLURM_CONF")
	var out, errs bytes.Buffer
	if st := run([]string{"up", "-n", "2", "--slurm", "-dir", dir}, &out, &errs); st != 0 {
		t.Fatalf("up --slurm: status %d: %s", st, errs.String())
	}
	t.Cleanup(func() { netcluster.Stop(dir, 10*time.Second) }) // if the test stops early
	conf := filepath.Join(dir, slurmDir, "slurm.conf")
	if !strings.Contains(out.String(), "SLURM_CONF="+conf) {
		t.Errorf("up --slurm printed %q, want it to name %s", out.String(), conf)
	}
	got, st := netclusterCmd(t, "exec", "-dir", dir, "h1", "--", "srun", "-N", "2", "-n", "2", "hostname")
	names := strings.Fields(got)
	slices.Sort(names)
	if st != 0 || !slices.Equal(names, []string{"h1", "h2"}) {
		t.Errorf("exec h1 -- srun -N 2 hostname: %q, status %d; want h1 and h2", got, st)
	}
	if got, st := netclusterCmd(t, "down", "-dir", dir); st != 0 {
		t.Fatalf("down: %q, status %d", got, st)
	}
	for _, p := range testproc.Find(func(p testproc.Proc) bool { return p.Mentions(dir) || p.Mentions(conf) }) {
		t.Errorf("process %d (%q) left after down", p.PID, p.Cmdline())
	}
}
