// Package testnote prints, from a test, lines that "go test ./..." shows
// while the tests run and even when they pass: a skipped test's reason and
// the progress of a long multi-process suite.
//
// In package-list mode (go test ./..., the README's test command) the go
// command holds back the whole output of a test binary, standard error
// included, and prints only "ok" for a package that passes: t.Skip's
// reason and any progress line vanish. A note therefore goes straight to
// the go command's own standard error (the test binary's parent's
// descriptor 2, through /proc) when that is a terminal, a pipe (a CI log)
// or a file opened for appending, and to the test's standard error
// otherwise (a test binary run by hand, or a go command whose error output
// is a file it writes through its own offset, which would overwrite the
// notes).
package testnote

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// out is where notes go, chosen on first use.
var out = sync.OnceValue(func() io.Writer {
	ppid := os.Getppid()
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", ppid))
	if err != nil || filepath.Base(exe) != "go" {
		return os.Stderr
	}
	fd2 := fmt.Sprintf("/proc/%d/fd/2", ppid)
	fi, err := os.Stat(fd2)
	if err != nil || fi.Mode().IsRegular() && !appending(ppid) || !fi.Mode().IsRegular() && fi.Mode()&(os.ModeCharDevice|os.ModeNamedPipe|os.ModeSocket) == 0 {
		return os.Stderr
	}
	f, err := os.OpenFile(fd2, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return os.Stderr
	}
	return f
})

// appending reports whether process pid's descriptor 2 was opened with
// O_APPEND (a shell's 2>>), so that notes appended to the file cannot be
// overwritten by the process's own writes.
func appending(pid int) bool {
	info, err := os.ReadFile(fmt.Sprintf("/proc/%d/fdinfo/2", pid))
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(info), "\n") {
		if v, ok := strings.CutPrefix(line, "flags:"); ok {
			flags, err := strconv.ParseUint(strings.TrimSpace(v), 8, 64)
			return err == nil && flags&syscall.O_APPEND != 0
		}
	}
	return false
}

var mu sync.Mutex

// Printf prints one line (a newline is added) where the user running go
// test sees it at once.
func Printf(format string, a ...any) {
	line := fmt.Sprintf(format, a...) + "\n"
	mu.Lock()
	defer mu.Unlock()
	io.WriteString(out(), line)
}

// Skip skips t with reason, printing "SKIP <test>: <reason>" where the user
// sees it; in CI (CI=true), where every prerequisite is installed, it fails
// the test instead.
func Skip(t testing.TB, reason string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s (CI=true: CI must install what this test needs)", reason)
	}
	Printf("SKIP %s: %s", t.Name(), reason)
	t.Skip(reason)
}
