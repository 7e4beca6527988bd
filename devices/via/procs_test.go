package via_test

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/adimpi/adimpi/internal/netcluster"
	"github.com/adimpi/adimpi/internal/testnote"
)

// TestOneCPUHosts runs via across two simulated hosts whose processes are
// bound to one CPU each, where the Go runtime gives a rank one processor:
// the ranks' ping-pong checks every answer, and rank 1, kept waiting past
// its spin, slept on the network port itself (procs.go) rather than in
// the futex with the network handed to its engine, which stalled. With
// two processors (GOMAXPROCS=2, set by the user) it sleeps as before.
func TestOneCPUHosts(t *testing.T) {
	if os.Geteuid() != 0 {
		testnote.Skip(t, fmt.Sprintf("via: simulated hosts need root to create namespaces (running as uid %d)", os.Geteuid()))
	}
	build(t)
	c := netcluster.StartOptsT(t, netcluster.Options{Hosts: 2, CPUPerHost: true})
	launch := fmt.Sprintf("%s exec -dir %s {host} --", bins["netcluster"], c.Dir)
	job := func(extra ...string) string {
		a := append([]string{"-hosts", "h1,h2", "-launcher-exec", launch, "-np", "2", "-device", "via", "-timeout", "120s"}, extra...)
		a = append(a, bins["viaprocs"])
		cmd := exec.Command(bins["mpirun"], a...)
		cmd.Env = jobEnv("GOMAXPROCS=")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("mpirun %s: %v\n%s", strings.Join(a, " "), err, out)
		}
		return string(out)
	}
	portSleeps := func(out string) int {
		m := regexp.MustCompile(`rank 1 port_sleeps (\d+)`).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("no port_sleeps of rank 1 in\n%s", out)
		}
		n, _ := strconv.Atoi(m[1])
		return n
	}
	out := job()
	for r := range 2 {
		if want := fmt.Sprintf("rank %d gomaxprocs 1", r); !strings.Contains(out, want) {
			t.Errorf("ranks on one-CPU hosts: want %q in\n%s", want, out)
		}
	}
	if portSleeps(out) == 0 {
		t.Errorf("rank 1 waited 100 ms with one Go processor and never slept on the network port:\n%s", out)
	}
	out = job("-x", "GOMAXPROCS=2")
	if !strings.Contains(out, "rank 1 gomaxprocs 2") || portSleeps(out) != 0 {
		t.Errorf("with two Go processors rank 1 slept on the port, or did not run with two:\n%s", out)
	}
}
