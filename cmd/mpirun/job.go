package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/adimpi/adimpi/internal/pmi"
	"github.com/adimpi/adimpi/internal/wire"
)

// Teardown timing.
const (
	// killDelay is how long ranks get to exit after SIGTERM (or a forwarded
	// signal) before they are killed.
	killDelay = time.Second
	// settleDelay bounds how long mpirun waits, after a rank fails, for
	// evidence that tells what failed first (its PMI connection draining,
	// the exit of the rank the PMI server lost first).
	settleDelay = 250 * time.Millisecond
	// drainDelay bounds how long mpirun waits for output after every rank
	// has exited (a rank's own children may keep its pipes open).
	drainDelay = 2 * time.Second
	// reportDelay bounds how long mpirun waits, once -timeout has fired,
	// for every rank's wait report.
	reportDelay = 2 * time.Second
)

// waitReportPrefix starts a rank's wait report line (package mpi's
// WaitReportPrefix, which it prints on waitReportSignal).
const (
	waitReportPrefix = "adimpi: rank "
	waitReportSignal = syscall.SIGUSR2
)

// job is one run of one or more programs (apps) on np ranks in all.
type job struct {
	np            int
	apps          []*app
	device        string
	deviceOpts    []string
	env           []string // NAME=VALUE for every rank (-x, -genv)
	tagOutput     bool
	timeout       time.Duration
	timeoutStacks bool
	asyncProgress bool
	keepRseq      bool // leave glibc's rseq registration on (rseq.go)
	stdout        *lineSink
	stderr        *lineSink
	started       func()   // called once every rank has started (or failed to)
	secret        string   // the job secret, hex (wire.EnvSecret)
	launcher      []string // -launcher-exec split into words (ssh: the ssh command)
	launcherKind  string   // launcherSSH or launcherExec
	self          string   // mpirun's executable, the proxy of remote ranks
	ssh           *sshBack // the ssh proxies' way back to mpirun (launcher_ssh.go), nil unless used

	// Where the ranks run (placeRanks): each rank's host name ("" when
	// no host was named) and whether it is another machine, started
	// through the launcher. multiHost: the ranks are not all on this
	// machine, so messages and labels name the host.
	hostOf    []string
	remote    []bool
	multiHost bool
	hosts     []host // every host named (-hosts, -hostfile, Slurm's), where spawns may go

	srv      *pmi.Server
	ranks    []*rankProc
	exits    chan exitEvent
	reports  chan int       // ranks whose wait report has been forwarded
	output   sync.WaitGroup // output forwarders
	stopping bool           // teardown has begun; later exits are expected

	// Spawned jobs (spawn.go): their processes follow the world's in ranks.
	usize       int            // -usize: MPI_UNIVERSE_SIZE (0: np)
	spawns      chan spawnReq  // ranks' spawn requests, served by supervise
	childAborts chan pmi.Abort // spawned processes' aborts (Rank: index in ranks)
	nspawn      int            // spawns so far
}

// app is one program of the command line and its ranks, which follow
// those of the apps before it in the world.
type app struct {
	index  int
	np     int
	binary string // executable to start
	argv0  string // argv[0] for the ranks
	args   []string
	wdir   string   // working directory ("" = mpirun's)
	env    []string // NAME=VALUE for this app's ranks (-env)
	libDir string   // for a C program: the directory of adimpi's libmpich.so.12 (cprog.go)
}

// appOf returns the app that rank r runs.
func (j *job) appOf(r int) *app {
	for _, a := range j.apps {
		if r < a.np {
			return a
		}
		r -= a.np
	}
	panic(fmt.Sprintf("mpirun: rank %d beyond the job's %d ranks", r, j.np))
}

// placeRanks decides where every rank runs (see place).
func (j *job) placeRanks(hosts []host, ppn int, roundRobin bool) {
	j.hostOf = make([]string, j.np)
	j.remote = make([]bool, j.np)
	if len(hosts) == 0 {
		return
	}
	for r, i := range place(hosts, j.np, ppn, roundRobin) {
		j.hostOf[r] = hosts[i].name
		j.remote[r] = !hosts[i].local
		j.multiHost = j.multiHost || j.remote[r]
	}
}

// who names rank r in mpirun's messages: its rank and process, and its
// host when the job spans hosts (the process is then the launcher
// command's for a rank on another host).
func (j *job) who(r int) string {
	if j.ranks[r].child != nil {
		return j.childWho(r)
	}
	pid := j.ranks[r].pid
	switch {
	case !j.multiHost:
		return fmt.Sprintf("mpirun: rank %d (pid %d)", r, pid)
	case j.remote[r]:
		return fmt.Sprintf("mpirun: rank %d on %s (launcher pid %d)", r, j.hostOf[r], pid)
	default:
		return fmt.Sprintf("mpirun: rank %d on %s (pid %d)", r, j.hostOf[r], pid)
	}
}

// label is the prefix of rank r's output lines with -tag-output: "[r] ",
// or "[r@host] " when the job spans hosts.
func (j *job) label(r int) []byte {
	if c := j.ranks[r].child; c != nil {
		if c.host != "" || j.multiHost {
			h := c.host
			if h == "" {
				h, _ = os.Hostname()
			}
			return []byte(fmt.Sprintf("[%d.%d@%s] ", c.spawn, c.rank, h))
		}
		return []byte(fmt.Sprintf("[%d.%d] ", c.spawn, c.rank))
	}
	if j.multiHost {
		return []byte(fmt.Sprintf("[%d@%s] ", r, j.hostOf[r]))
	}
	return []byte(fmt.Sprintf("[%d] ", r))
}

// rankProc is one started rank.
type rankProc struct {
	rank   int
	cmd    *exec.Cmd
	pid    int
	exited bool
	ws     syscall.WaitStatus // set when exited (and waited is true)
	waited bool               // the exit status is known
	served chan struct{}      // closed when the rank's PMI Serve returns
	ctl    io.WriteCloser     // a remote rank's proxy's control channel (proxy.go, launcher_ssh.go), else nil
	// A rank started by an ssh proxy (cmd is nil, pid is its host's ssh):
	// its PMI connection, which arrives when the proxy calls back, and the
	// proxy's control connection, which reports the rank's exit.
	pmiConn <-chan net.Conn
	sshCtl  *sshCtl
	host    *sshHost
	done    chan struct{} // closed when the rank's exit is known
	child   *childInfo    // a spawned process (spawn.go), else nil
	// abandoned: a spawned process stopped because its spawn failed
	// before it ran (spawn.go); its exit is not a failure of the job.
	abandoned bool
}

// exitEvent reports that a rank's process has ended.
type exitEvent struct {
	rank   int
	ws     syscall.WaitStatus
	waited bool
}

// failure is the first thing that went wrong, which decides mpirun's exit
// status.
type failure struct {
	msg  string
	code int
}

// run starts the ranks, supervises them and returns mpirun's exit status.
func (j *job) run() int {
	j.srv = pmi.NewServer(j.np, fmt.Sprintf("adimpi_kvs_%d", os.Getpid()))
	j.exits = make(chan exitEvent, j.np)
	j.reports = make(chan int, j.np)
	j.spawns = make(chan spawnReq)
	j.childAborts = make(chan pmi.Abort, 16)
	j.setupServer(j.srv)

	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(signals)

	if code := j.prepareRemote(); code != 0 {
		j.started()
		return code
	}
	defer func() {
		if j.ssh != nil { // opened here or by a spawn on another host
			j.ssh.close()
		}
	}()
	j.ranks = make([]*rankProc, j.np)
	// Ranks started through ssh go first, one ssh per host: their proxies
	// check that the program is there and wait; only when every one has
	// said so do the proxies start their ranks, and then this host its
	// own (launcher_ssh.go).
	var viaSSH, others []int
	for r := 0; r < j.np; r++ {
		if j.remote[r] && j.ssh != nil {
			viaSSH = append(viaSSH, r)
		} else {
			others = append(others, r)
		}
	}
	stdin0, closeStdin := rank0Stdin()
	defer closeStdin()
	if len(viaSSH) > 0 {
		err := j.startSSH(viaSSH, stdin0)
		if err == nil {
			if j.remote[0] {
				closeStdin() // rank 0's proxy has its own copy
			}
			if code := j.awaitProxies(viaSSH, signals); code != 0 {
				j.started()
				return j.finish(code, true)
			}
			for _, r := range viaSSH {
				j.ranks[r].sshCtl.goAhead()
			}
		} else {
			j.started()
			j.errorf("mpirun: %v; stopping the job", err)
			return j.finish(exitCannotExec, true)
		}
	}
	for _, r := range others {
		var stdin *os.File
		if r == 0 {
			stdin = stdin0
		}
		err := j.start(r, stdin)
		if r == 0 {
			closeStdin() // rank 0 has its own copy
		}
		if err != nil {
			j.started()
			where := ""
			if j.multiHost {
				where = " on " + j.hostOf[r]
			}
			j.errorf("mpirun: cannot start rank %d%s (%s): %v; stopping the job", r, where, j.appOf(r).argv0, err)
			code := exitCannotExec
			if errors.Is(err, os.ErrNotExist) {
				code = exitNotFound
			}
			return j.finish(code, true)
		}
	}
	j.started()
	return j.supervise(signals)
}

// supervise waits for every rank, reacting to failures, aborts, signals
// and the timeout, and returns the exit status.
func (j *job) supervise(signals <-chan os.Signal) int {
	var (
		status   int
		timeoutC <-chan time.Time
		killC    <-chan time.Time
		signaled bool
	)
	if j.timeout > 0 {
		t := time.NewTimer(j.timeout)
		defer t.Stop()
		timeoutC = t.C
	}
	stop := func(f failure, sig syscall.Signal) {
		if f.msg != "" {
			j.errorf("%s", f.msg)
		}
		status = f.code
		j.stopping = true
		j.signalAll(sig)
		killC = time.After(killDelay)
	}
	for j.alive() > 0 {
		select {
		case ev := <-j.exits:
			j.record(ev)
			if j.stopping || j.ranks[ev.rank].abandoned {
				continue
			}
			if f, bad := j.judge(ev.rank); bad {
				stop(j.firstFailure(ev.rank, f), syscall.SIGTERM)
			}
		case a := <-j.srv.Aborts():
			if !j.stopping {
				stop(j.abortFailure(a), syscall.SIGTERM)
			}
		case a := <-j.childAborts:
			if !j.stopping {
				stop(j.abortFailure(a), syscall.SIGTERM)
			}
		case sr := <-j.spawns:
			j.spawn(sr)
		case sig := <-signals:
			s := sig.(syscall.Signal)
			if signaled {
				j.signalAll(syscall.SIGKILL)
				continue
			}
			signaled = true
			if j.stopping {
				j.signalAll(s)
				continue
			}
			stop(failure{
				msg:  fmt.Sprintf("mpirun: received signal %d (%v); forwarding it to all ranks", int(s), s),
				code: 128 + int(s),
			}, s)
		case <-timeoutC:
			if !j.stopping {
				j.errorf("mpirun: job timed out after %v; stopping the job", j.timeout)
				j.stopping = true
				j.collectWaitReports()
				sig := syscall.SIGTERM
				if j.timeoutStacks {
					// A Go rank prints every goroutine's stack.
					j.stderr.labelAll.Store(true)
					j.stdout.labelAll.Store(true)
					sig = syscall.SIGQUIT
				}
				stop(failure{code: exitTimeout}, sig)
			}
		case <-killC:
			j.signalAll(syscall.SIGKILL)
		}
	}
	return j.finish(status, j.stopping)
}

// collectWaitReports asks every running rank where it waits (an adimpi
// rank prints one line, see package mpi's waitinfo.go) and waits until each
// has answered or exited, for at most reportDelay. It names the ranks that
// stay silent.
func (j *job) collectWaitReports() {
	for len(j.reports) > 0 {
		<-j.reports // reports printed before the timeout do not count
	}
	j.signalAll(waitReportSignal)
	answered := make([]bool, len(j.ranks))
	deadline := time.After(reportDelay)
	for {
		waiting := 0
		for _, r := range j.ranks {
			if r != nil && !r.exited && !answered[r.rank] {
				waiting++
			}
		}
		if waiting == 0 {
			return
		}
		select {
		case r := <-j.reports:
			answered[r] = true
		case ev := <-j.exits:
			j.record(ev)
		case <-deadline:
			for _, r := range j.ranks {
				if r != nil && !r.exited && !answered[r.rank] {
					j.errorf("%s did not say where it waits within %v (not an adimpi program, or not in MPI)", j.who(r.rank), reportDelay)
				}
			}
			return
		}
	}
}

// finish waits for the remaining output and, after a failure, for every
// started rank, then returns status.
func (j *job) finish(status int, failed bool) int {
	if failed {
		// Ranks started so far (after a launch failure) and any children
		// they left behind in their process groups.
		j.signalAll(syscall.SIGTERM)
		deadline := time.After(killDelay)
		for j.alive() > 0 {
			select {
			case ev := <-j.exits:
				j.record(ev)
			case <-deadline:
				j.signalAll(syscall.SIGKILL)
				deadline = nil
			}
		}
		for _, r := range j.ranks {
			if r != nil {
				_ = syscall.Kill(-r.pid, syscall.SIGKILL)
			}
		}
	}
	done := make(chan struct{})
	go func() {
		j.output.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(drainDelay):
	}
	return status
}

// alive counts ranks that have not exited.
func (j *job) alive() int {
	n := 0
	for _, r := range j.ranks {
		if r != nil && !r.exited {
			n++
		}
	}
	return n
}

// record notes that a rank has exited.
func (j *job) record(ev exitEvent) {
	r := j.ranks[ev.rank]
	r.exited = true
	r.ws, r.waited = ev.ws, ev.waited
	if r.ctl != nil {
		r.ctl.Close()
	}
}

// signalAll sends sig to the process group of every rank still running;
// to a rank on another host, through its proxy, except SIGKILL, which
// kills the launcher command's process group, and the rank with it.
func (j *job) signalAll(sig syscall.Signal) {
	for _, r := range j.ranks {
		switch {
		case r == nil || r.exited:
		case r.ctl != nil && sig != syscall.SIGKILL:
			if _, err := fmt.Fprintf(r.ctl, "%d\n", int(sig)); err != nil && sig != waitReportSignal {
				// No proxy to tell (an ssh proxy that has not called
				// back has not started the rank): stop its launcher.
				_ = syscall.Kill(-r.pid, sig)
			}
		default:
			_ = syscall.Kill(-r.pid, sig)
		}
	}
}

// judge decides whether a rank's exit is a failure of the job.
func (j *job) judge(rank int) (failure, bool) {
	r := j.ranks[rank]
	who := j.who(rank)
	srv, jrank := j.server(rank)
	if !r.waited {
		return failure{msg: who + " could not be waited for; stopping the job", code: 1}, true
	}
	ws := r.ws
	switch {
	case ws.Signaled():
		sig := ws.Signal()
		return failure{
			msg:  fmt.Sprintf("%s was killed by signal %d (%v); stopping the job", who, int(sig), sig),
			code: 128 + int(sig),
		}, true
	case ws.ExitStatus() != 0:
		when := " before MPI_Finalize"
		if srv.Finalized(jrank) {
			when = ""
		}
		return failure{
			msg:  fmt.Sprintf("%s exited with status %d%s; stopping the job", who, ws.ExitStatus(), when),
			code: ws.ExitStatus(),
		}, true
	case srv.Initialized(jrank) && !srv.Finalized(jrank):
		// A program that never spoke PMI is not an MPI program and may
		// exit as it likes; one that did must finalize.
		return failure{
			msg:  fmt.Sprintf("%s exited with status 0 without calling MPI_Finalize; stopping the job", who),
			code: 1,
		}, true
	}
	return failure{}, false
}

// abortFailure describes a rank's MPI_Abort. An abort whose message is an
// MPI error ("MPI_Init: MPI_ERR_OTHER: ...", as an adimpi rank sends when
// Init fails) is reported as the rank's error rather than as a call of
// MPI_Abort the program never made.
func (j *job) abortFailure(a pmi.Abort) failure {
	msg := strings.TrimSpace(a.Msg)
	who := j.who(a.Rank)
	if mpiError.MatchString(msg) {
		who += " failed: " + msg
	} else {
		who += fmt.Sprintf(" called MPI_Abort with code %d", a.Code)
		if msg != "" {
			who += ": " + msg
		}
	}
	code := a.Code & 0xff
	if code == 0 {
		code = 1
	}
	return failure{msg: who + "; stopping the job", code: code}
}

// mpiError matches an abort message that is an MPI call's error.
var mpiError = regexp.MustCompile(`^MPI_[A-Z][A-Za-z_]*: `)

// firstFailure is called when rank failed with f. The rank's exit
// may be a consequence of an earlier failure that mpirun has not heard
// about yet: an abort still in the PMI connection, or another rank whose
// death released this rank's PMI barrier with an error. It briefly waits
// for that evidence and returns the failure that came first.
func (j *job) firstFailure(rank int, f failure) failure {
	select {
	case <-j.ranks[rank].served:
	case <-time.After(settleDelay):
	}
	select {
	case a := <-j.srv.Aborts():
		return j.abortFailure(a)
	default:
	}
	lost := j.srv.FirstLost()
	if lost < 0 || lost == rank || j.ranks[rank].child != nil {
		return f
	}
	// The PMI server lost another rank first. If that rank's process has
	// ended (or ends right away), it is the one to blame.
	deadline := time.After(settleDelay)
	for {
		if j.ranks[lost].exited {
			if lf, bad := j.judge(lost); bad {
				return lf
			}
			return f
		}
		select {
		case e := <-j.exits:
			j.record(e)
		case a := <-j.srv.Aborts():
			return j.abortFailure(a)
		case <-deadline:
			return f
		}
	}
}

// errorf prints one of mpirun's own messages to stderr as a whole line.
func (j *job) errorf(format string, a ...any) {
	j.stderr.writeLine(nil, []byte(fmt.Sprintf(format, a...)+"\n"))
}

// environ returns the environment of rank r: mpirun's own, without any PMI
// or device settings it inherited, then -x and -genv, then the app's -env,
// then the job's own variables, jobVars (which nothing overrides).
func (j *job) environ(r int) []string {
	a := j.appOf(r)
	set := map[string]string{
		"PMI_FD":            "3",
		"PMI_RANK":          strconv.Itoa(r),
		"PMI_SIZE":          strconv.Itoa(j.np),
		"ADIMPI_APPNUM":     strconv.Itoa(a.index),
		"ADIMPI_DEVICE":     j.device,
		"ADIMPI_DEVICE_OPT": strings.Join(j.deviceOpts, ","),
		wire.EnvSecret:      j.secret,
	}
	if j.asyncProgress {
		set["ADIMPI_ASYNC_PROGRESS"] = "1"
	}
	drop := map[string]bool{"PMI_PORT": true, "PMI_ID": true}
	for _, name := range jobVars {
		drop[name] = true
	}
	extra := append(append([]string(nil), j.env...), a.env...)
	for _, kv := range extra {
		name, _, _ := strings.Cut(kv, "=")
		drop[name] = true
	}
	var env []string
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); !drop[name] {
			env = append(env, kv)
		}
	}
	// exec.Cmd keeps the last of duplicate names: -env beats -genv, and
	// the job's own variables beat both.
	env = append(env, extra...)
	for _, name := range jobVars {
		if v, ok := set[name]; ok {
			env = append(env, name+"="+v)
		}
	}
	if a.libDir != "" {
		env = withLibraryDir(env, a.libDir)
	}
	if !j.keepRseq {
		env = withoutRseq(env)
	}
	return env
}

// jobVars are the variables mpirun sets for every rank, in the order they
// follow the rest of its environment; -x, -genv and -env do not override
// them (an inherited one is dropped).
var jobVars = []string{"PMI_FD", "PMI_RANK", "PMI_SIZE", "ADIMPI_APPNUM", "ADIMPI_DEVICE", "ADIMPI_DEVICE_OPT", "ADIMPI_ASYNC_PROGRESS", wire.EnvSecret}

// start launches rank r with the given stdin (nil for /dev/null) and
// follows it. A rank on another host is started by the exec launcher,
// which gets mpirun's control pipe as descriptor 4 (proxy.go).
func (j *job) start(r int, stdin *os.File) error {
	a := j.appOf(r)
	path, args := a.binary, append([]string{a.argv0}, a.args...)
	var ctlR, ctlW *os.File
	var extra []*os.File
	if j.remote[r] {
		var err error
		if path, args, err = j.launch(r); err != nil {
			return err
		}
		if ctlR, ctlW, err = os.Pipe(); err != nil {
			return err
		}
		defer ctlR.Close()
		extra = append(extra, ctlR) // fd 4, proxyCtlFD
	}
	cmd, conn, outR, errR, err := startProcess(path, args, a.wdir, j.environ(r), stdin, extra...)
	if err != nil {
		if ctlW != nil {
			ctlW.Close()
		}
		return err
	}
	rp := &rankProc{rank: r, cmd: cmd, pid: cmd.Process.Pid, served: make(chan struct{})}
	if ctlW != nil { // not a nil *os.File in the interface: signalAll tells them apart
		rp.ctl = ctlW
	}
	j.ranks[r] = rp
	j.follow(rp, outR, errR, conn)
	return nil
}

// startProcess starts path with args in dir (mpirun's if "") with env,
// stdin (nil: /dev/null), one end of a new PMI socket as descriptor 3 and
// extra after it, and its standard output and error on new pipes, in a
// process group of its own that dies with mpirun. It returns the process,
// mpirun's end of the PMI socket and the pipes' read ends.
func startProcess(path string, args []string, dir string, env []string, stdin *os.File, extra ...*os.File) (*exec.Cmd, net.Conn, *os.File, *os.File, error) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, nil, nil, fmt.Errorf("socketpair: %w", err)
	}
	parentEnd := os.NewFile(uintptr(fds[0]), "pmi")
	childEnd := os.NewFile(uintptr(fds[1]), "pmi-child")
	defer childEnd.Close()
	conn, err := net.FileConn(parentEnd)
	parentEnd.Close()
	if err != nil {
		return nil, nil, nil, nil, fmt.Errorf("pmi socket: %w", err)
	}
	var pipes [4]*os.File // out read, out write, err read, err write
	closeAll := func() {
		conn.Close()
		for _, f := range pipes {
			if f != nil {
				f.Close()
			}
		}
	}
	for i := 0; i < 4; i += 2 {
		if pipes[i], pipes[i+1], err = os.Pipe(); err != nil {
			closeAll()
			return nil, nil, nil, nil, err
		}
	}
	cmd := &exec.Cmd{
		Path:       path,
		Args:       args,
		Dir:        dir,
		Env:        env,
		Stdout:     pipes[1],
		Stderr:     pipes[3],
		ExtraFiles: append([]*os.File{childEnd}, extra...), // fd 3: PMI_FD
		SysProcAttr: &syscall.SysProcAttr{
			Setpgid:   true,            // own group: signals reach its children, the tty's ^C reaches only mpirun
			Pdeathsig: syscall.SIGKILL, // do not outlive a killed mpirun
		},
	}
	if stdin != nil {
		cmd.Stdin = stdin
	}
	if err := cmd.Start(); err != nil {
		closeAll()
		return nil, nil, nil, nil, err
	}
	pipes[1].Close()
	pipes[3].Close()
	return cmd, conn, pipes[0], pipes[2], nil
}

// follow starts the goroutines that serve a started rank or spawned
// process: its output forwarders, its PMI server and its exit watcher.
func (j *job) follow(rp *rankProc, outR, errR io.ReadCloser, conn net.Conn) {
	r := rp.rank
	label := j.label(r)
	var prefix []byte
	if j.tagOutput {
		prefix = label
	}
	// A wait report line answers for the rank (collectWaitReports); a
	// spawned process's names its rank in its own world, so any report
	// line from it answers for it.
	report := []byte(fmt.Sprintf("%s%d: ", waitReportPrefix, r))
	if rp.child != nil {
		report = []byte(waitReportPrefix)
	}
	j.output.Add(2)
	go func() {
		defer j.output.Done()
		forwardLines(outR, j.stdout, prefix, label, nil)
	}()
	go func() {
		defer j.output.Done()
		forwardLines(errR, j.stderr, prefix, label, func(line []byte) {
			if bytes.HasPrefix(line, report) {
				select {
				case j.reports <- r:
				default:
				}
			}
		})
	}()
	go func() {
		defer close(rp.served)
		if conn == nil { // an ssh proxy's connection, when it calls back
			select {
			case conn = <-rp.pmiConn:
			case <-rp.done:
				return
			}
		}
		srv, jr := j.server(r)
		err := srv.Serve(jr, conn)
		if err != nil && !errors.Is(err, pmi.ErrDisconnected) && !errors.Is(err, pmi.ErrAborted) {
			j.errorf("mpirun: %v", err)
		}
	}()
	go func() {
		var ev exitEvent
		if rp.host != nil {
			ev = j.waitSSHRank(rp) // no process of its own here
		} else {
			_ = rp.cmd.Wait() // the exit status is in ProcessState
			ev = exitEvent{rank: r}
			if ps := rp.cmd.ProcessState; ps != nil {
				ev.ws, ev.waited = ps.Sys().(syscall.WaitStatus)
			}
		}
		if rp.done != nil {
			close(rp.done)
		}
		j.exits <- ev
	}()
}

// launch returns the path and arguments of the process that starts rank
// r on its host (launchArgv).
func (j *job) launch(r int) (string, []string, error) {
	a := j.appOf(r)
	return j.launchArgv(j.hostOf[r], a.wdir, a.binary, a.args)
}

// launchArgv returns the path and arguments of the process that starts
// binary with args in wdir ("" = mpirun's) on host: the exec launcher's
// command for the host followed by mpirun's own executable as the
// process's proxy (see proxy.go), the working directory, the program and
// its arguments. Both executables and the directory must exist at the
// same paths on that host. The launcher command must keep the environment
// and the open descriptors (3 is the PMI socket, 4 the proxy's control
// pipe) and kill what it started when it is killed itself, as "netcluster
// exec" and "ip netns exec" do.
func (j *job) launchArgv(host, wdir, binary string, args []string) (string, []string, error) {
	argv := launcherArgv(j.launcher, host)
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return "", nil, fmt.Errorf("launcher for %s: %w", host, err)
	}
	if wdir == "" {
		wdir = "."
	}
	if wdir, err = filepath.Abs(wdir); err != nil {
		return "", nil, err
	}
	argv = append(argv, j.self, proxyFlag, wdir, binary)
	return path, append(argv, args...), nil
}

// rank0Stdin returns what rank 0 reads as standard input and a cleanup
// function. A terminal is not handed to rank 0 directly: rank 0 runs in
// its own process group and would be stopped (SIGTTIN) reading it, so
// mpirun copies the terminal into a pipe, and only while mpirun is in the
// terminal's foreground. Anything else (file, pipe) is passed as it is.
func rank0Stdin() (*os.File, func()) {
	nop := func() {}
	if _, err := os.Stdin.Stat(); err != nil {
		return nil, nop // no usable stdin: /dev/null
	}
	if _, err := unix.IoctlGetTermios(int(os.Stdin.Fd()), unix.TCGETS); err != nil {
		return os.Stdin, nop
	}
	fg, err := unix.IoctlGetInt(int(os.Stdin.Fd()), unix.TIOCGPGRP)
	if err != nil || fg != unix.Getpgrp() {
		return nil, nop // in the background: leave the terminal alone
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, nop
	}
	go func() {
		_, _ = io.Copy(w, os.Stdin)
		w.Close()
	}()
	return r, func() { r.Close() }
}
