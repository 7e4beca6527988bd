package mpi

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// Binding ranks to cores (ADIMPI_BIND=core). A rank that waits polls its
// rings; when the scheduler puts two ranks of one job on the same core
// (a loaded machine), each poll keeps its peer off the CPU and a window
// of small messages can take a hundred times as long. Pinned to a core
// of its own each, a rank competes with the rest of the machine only for
// its own core's time. Open MPI binds to cores by default for the same
// reason; here it is asked for, since on a machine shared with other
// jobs a pinned rank cannot move off a busy core.

// bindEnv is the environment variable that asks for binding ("core").
const bindEnv = "ADIMPI_BIND"

// bindCPU picks the CPU for world rank rank of a job whose ranks run on
// hosts (hosts[w] is rank w's host number), among the CPUs this process
// may use (allowed, in increasing order): the local index-th, where the
// local index counts the ranks before it on its host. ok is false when
// the host's ranks outnumber the CPUs: then nobody is pinned.
func bindCPU(hosts []int, rank int, allowed []int) (cpu int, ok bool) {
	local, n := 0, 0
	for w, h := range hosts {
		if h != hosts[rank] {
			continue
		}
		if w < rank {
			local++
		}
		n++
	}
	if n > len(allowed) {
		return 0, false
	}
	return allowed[local], true
}

// allowedCPUs lists the CPUs in set, in increasing order.
func allowedCPUs(set *unix.CPUSet) []int {
	var cpus []int
	for c := 0; c < len(set)*64; c++ {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	return cpus
}

// pinProcess pins every thread of this process to cpu. Threads made later
// are cloned from these and inherit the mask, so the whole process stays
// on cpu.
func pinProcess(cpu int) error {
	var set unix.CPUSet
	set.Set(cpu)
	return setProcessAffinity(&set)
}

// setProcessAffinity sets the affinity of every thread of this process.
// A thread may start while the list is read: a second pass catches it.
func setProcessAffinity(set *unix.CPUSet) error {
	for pass := 0; pass < 2; pass++ {
		tasks, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return err
		}
		for _, t := range tasks {
			tid, err := strconv.Atoi(t.Name())
			if err != nil {
				continue
			}
			if err := unix.SchedSetaffinity(tid, set); err != nil && err != unix.ESRCH {
				return fmt.Errorf("thread %d: %v", tid, err)
			}
		}
	}
	return nil
}

// bind pins this rank to a core of its own when ADIMPI_BIND=core asks and
// the host's ranks fit in this process's CPUs; any other value of
// ADIMPI_BIND but "none" or empty is an error.
func (r *runtime) bind() error {
	switch v := os.Getenv(bindEnv); v {
	case "", "none":
		return nil
	case "core":
	default:
		return fmt.Errorf("%s=%q: want core or none", bindEnv, v)
	}
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return err
	}
	cpu, ok := bindCPU(r.hosts, r.rank, allowedCPUs(&set))
	if !ok {
		return nil // more ranks than CPUs here: pinning would only crowd them
	}
	return pinProcess(cpu)
}
