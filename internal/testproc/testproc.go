// Package testproc starts and lists the machine's processes for tests that check which
// ranks a job started and that nothing of it is left afterwards. The
// simulated hosts share one PID namespace, so /proc shows every host's
// processes.
package testproc

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Proc is one process, read lazily from /proc; a process that has exited
// meanwhile reads as empty.
type Proc struct {
	// PID is the process id.
	PID int
}

func (p Proc) read(name string) []byte {
	b, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(p.PID), name))
	return b
}

// Exe is the path of the process's executable.
func (p Proc) Exe() string {
	s, _ := os.Readlink(filepath.Join("/proc", strconv.Itoa(p.PID), "exe"))
	return s
}

// HasEnv reports whether the process's environment holds the entry kv
// ("NAME=value").
func (p Proc) HasEnv(kv string) bool {
	return slices.Contains(strings.Split(string(p.read("environ")), "\x00"), kv)
}

// Mentions reports whether s occurs in the process's command line or
// environment.
func (p Proc) Mentions(s string) bool {
	return bytes.Contains(p.read("cmdline"), []byte(s)) || bytes.Contains(p.read("environ"), []byte(s))
}

// Cmdline is the process's command line, its arguments joined by spaces.
func (p Proc) Cmdline() string {
	return strings.TrimSpace(string(bytes.ReplaceAll(p.read("cmdline"), []byte{0}, []byte{' '})))
}

// Live reports whether the process is neither a zombie nor dead.
func (p Proc) Live() bool {
	stat := p.read("stat")
	// pid (comm) state ...: the state follows the last ')'.
	i := bytes.LastIndexByte(stat, ')')
	return i >= 0 && i+2 < len(stat) && stat[i+2] != 'Z' && stat[i+2] != 'X'
}

// Find lists the processes other than this one for which keep is true.
func Find(keep func(Proc) bool) []Proc {
	ents, _ := os.ReadDir("/proc")
	var found []Proc
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		if p := (Proc{pid}); keep(p) {
			found = append(found, p)
		}
	}
	return found
}

// PIDs lists the processes other than this one whose executable is exe.
func PIDs(exe string) []int {
	var pids []int
	for _, p := range Find(func(p Proc) bool { return p.Exe() == exe }) {
		pids = append(pids, p.PID)
	}
	return pids
}

// Rank finds the process whose executable is exe and whose environment
// holds kv (a launcher's rank variable, e.g. "PMI_RANK=3"), or returns 0.
func Rank(exe, kv string) int {
	ps := Find(func(p Proc) bool { return p.Exe() == exe && p.HasEnv(kv) })
	if len(ps) == 0 {
		return 0
	}
	return ps[0].PID
}
