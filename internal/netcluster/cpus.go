package netcluster

import (
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// A cluster with Options.CPUPerHost gives each host a CPU of its own, as
// hosts of one processor each would have: every process of host i runs on
// the (i-1 mod N)-th of the N CPUs this process may use. Without it a rank
// of h1 borrows h2's CPU whenever it is idle, for its helper threads and
// the Go runtime's, which no two machines of a real cluster allow. The
// kernel's work for a frame crossing a veth link still runs where its
// sender runs: that is veth's, not the placement's.

// assignCPUs gives each host its CPU, round robin over the CPUs this
// process may run on.
func assignCPUs(hosts []Host) error {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return fmt.Errorf("netcluster: reading the CPUs this process may use: %v", err)
	}
	var cpus []int
	for cpu := 0; cpu < len(set)*64; cpu++ {
		if set.IsSet(cpu) {
			cpus = append(cpus, cpu)
		}
	}
	if len(cpus) == 0 {
		return fmt.Errorf("netcluster: this process may use no CPU")
	}
	for i := range hosts {
		hosts[i].CPUs = []int{cpus[i%len(cpus)]}
	}
	return nil
}

// pin binds process pid (a host's holder, whose children inherit it) to
// the host's CPUs.
func pin(pid int, cpus []int) error {
	var set unix.CPUSet
	for _, cpu := range cpus {
		set.Set(cpu)
	}
	if err := unix.SchedSetaffinity(pid, &set); err != nil {
		return fmt.Errorf("netcluster: binding process %d to CPUs %s: %v", pid, cpuList(cpus), err)
	}
	return nil
}

// CPUList is the host's CPUs as taskset writes them ("1", "0,2"); empty
// when the host may use every CPU.
func (h Host) CPUList() string { return cpuList(h.CPUs) }

// cpuList is cpus as taskset and /proc's Cpus_allowed_list write them.
func cpuList(cpus []int) string {
	s := make([]string, len(cpus))
	for i, cpu := range cpus {
		s[i] = strconv.Itoa(cpu)
	}
	return strings.Join(s, ",")
}

// pinned is argv run on the host's CPUs: through taskset when the host has
// CPUs of its own (a command started from outside the host does not
// descend from its holder, so it does not inherit the holder's binding).
func pinned(h Host, argv []string) []string {
	if len(h.CPUs) == 0 {
		return argv
	}
	return append([]string{"taskset", "--cpu-list", h.CPUList()}, argv...)
}
