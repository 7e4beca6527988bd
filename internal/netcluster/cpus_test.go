package netcluster

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestCPUPerHost checks that with Options.CPUPerHost every process of a
// host, its holder, a command started on it and one started through a
// cluster that Open attached to, runs on the host's CPU, round robin over
// the CPUs the test may use, and that without it a command may use them all.
func TestCPUPerHost(t *testing.T) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		t.Fatal(err)
	}
	var cpus []int
	for cpu := 0; cpu < len(set)*64; cpu++ {
		if set.IsSet(cpu) {
			cpus = append(cpus, cpu)
		}
	}
	all, err := allowedCPUs("self")
	if err != nil {
		t.Fatal(err)
	}
	status := "grep Cpus_allowed_list /proc/self/status | cut -f2"

	c := StartOptsT(t, Options{Hosts: 3, CPUPerHost: true})
	again, err := Open(c.Dir)
	if err != nil {
		t.Fatal(err)
	}
	for i, h := range c.Hosts {
		want := strconv.Itoa(cpus[i%len(cpus)])
		if got, err := allowedCPUs(strconv.Itoa(h.PID)); err != nil || got != want {
			t.Errorf("the holder of %s may run on CPUs %q (%v), want %q", h.Name, got, err, want)
		}
		for _, cl := range []*Cluster{c, again} {
			if got := strings.TrimSpace(output(t, cl.Command(h.Name, "sh", "-c", status))); got != want {
				t.Errorf("a command on %s may run on CPUs %q, want %q", h.Name, got, want)
			}
		}
	}

	plain := StartT(t, 1)
	if got := strings.TrimSpace(output(t, plain.Command("h1", "sh", "-c", status))); got != all {
		t.Errorf("without CPUPerHost a command on h1 may run on CPUs %q, want all of the test's, %q", got, all)
	}
}

// allowedCPUs is the Cpus_allowed_list of process pid ("self" for this
// one), as /proc reports it.
func allowedCPUs(pid string) (string, error) {
	b, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return "", err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "Cpus_allowed_list:"); ok {
			return strings.TrimSpace(v), nil
		}
	}
	return "", fmt.Errorf("netcluster: no Cpus_allowed_list in /proc/%s/status", pid)
}
