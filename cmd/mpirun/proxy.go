package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"unsafe"
)

// A rank on another host runs under a proxy: mpirun itself, started by the
// launcher command on that host as "mpirun -adimpi-rank-proxy DIR prog
// args", which runs prog in directory DIR there (a launcher command that
// enters another mount namespace, as nsenter does, leaves the proxy in a
// directory whose path no longer resolves).
// mpirun cannot signal such a rank's process group: the launcher command
// runs in it too (nsenter, for one, waits for the rank and dies of the
// signals mpirun sends to ask a rank where it waits), and over ssh signals
// do not travel at all. So mpirun writes each signal, as its number on a
// line, to a pipe the proxy inherits as descriptor proxyCtlFD, and the
// proxy sends it to the rank's own process group; the end of the pipe
// (mpirun gone) kills the rank. The proxy exits as the rank did, which the
// launcher command passes on to mpirun.
const (
	proxyFlag  = "-adimpi-rank-proxy"
	proxyCtlFD = 4 // after stdin, stdout, stderr and the PMI socket (3)
)

// proxy runs the command line after proxyFlag (directory, program and
// arguments) as the rank, forwards it the signals mpirun sends, and
// returns (or dies of) the rank's status.
func proxy(args []string) int {
	host, _ := os.Hostname()
	fail := func(code int, format string, a ...any) int {
		fmt.Fprintf(os.Stderr, "mpirun proxy on %s: %s\n", host, fmt.Sprintf(format, a...))
		return code
	}
	if len(args) < 2 {
		return fail(exitUsage, "want %s DIR PROG [ARGS...]", proxyFlag)
	}
	dir, args := args[0], args[1:]
	// A launcher command that closes descriptors would leave the rank
	// without mpirun: say so rather than start it. (The type matters: the
	// Go runtime may have opened a file of its own where one was closed.)
	for _, d := range []struct {
		fd   int
		mode uint32
		what string
	}{{3, syscall.S_IFSOCK, "the PMI socket"}, {proxyCtlFD, syscall.S_IFIFO, "mpirun's control pipe"}} {
		var st syscall.Stat_t
		if err := syscall.Fstat(d.fd, &st); err != nil || st.Mode&syscall.S_IFMT != d.mode {
			return fail(exitCannotExec, "descriptor %d is not %s: the -launcher-exec command must pass open descriptors through", d.fd, d.what)
		}
	}
	ctl := os.NewFile(proxyCtlFD, "mpirun-control")
	syscall.CloseOnExec(proxyCtlFD)
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, waitReportSignal)

	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = dir
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.ExtraFiles = []*os.File{os.NewFile(3, "pmi")} // stays descriptor 3
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		code := exitCannotExec
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			code = exitNotFound
		}
		return fail(code, "%v", err)
	}
	pgid := cmd.Process.Pid
	go func() { // mpirun's signals, until mpirun is gone
		sc := bufio.NewScanner(ctl)
		for sc.Scan() {
			if n, err := strconv.Atoi(strings.TrimSpace(sc.Text())); err == nil && n > 0 {
				_ = syscall.Kill(-pgid, syscall.Signal(n))
			}
		}
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}()
	go func() { // signals sent to the proxy itself
		for s := range sigs {
			_ = syscall.Kill(-pgid, s.(syscall.Signal))
		}
	}()
	_ = cmd.Wait()
	// A child the rank left in its group goes with it, as on this host.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		// Die of the same signal, so that mpirun reports it as it would
		// for a rank on its own host.
		dieOf(ws.Signal())
		return 128 + int(ws.Signal())
	}
	return cmd.ProcessState.ExitCode()
}

// dieOf kills the proxy with sig, as the kernel's default action: Go's own
// handler, which would print a traceback for some signals, is replaced by
// SIG_DFL first. It returns only if sig does not kill.
func dieOf(sig syscall.Signal) {
	signal.Reset(sig)
	// struct sigaction of rt_sigaction(2): handler, flags, restorer, mask.
	var act struct {
		handler  uintptr
		flags    uint64
		restorer uintptr
		mask     uint64
	} // handler 0 is SIG_DFL
	_, _, _ = syscall.RawSyscall6(syscall.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(&act)), 0, unsafe.Sizeof(act.mask), 0, 0)
	// To this thread, so that the signal is taken on the way out of the
	// system call.
	_ = syscall.Tgkill(os.Getpid(), syscall.Gettid(), sig)
}
