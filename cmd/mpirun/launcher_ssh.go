package main

import (
	"bufio"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The ssh launcher. A rank on another host runs under an ssh proxy:
// mpirun's own executable, started on that host by
//
//	ssh HOST exec /path/of/mpirun -adimpi-ssh-proxy
//
// ssh carries neither open descriptors nor (by default) environment
// variables, and it does not forward signals, so everything else travels
// on two other ways. What the proxy must know (the rank, its program,
// arguments, directory and environment, the job secret among them, and
// where to call mpirun back) comes as one JSON line on the proxy's
// standard input, ahead of rank 0's standard input: nothing of it appears
// on a command line that other users of the host could read. The proxy
// then opens two TCP connections back to mpirun, each introduced by a
// line naming its kind, the rank and a token that only this rank's header
// carried: "pmi", which mpirun serves as the rank's PMI-1 connection and
// which the proxy relays to the rank's descriptor 3, and "ctl", on which
// mpirun sends signal numbers, one per line (their end kills the rank), and
// the proxy reports the rank's wait status ("exit N") before it exits. The
// rank's standard output and error are the proxy's own, which ssh carries
// back.
//
// Before any rank starts anywhere, every ssh proxy checks that the program
// and the working directory exist on its host and says "ready" (or
// "missing x:PATH", "missing d:DIR") on its control connection, then waits
// for mpirun's "go". mpirun starts the ranks of its own host, and sends
// "go", only when every proxy is ready; otherwise it says which host lacks
// what, or which host ssh could not reach (ssh's own complaint, held back
// until then, becomes part of that one line), and stops the job.
const (
	sshProxyFlag = "-adimpi-ssh-proxy"
	// launcherSSH and launcherExec are the values of -launcher.
	launcherSSH  = "ssh"
	launcherExec = "exec"
	// backDialTimeout bounds each attempt of a proxy to reach mpirun, and
	// mpirun's wait for a caller's introduction.
	backDialTimeout = 10 * time.Second
)

// sshHeader is what an ssh proxy reads first on its standard input.
type sshHeader struct {
	Rank  int      `json:"rank"`
	Token string   `json:"token"` // introduces the proxy's connections to mpirun
	Back  []string `json:"back"`  // mpirun's addresses (host:port), tried in order
	Dir   string   `json:"dir"`
	Path  string   `json:"path"`
	Argv  []string `json:"argv"` // argv[0] first
	Env   []string `json:"env"`
}

// sshBack is mpirun's end of the proxies' connections: a TCP listener on
// every address of this host, and for every ssh rank its token and where
// its connections go.
type sshBack struct {
	ln     net.Listener
	port   string
	mu     sync.Mutex
	ranks  map[int]*sshSlot
	addrs  map[string][]string // host → mpirun's addresses as seen from there
	events chan sshEvent       // the proxies' checks
}

// sshEvent is a proxy's answer to its check: "" (ready) or "missing ...".
type sshEvent struct {
	rank    int
	missing string
}

// sshSlot is one ssh rank's side of the back channel.
type sshSlot struct {
	token string
	pmi   chan net.Conn // buffered: the PMI connection, once
	ctl   *sshCtl
	gotPM bool
}

// newSSHBack listens for the proxies' connections.
func newSSHBack(np int) (*sshBack, error) {
	ln, err := net.Listen("tcp", ":0")
	if err != nil {
		return nil, fmt.Errorf("listening for the ssh proxies: %v", err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	b := &sshBack{ln: ln, port: port, ranks: map[int]*sshSlot{}, addrs: map[string][]string{}, events: make(chan sshEvent, np)}
	go b.accept()
	return b, nil
}

// close stops listening.
func (b *sshBack) close() { b.ln.Close() }

// accept takes the proxies' connections until the listener closes.
func (b *sshBack) accept() {
	for {
		c, err := b.ln.Accept()
		if err != nil {
			return
		}
		go b.introduce(c)
	}
}

// introduce reads a connection's first line ("pmi|ctl RANK TOKEN") and
// hands it to its rank, or closes it.
func (b *sshBack) introduce(c net.Conn) {
	c.SetReadDeadline(time.Now().Add(backDialTimeout))
	var line []byte
	one := make([]byte, 1)
	for len(line) < 256 { // byte by byte: what follows belongs to the rank
		if _, err := c.Read(one); err != nil {
			c.Close()
			return
		}
		if one[0] == '\n' {
			break
		}
		line = append(line, one[0])
	}
	c.SetReadDeadline(time.Time{})
	f := strings.Fields(string(line))
	if len(f) != 3 {
		c.Close()
		return
	}
	rank, err := strconv.Atoi(f[1])
	b.mu.Lock()
	s := b.ranks[rank]
	b.mu.Unlock()
	if err != nil || s == nil || subtle.ConstantTimeCompare([]byte(f[2]), []byte(s.token)) != 1 {
		c.Close()
		return
	}
	switch f[0] {
	case "pmi":
		b.mu.Lock()
		first := !s.gotPM
		s.gotPM = true
		b.mu.Unlock()
		if !first {
			c.Close()
			return
		}
		s.pmi <- c
	case "ctl":
		s.ctl.attach(c)
	default:
		c.Close()
	}
}

// addrsFor returns mpirun's addresses (host:port) as host should dial
// them: first the address of this host's interface that routes to host,
// then every other address of this host.
func (b *sshBack) addrsFor(host string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if a, ok := b.addrs[host]; ok {
		return a
	}
	var out []string
	seen := map[string]bool{}
	add := func(ip string) {
		if !seen[ip] {
			seen[ip] = true
			out = append(out, net.JoinHostPort(ip, b.port))
		}
	}
	// A UDP "connection" sends nothing: it asks the kernel for a route.
	if c, err := net.Dial("udp", net.JoinHostPort(host, "9")); err == nil {
		add(c.LocalAddr().(*net.UDPAddr).IP.String())
		c.Close()
	}
	if ifs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range ifs {
			if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
				add(n.IP.String())
			}
		}
	}
	b.addrs[host] = out
	return out
}

// sshCtl is mpirun's end of an ssh proxy's control connection, which
// arrives after the proxy has started.
type sshCtl struct {
	rank   int
	events chan<- sshEvent
	mu     sync.Mutex
	conn   net.Conn
	closed bool
	status *syscall.WaitStatus
	ended  chan struct{} // closed when the proxy's reports end
}

func newSSHCtl(rank int, events chan<- sshEvent) *sshCtl {
	return &sshCtl{rank: rank, events: events, ended: make(chan struct{})}
}

// attach takes the proxy's connection, unless the rank is already over.
func (c *sshCtl) attach(conn net.Conn) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.conn != nil {
		conn.Close()
		return
	}
	c.conn = conn
	go func() {
		defer close(c.ended)
		sc := bufio.NewScanner(conn)
		for sc.Scan() {
			if sc.Text() == "ready" {
				c.events <- sshEvent{rank: c.rank}
			}
			if v, ok := strings.CutPrefix(sc.Text(), "missing "); ok {
				c.events <- sshEvent{rank: c.rank, missing: v}
			}
			if v, ok := strings.CutPrefix(sc.Text(), "exit "); ok {
				if n, err := strconv.ParseUint(v, 10, 32); err == nil {
					ws := syscall.WaitStatus(n)
					c.mu.Lock()
					c.status = &ws
					c.mu.Unlock()
				}
			}
		}
	}()
}

// goAhead tells the proxy to start the rank.
func (c *sshCtl) goAhead() { _, _ = c.Write([]byte("go\n")) }

// errNoProxy says that a proxy has not called back (yet).
var errNoProxy = errors.New("the ssh proxy has not called back")

// Write sends a signal line to the proxy.
func (c *sshCtl) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn == nil || c.closed {
		return 0, errNoProxy
	}
	return c.conn.Write(p)
}

// Close ends the control connection, which makes the proxy kill the rank.
func (c *sshCtl) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	if c.conn != nil {
		return c.conn.Close()
	}
	return nil
}

// exitStatus waits up to wait for the proxy's report of the rank's exit.
func (c *sshCtl) exitStatus(wait time.Duration) (syscall.WaitStatus, bool) {
	c.mu.Lock()
	attached := c.conn != nil
	c.mu.Unlock()
	if attached {
		select {
		case <-c.ended:
		case <-time.After(wait):
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.status == nil {
		return 0, false
	}
	return *c.status, true
}

// sshArgv is the command that runs remote (a shell command line) on host
// through ssh: the ssh command's words, {host} replaced by the host or, if
// no word has {host}, the host appended, then remote.
func (j *job) sshArgv(host, remote string) []string {
	argv := launcherArgv(j.launcher, host)
	has := false
	for _, w := range j.launcher {
		has = has || strings.Contains(w, hostPlaceholder)
	}
	if !has {
		argv = append(argv, host)
	}
	return append(argv, remote)
}

// shellQuote quotes s as one word for a POSIX shell.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./=:,@+") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// sshEnvDrop are variables of mpirun's environment that describe this
// host or mpirun's own login, not the job, and are not passed to ranks on
// other hosts.
var sshEnvDrop = map[string]bool{
	"HOSTNAME": true, "PWD": true, "OLDPWD": true, "SHLVL": true, "_": true,
	"SSH_CLIENT": true, "SSH_CONNECTION": true, "SSH_TTY": true, "SSH_AUTH_SOCK": true,
}

// startSSH starts rank r on its host through ssh and follows it.
func (j *job) startSSH(r int, stdin *os.File) error {
	a := j.appOf(r)
	host := j.hostOf[r]
	dir := a.wdir
	if dir == "" {
		dir = "."
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	tok := make([]byte, 16)
	if _, err := rand.Read(tok); err != nil {
		return err
	}
	var env []string
	for _, kv := range j.environ(r) {
		if name, _, _ := strings.Cut(kv, "="); !sshEnvDrop[name] {
			env = append(env, kv)
		}
	}
	hdr, err := json.Marshal(sshHeader{Rank: r, Token: hex.EncodeToString(tok), Back: j.ssh.addrsFor(host),
		Dir: dir, Path: a.binary, Argv: append([]string{a.argv0}, a.args...), Env: env})
	if err != nil {
		return err
	}
	slot := &sshSlot{token: hex.EncodeToString(tok), pmi: make(chan net.Conn, 1), ctl: newSSHCtl(r, j.ssh.events)}
	j.ssh.mu.Lock()
	j.ssh.ranks[r] = slot
	j.ssh.mu.Unlock()

	inR, inW, err := os.Pipe()
	if err != nil {
		return err
	}
	defer inR.Close()
	outR, outW, err := os.Pipe()
	if err != nil {
		inW.Close()
		return err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		inW.Close()
		outR.Close()
		outW.Close()
		return err
	}
	argv := j.sshArgv(host, "exec "+shellQuote(j.self)+" "+sshProxyFlag)
	path, err := exec.LookPath(argv[0])
	if err == nil {
		cmd := &exec.Cmd{
			Path:        path,
			Args:        argv,
			Stdin:       inR,
			Stdout:      outW,
			Stderr:      errW,
			SysProcAttr: &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL},
		}
		err = cmd.Start()
		if err == nil {
			outW.Close()
			errW.Close()
			// stdin goes on after the header; the caller may close its copy.
			var in *os.File
			if stdin != nil {
				if fd, derr := syscall.Dup(int(stdin.Fd())); derr == nil {
					in = os.NewFile(uintptr(fd), "stdin")
				}
			}
			go func() {
				defer inW.Close()
				if _, err := inW.Write(append(hdr, '\n')); err != nil || in == nil {
					if in != nil {
						in.Close()
					}
					return
				}
				io.Copy(inW, in)
				in.Close()
			}()
			rp := &rankProc{rank: r, cmd: cmd, pid: cmd.Process.Pid, served: make(chan struct{}),
				ctl: slot.ctl, pmiConn: slot.pmi, sshCtl: slot.ctl, done: make(chan struct{}), held: newHeldLines(errR)}
			j.ranks[r] = rp
			j.follow(rp, outR, rp.held, nil)
			return nil
		}
	}
	inW.Close()
	outR.Close()
	outW.Close()
	errR.Close()
	errW.Close()
	return fmt.Errorf("ssh for %s: %w", host, err)
}

// sshProxy is the proxy of a rank started through ssh (see the top of this
// file): it reads its header, calls mpirun back, runs the rank, relays its
// PMI connection and mpirun's signals, reports its exit and returns (or
// dies of) the rank's status.
func sshProxy() int {
	host, _ := os.Hostname()
	fail := func(code int, format string, a ...any) int {
		fmt.Fprintf(os.Stderr, "mpirun proxy on %s: %s\n", host, fmt.Sprintf(format, a...))
		return code
	}
	in := bufio.NewReader(os.Stdin)
	line, err := in.ReadBytes('\n')
	var h sshHeader
	if err == nil {
		err = json.Unmarshal(line, &h)
	}
	if err != nil || len(h.Argv) == 0 {
		return fail(exitUsage, "reading mpirun's header on standard input: %v (this is mpirun's own ssh proxy, not a command to run by hand)", err)
	}
	dial := func(kind string) (net.Conn, error) {
		var errs []string
		for _, addr := range h.Back {
			c, err := net.DialTimeout("tcp", addr, backDialTimeout)
			if err != nil {
				errs = append(errs, err.Error())
				continue
			}
			if _, err := fmt.Fprintf(c, "%s %d %s\n", kind, h.Rank, h.Token); err != nil {
				c.Close()
				errs = append(errs, err.Error())
				continue
			}
			return c, nil
		}
		return nil, fmt.Errorf("cannot reach mpirun at %s: %s", strings.Join(h.Back, " or "), strings.Join(errs, "; "))
	}
	ctl, err := dial("ctl")
	if err != nil {
		return fail(1, "rank %d: %v", h.Rank, err)
	}
	defer ctl.Close()
	ctlR := bufio.NewReader(ctl)
	if miss := checkPaths(h.Path, h.Dir); miss != "" {
		fmt.Fprintf(ctl, "missing %s\n", miss)
		io.Copy(io.Discard, ctlR) // until mpirun, which says why, hangs up
		return exitNotFound
	}
	fmt.Fprintf(ctl, "ready\n")
	if line, err := ctlR.ReadString('\n'); err != nil || line != "go\n" {
		return 1 // mpirun stops the job, and says why
	}
	pmiConn, err := dial("pmi")
	if err != nil {
		return fail(1, "rank %d: %v", h.Rank, err)
	}
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return fail(1, "socketpair: %v", err)
	}
	mine, theirs := os.NewFile(uintptr(fds[0]), "pmi"), os.NewFile(uintptr(fds[1]), "pmi-rank")
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		return fail(1, "%v", err)
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, waitReportSignal)

	cmd := &exec.Cmd{Path: h.Path, Args: h.Argv, Dir: h.Dir, Env: h.Env,
		Stdin: stdinR, Stdout: os.Stdout, Stderr: os.Stderr, ExtraFiles: []*os.File{theirs}, // descriptor 3
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}}
	err = cmd.Start()
	theirs.Close()
	stdinR.Close()
	if err != nil {
		code := exitCannotExec
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			code = exitNotFound
		}
		return fail(code, "rank %d: %v", h.Rank, err)
	}
	pgid := cmd.Process.Pid
	go func() { // rank 0's standard input, after the header
		io.Copy(stdinW, in)
		stdinW.Close()
	}()
	toMpirun := make(chan struct{})
	go func() { // the rank's PMI requests
		io.Copy(pmiConn, mine)
		if tc, ok := pmiConn.(*net.TCPConn); ok {
			tc.CloseWrite()
		}
		close(toMpirun)
	}()
	go io.Copy(mine, pmiConn) // mpirun's answers
	go func() {               // mpirun's signals, until mpirun is gone
		sc := bufio.NewScanner(ctlR)
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
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	// What the rank said last (an abort) reaches mpirun before its exit.
	select {
	case <-toMpirun:
	case <-time.After(time.Second):
	}
	ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
	fmt.Fprintf(ctl, "exit %d\n", uint32(ws))
	if ws.Signaled() {
		ctl.Close()
		dieOf(ws.Signal())
		return 128 + int(ws.Signal())
	}
	return cmd.ProcessState.ExitCode()
}

// awaitProxies waits until the ssh proxies of ranks have all checked their
// hosts and then lets their ssh's standard error through. It returns 0,
// or, having said in one line which host lacks what or could not be
// reached, the exit status.
func (j *job) awaitProxies(ranks []int, signals <-chan os.Signal) int {
	pending := map[int]bool{}
	for _, r := range ranks {
		pending[r] = true
	}
	fail := func(code int, msg string) int {
		j.errorf("%s", msg)
		for _, r := range ranks {
			j.ranks[r].held.drop()
			j.ranks[r].sshCtl.Close() // the proxies exit without starting their ranks
		}
		return code
	}
	deadline := time.NewTimer(checkTimeout)
	defer deadline.Stop()
	for len(pending) > 0 {
		select {
		case ev := <-j.ssh.events:
			if pending[ev.rank] && ev.missing != "" {
				return fail(j.missingMessage(j.hostOf[ev.rank], ev.missing))
			}
			delete(pending, ev.rank)
		case ex := <-j.exits:
			j.record(ex)
			if !pending[ex.rank] {
				continue
			}
			said := strings.TrimSpace(j.ranks[ex.rank].held.drop())
			if i := strings.LastIndexByte(said, '\n'); i >= 0 {
				said = said[i+1:]
			}
			status := "status unknown"
			if ex.waited {
				status = fmt.Sprintf("exit status %d", ex.ws.ExitStatus())
				if ex.ws.Signaled() {
					status = fmt.Sprintf("killed by signal %d", int(ex.ws.Signal()))
				}
			}
			if said == "" {
				said = "it exited before its proxy called mpirun back"
			}
			return fail(exitUnreachable, fmt.Sprintf("mpirun: cannot start ranks on %s through %s (%s): %s; not starting the job",
				j.hostOf[ex.rank], j.launcherName(), status, said))
		case sig := <-signals:
			s := sig.(syscall.Signal)
			return fail(128+int(s), fmt.Sprintf("mpirun: received signal %d (%v) while starting the ranks; stopping the job", int(s), s))
		case <-deadline.C:
			for _, r := range ranks {
				if pending[r] {
					return fail(exitUnreachable, fmt.Sprintf("mpirun: cannot start ranks on %s through %s: no answer within %v; not starting the job",
						j.hostOf[r], j.launcherName(), checkTimeout))
				}
			}
		}
	}
	for _, r := range ranks {
		j.ranks[r].held.release()
	}
	return 0
}

// heldLines passes on what it reads from an ssh's standard error only once
// released, keeping it until then: a complaint of ssh about a host it
// cannot reach then becomes part of mpirun's one line about that host
// rather than a line of every rank's. Dropped, it discards everything.
type heldLines struct {
	pr       *io.PipeReader
	pw       *io.PipeWriter
	src      io.ReadCloser
	mu       sync.Mutex
	held     []byte
	released bool
	dropped  bool
	eof      bool
}

func newHeldLines(src io.ReadCloser) *heldLines {
	pr, pw := io.Pipe()
	h := &heldLines{pr: pr, pw: pw, src: src}
	go h.run()
	return h
}

// run reads src to its end.
func (h *heldLines) run() {
	defer h.src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := h.src.Read(buf)
		h.mu.Lock()
		switch {
		case h.dropped:
		case h.released:
			h.pw.Write(buf[:n]) // under the lock: after what release wrote
		default:
			h.held = append(h.held, buf[:n]...)
		}
		h.mu.Unlock()
		if err != nil {
			break
		}
	}
	h.mu.Lock()
	h.eof = true
	if h.released || h.dropped {
		h.pw.Close()
	}
	h.mu.Unlock()
}

// release passes on what was held and everything after it.
func (h *heldLines) release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.released || h.dropped {
		return
	}
	h.released = true
	h.pw.Write(h.held)
	h.held = nil
	if h.eof {
		h.pw.Close()
	}
}

// drop discards everything and returns what was held.
func (h *heldLines) drop() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.released || h.dropped {
		return ""
	}
	h.dropped = true
	s := string(h.held)
	h.held = nil
	h.pw.Close()
	return s
}

// Read reads what has been passed on.
func (h *heldLines) Read(p []byte) (int, error) { return h.pr.Read(p) }

// Close stops reading.
func (h *heldLines) Close() error { return h.pr.Close() }

// checkPaths checks, on the proxy's host, that the rank's program is an
// executable file and its directory a directory, and returns what is
// missing as "x:PATH" or "d:DIR", or "".
func checkPaths(path, dir string) string {
	if fi, err := os.Stat(path); err != nil || !fi.Mode().IsRegular() || syscall.Access(path, 1) != nil {
		return "x:" + path
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return "d:" + dir
	}
	return ""
}
