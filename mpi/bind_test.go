package mpi

import (
	"os"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// bindCPU gives each rank of a host its own CPU, in rank order among the
// CPUs allowed, and none when the host's ranks outnumber them.
func TestBindCPU(t *testing.T) {
	for _, c := range []struct {
		hosts   []int
		rank    int
		allowed []int
		cpu     int
		ok      bool
	}{
		{[]int{0, 0}, 0, []int{0, 1}, 0, true},
		{[]int{0, 0}, 1, []int{0, 1}, 1, true},
		{[]int{0, 1, 0, 1}, 2, []int{0, 1}, 1, true}, // the second rank on host 0
		{[]int{0, 1, 0, 1}, 1, []int{4, 7}, 4, true}, // the first on host 1, among CPUs 4 and 7
		{[]int{0, 0, 0}, 1, []int{0, 1}, 0, false},   // three ranks, two CPUs
	} {
		cpu, ok := bindCPU(c.hosts, c.rank, c.allowed)
		if ok != c.ok || ok && cpu != c.cpu {
			t.Errorf("bindCPU(%v, %d, %v) = %d, %v; want %d, %v", c.hosts, c.rank, c.allowed, cpu, ok, c.cpu, c.ok)
		}
	}
}

// pinProcess pins every thread the process has, not only the caller's:
// afterwards each of them may run on that one CPU alone. The test puts
// the process's mask back.
func TestPinProcess(t *testing.T) {
	var orig unix.CPUSet
	if err := unix.SchedGetaffinity(0, &orig); err != nil {
		t.Fatal(err)
	}
	cpus := allowedCPUs(&orig)
	if len(cpus) == 0 {
		t.Fatal("this process may run on no CPU at all")
	}
	cpu := cpus[len(cpus)-1]
	if err := pinProcess(cpu); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := setProcessAffinity(&orig); err != nil {
			t.Errorf("putting the mask back: %v", err)
		}
	}()
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	if len(tasks) < 2 {
		t.Fatalf("the test process has %d threads; the check needs more than the caller's", len(tasks))
	}
	for _, task := range tasks {
		tid, _ := strconv.Atoi(task.Name())
		var set unix.CPUSet
		if err := unix.SchedGetaffinity(tid, &set); err != nil {
			continue // the thread has exited
		}
		if got := allowedCPUs(&set); len(got) != 1 || got[0] != cpu {
			t.Errorf("thread %d may run on CPUs %v, want only %d", tid, got, cpu)
		}
	}
}
