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

// The ssh launcher. mpirun starts one proxy on every other host of the
// job, its own executable run by
//
//	ssh HOST exec /path/of/mpirun -adimpi-ssh-proxy
//
// and that proxy starts the host's ranks. ssh carries neither open
// descriptors nor (by default) environment variables, and it does not
// forward signals, so everything else travels on two other ways. What the
// proxy must know (its ranks with their programs, arguments, directories
// and environments, the job secret among them, and where to call mpirun
// back) comes as one JSON line on the proxy's standard input, ahead of
// rank 0's standard input: nothing of it appears on a command line that
// other users of the host could read. Then, for each of its ranks, the
// proxy opens TCP connections back to mpirun, each introduced by a line
// naming its kind, the rank and a token that only the header carried:
// "ctl", on which mpirun sends signal numbers, one per line (its end kills
// the rank), and the proxy reports the rank's wait status ("exit N");
// "pmi", which mpirun serves as the rank's PMI-1 connection and which the
// proxy relays to the rank's descriptor 3; "out" and "err", the rank's
// standard output and error. ssh's own standard error carries only what
// ssh and the proxy have to say.
//
// Before any rank starts anywhere, the proxy checks that each rank's
// program and working directory exist on its host, opens the rank's
// connections and says "ready" (or "missing x:PATH", "missing d:DIR") on
// its control connection, then waits for mpirun's "go". mpirun sends "go",
// and starts the ranks of its own host, only when every proxy is ready;
// otherwise it says which
// host lacks what, or which host ssh could not reach (ssh's own complaint,
// held back until then, becomes part of that one line), and stops the job.
const (
	sshProxyFlag = "-adimpi-ssh-proxy"
	// launcherSSH, launcherExec and launcherSlurm are the values of
	// -launcher (slurm: see slurm.go).
	launcherSSH   = "ssh"
	launcherExec  = "exec"
	launcherSlurm = "slurm"
	// backDialTimeout bounds each attempt of a proxy to reach mpirun, and
	// mpirun's wait for a caller's introduction.
	backDialTimeout = 10 * time.Second
)

// sshHeader is what an ssh proxy reads first on its standard input.
type sshHeader struct {
	Token string    `json:"token"` // introduces the proxy's connections to mpirun
	Back  []string  `json:"back"`  // mpirun's addresses (host:port), tried in order
	Ranks []sshRank `json:"ranks"`
}

// sshRank is one rank of an ssh proxy's host.
type sshRank struct {
	Rank  int      `json:"rank"`
	Dir   string   `json:"dir"`
	Path  string   `json:"path"`
	Argv  []string `json:"argv"` // argv[0] first
	Env   []string `json:"env"`
	Stdin bool     `json:"stdin"` // the rest of the proxy's standard input is the rank's
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
	hosts  []*sshHost
}

// sshEvent is a proxy's answer to its check: "" (ready) or "missing ...".
type sshEvent struct {
	rank    int
	missing string
}

// sshSlot is one ssh rank's side of the back channel: its connections,
// each taken once.
type sshSlot struct {
	token string
	conns map[string]chan net.Conn // "pmi", "out", "err"; buffered
	taken map[string]bool
	ctl   *sshCtl
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

// introduce reads a connection's first line ("KIND RANK TOKEN", KIND one
// of ctl, pmi, out, err) and hands it to its rank, or closes it.
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
	if f[0] == "ctl" {
		s.ctl.attach(c)
		return
	}
	b.mu.Lock()
	ch, ok := s.conns[f[0]]
	first := ok && !s.taken[f[0]]
	s.taken[f[0]] = true
	b.mu.Unlock()
	if !first {
		c.Close()
		return
	}
	ch <- c
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
// no word has {host}, the host appended, then remote. Plain ssh (no
// -launcher-exec) gets BatchMode, so that a host that would ask for a
// password or about its key fails at once with ssh's reason instead.
func (j *job) sshArgv(host, remote string) []string {
	argv := launcherArgv(j.launcher, host)
	if len(j.launcher) == 1 && j.launcher[0] == "ssh" {
		argv = append(argv, "-o", "BatchMode=yes")
	}
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

// sshHost is the ssh process that runs one host's proxy.
type sshHost struct {
	name   string
	cmd    *exec.Cmd
	held   *heldLines    // ssh's standard error and output
	done   chan struct{} // closed when ssh has exited
	ws     syscall.WaitStatus
	waited bool
}

// startSSH starts, through one ssh per host, the proxies of ranks (all on
// other hosts), stdin0 going to rank 0's, and follows the ranks.
func (j *job) startSSH(ranks []int, stdin0 *os.File) error {
	byHost := map[string][]sshStart{}
	var hosts []string
	for _, r := range ranks {
		h := j.hostOf[r]
		if byHost[h] == nil {
			hosts = append(hosts, h)
		}
		a := j.appOf(r)
		rk, err := j.sshRank(r, a.wdir, a.binary, append([]string{a.argv0}, a.args...), j.environ(r))
		if err != nil {
			return err
		}
		rk.Stdin = r == 0 && stdin0 != nil
		byHost[h] = append(byHost[h], sshStart{rk: rk})
	}
	for _, h := range hosts {
		var in *os.File
		for _, p := range byHost[h] {
			if p.rk.Stdin {
				in = stdin0
			}
		}
		if err := j.startSSHHost(h, byHost[h], in, j.ssh.events); err != nil {
			for _, hp := range j.ssh.hosts {
				hp.held.drop()
			}
			return err
		}
	}
	return nil
}

// sshStart is one process an ssh proxy starts: its entry in the header
// and, for a spawned process, what it is.
type sshStart struct {
	rk    sshRank
	child *childInfo
}

// sshRank is the header entry of process index r (in j.ranks) running
// path with argv (argv[0] first) in wdir ("" = mpirun's) with env, less
// the variables that describe this host (sshEnvDrop).
func (j *job) sshRank(r int, wdir, path string, argv, env []string) (sshRank, error) {
	if wdir == "" {
		wdir = "."
	}
	dir, err := filepath.Abs(wdir)
	if err != nil {
		return sshRank{}, err
	}
	var keep []string
	for _, kv := range env {
		if name, _, _ := strings.Cut(kv, "="); !sshEnvDrop[name] {
			keep = append(keep, kv)
		}
	}
	return sshRank{Rank: r, Dir: dir, Path: path, Argv: argv, Env: keep}, nil
}

// startSSHHost starts the proxy of host for procs (each one's index in
// j.ranks is its rk.Rank), stdin (if not nil) going to the one whose Stdin
// is set, and follows them; the proxy's checks ("ready", "missing ...")
// arrive on events.
func (j *job) startSSHHost(host string, procs []sshStart, stdin *os.File, events chan<- sshEvent) error {
	tok := make([]byte, 16)
	if _, err := rand.Read(tok); err != nil {
		return err
	}
	hdr := sshHeader{Token: hex.EncodeToString(tok), Back: j.ssh.addrsFor(host)}
	for _, p := range procs {
		hdr.Ranks = append(hdr.Ranks, p.rk)
	}
	line, err := json.Marshal(hdr)
	if err != nil {
		return err
	}
	argv := j.sshArgv(host, "exec "+shellQuote(j.self)+" "+sshProxyFlag)
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return fmt.Errorf("ssh for %s: %w", host, err)
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		return err
	}
	defer inR.Close()
	errR, errW, err := os.Pipe()
	if err != nil {
		inW.Close()
		return err
	}
	cmd := &exec.Cmd{Path: path, Args: argv, Stdin: inR, Stdout: errW, Stderr: errW,
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}}
	err = cmd.Start()
	errW.Close()
	if err != nil {
		inW.Close()
		errR.Close()
		return fmt.Errorf("ssh for %s: %w", host, err)
	}
	hp := &sshHost{name: host, cmd: cmd, held: newHeldLines(errR), done: make(chan struct{})}
	j.ssh.hosts = append(j.ssh.hosts, hp)
	// What ssh and the proxy say, once the proxy is ready, is mpirun's.
	j.output.Add(1)
	go func() {
		defer j.output.Done()
		forwardLines(hp.held, j.stderr, nil, nil, nil)
	}()
	go func() {
		_ = cmd.Wait()
		hp.ws, hp.waited = cmd.ProcessState.Sys().(syscall.WaitStatus)
		// What ssh said before it exited, read before anyone asks.
		select {
		case <-hp.held.eof:
		case <-time.After(settleDelay):
		}
		close(hp.done)
	}()
	// Standard input: the header, then rank 0's if stdin is set (a copy:
	// the caller closes its own).
	var in *os.File
	if stdin != nil {
		if fd, derr := syscall.Dup(int(stdin.Fd())); derr == nil {
			in = os.NewFile(uintptr(fd), "stdin")
		}
	}
	go func() {
		defer inW.Close()
		_, err := inW.Write(append(line, '\n'))
		if in != nil {
			if err == nil {
				io.Copy(inW, in)
			}
			in.Close()
		}
	}()
	for _, p := range procs {
		r := p.rk.Rank
		slot := &sshSlot{token: hdr.Token, taken: map[string]bool{}, ctl: newSSHCtl(r, events), conns: map[string]chan net.Conn{}}
		for _, k := range []string{"pmi", "out", "err"} {
			slot.conns[k] = make(chan net.Conn, 1)
		}
		j.ssh.mu.Lock()
		j.ssh.ranks[r] = slot
		j.ssh.mu.Unlock()
		rp := &rankProc{rank: r, pid: cmd.Process.Pid, served: make(chan struct{}), ctl: slot.ctl,
			pmiConn: slot.conns["pmi"], sshCtl: slot.ctl, host: hp, done: make(chan struct{}), child: p.child}
		j.ranks[r] = rp
		j.follow(rp, &lazyConn{ch: slot.conns["out"], gone: rp.done}, &lazyConn{ch: slot.conns["err"], gone: rp.done}, nil)
	}
	return nil
}

// waitSSHRank waits for the end of rank rp, which runs under its host's
// ssh proxy, and returns it: the status the proxy reported, or, when the
// proxy could not report (ssh failed, the host went away), ssh's.
func (j *job) waitSSHRank(rp *rankProc) exitEvent {
	ev := exitEvent{rank: rp.rank}
	select {
	case <-rp.sshCtl.ended:
	case <-rp.host.done:
	}
	if ws, ok := rp.sshCtl.exitStatus(settleDelay); ok {
		ev.ws, ev.waited = ws, true
		return ev
	}
	select {
	case <-rp.host.done:
	case <-time.After(settleDelay):
	}
	select {
	case <-rp.host.done:
		// A proxy that exits 0 without a report has not run the rank.
		if rp.host.waited && !(rp.host.ws.Exited() && rp.host.ws.ExitStatus() == 0) {
			ev.ws, ev.waited = rp.host.ws, true
		}
	default:
	}
	return ev
}

// lazyConn reads a connection that an ssh proxy opens later: until it
// arrives, Read waits; if the rank ends first, Read reports the end.
type lazyConn struct {
	ch   <-chan net.Conn
	gone <-chan struct{}
	c    net.Conn
}

func (l *lazyConn) Read(p []byte) (int, error) {
	if l.c == nil {
		select {
		case l.c = <-l.ch:
		case <-l.gone:
			select {
			case l.c = <-l.ch:
			default:
				return 0, io.EOF
			}
		}
	}
	return l.c.Read(p)
}

func (l *lazyConn) Close() error {
	if l.c != nil {
		return l.c.Close()
	}
	return nil
}

// sshProxy is the proxy that ssh starts on a host (see the top of this
// file): it reads its header, runs its ranks and returns when they are
// all over.
func sshProxy() int {
	host, _ := os.Hostname()
	in := bufio.NewReader(os.Stdin)
	line, err := in.ReadBytes('\n')
	var h sshHeader
	if err == nil {
		err = json.Unmarshal(line, &h)
	}
	if err != nil || len(h.Ranks) == 0 {
		fmt.Fprintf(os.Stderr, "mpirun proxy on %s: reading mpirun's header on standard input: %v (this is mpirun's own ssh proxy, not a command to run by hand)\n", host, err)
		return exitUsage
	}
	p := &sshProxyState{host: host, hdr: h, pgids: map[int]bool{}}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, waitReportSignal)
	go func() { // signals sent to the proxy itself go to every rank
		for s := range sigs {
			p.mu.Lock()
			for pg := range p.pgids {
				_ = syscall.Kill(-pg, s.(syscall.Signal))
			}
			p.mu.Unlock()
		}
	}()
	codes := make([]int, len(h.Ranks))
	var wg sync.WaitGroup
	for i, rk := range h.Ranks {
		var stdin io.Reader
		if rk.Stdin {
			stdin = in
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i] = p.runRank(rk, stdin)
		}()
	}
	wg.Wait()
	for _, c := range codes {
		if c != 0 {
			return c
		}
	}
	return 0
}

// sshProxyState is an ssh proxy's: its header and its ranks' process
// groups.
type sshProxyState struct {
	host  string
	hdr   sshHeader
	mu    sync.Mutex
	pgids map[int]bool
}

// fail says what went wrong on ssh's standard error and returns code.
func (p *sshProxyState) fail(code int, format string, a ...any) int {
	fmt.Fprintf(os.Stderr, "mpirun proxy on %s: %s\n", p.host, fmt.Sprintf(format, a...))
	return code
}

// dial opens a connection of kind for rank back to mpirun.
func (p *sshProxyState) dial(kind string, rank int) (net.Conn, error) {
	var errs []string
	for _, addr := range p.hdr.Back {
		c, err := net.DialTimeout("tcp", addr, backDialTimeout)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		if _, err := fmt.Fprintf(c, "%s %d %s\n", kind, rank, p.hdr.Token); err != nil {
			c.Close()
			errs = append(errs, err.Error())
			continue
		}
		return c, nil
	}
	return nil, fmt.Errorf("cannot reach mpirun at %s: %s", strings.Join(p.hdr.Back, " or "), strings.Join(errs, "; "))
}

// await opens rank's control connection, checks the rank's program and
// directory, opens the rank's other connections, reports, and waits for
// mpirun's go. It returns the connections by kind and a reader of the
// control connection, or nil and the proxy's status for the rank.
func (p *sshProxyState) await(rk sshRank) (map[string]net.Conn, *bufio.Reader, int) {
	conns := map[string]net.Conn{}
	closeAll := func() {
		for _, c := range conns {
			c.Close()
		}
	}
	ctl, err := p.dial("ctl", rk.Rank)
	if err != nil {
		return nil, nil, p.fail(1, "rank %d: %v", rk.Rank, err)
	}
	conns["ctl"] = ctl
	ctlR := bufio.NewReader(ctl)
	if miss := checkPaths(rk.Path, rk.Dir); miss != "" {
		fmt.Fprintf(ctl, "missing %s\n", miss)
		io.Copy(io.Discard, ctlR) // until mpirun, which says why, hangs up
		closeAll()
		return nil, nil, exitNotFound
	}
	for _, k := range []string{"pmi", "out", "err"} {
		c, err := p.dial(k, rk.Rank)
		if err != nil {
			closeAll()
			return nil, nil, p.fail(1, "rank %d: %v", rk.Rank, err)
		}
		conns[k] = c
	}
	fmt.Fprintf(ctl, "ready\n")
	if line, err := ctlR.ReadString('\n'); err != nil || line != "go\n" {
		closeAll()
		return nil, nil, 1 // mpirun stops the job, and says why
	}
	return conns, ctlR, 0
}

// runRank checks, starts and follows one rank (see the top of this file)
// and returns the proxy's status for it.
func (p *sshProxyState) runRank(rk sshRank, stdin io.Reader) int {
	conns, ctlR, code := p.await(rk)
	if conns == nil {
		return code
	}
	for _, c := range conns {
		defer c.Close()
	}
	ctl := conns["ctl"]
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return p.fail(1, "socketpair: %v", err)
	}
	mine, theirs := os.NewFile(uintptr(fds[0]), "pmi"), os.NewFile(uintptr(fds[1]), "pmi-rank")
	defer mine.Close()
	cmd := &exec.Cmd{Path: rk.Path, Args: rk.Argv, Dir: rk.Dir, Env: rk.Env,
		Stdout: conns["out"], Stderr: conns["err"], ExtraFiles: []*os.File{theirs}, // descriptor 3
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL},
		WaitDelay:   drainDelay} // output copied until the rank's children let go
	var stdinW *os.File
	if stdin != nil {
		r, w, err := os.Pipe()
		if err != nil {
			return p.fail(1, "%v", err)
		}
		defer r.Close()
		cmd.Stdin, stdinW = r, w
	}
	err = cmd.Start()
	theirs.Close()
	if err != nil {
		if stdinW != nil {
			stdinW.Close()
		}
		code := exitCannotExec
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			code = exitNotFound
		}
		fmt.Fprintf(conns["err"], "mpirun proxy on %s: rank %d: %v\n", p.host, rk.Rank, err)
		fmt.Fprintf(ctl, "exit %d\n", code<<8) // a wait status: exited with code
		return code
	}
	pgid := cmd.Process.Pid
	p.mu.Lock()
	p.pgids[pgid] = true
	p.mu.Unlock()
	if stdinW != nil {
		go func() { // rank 0's standard input, after the header
			io.Copy(stdinW, stdin)
			stdinW.Close()
		}()
	}
	toMpirun := make(chan struct{})
	go func() { // the rank's PMI requests
		io.Copy(conns["pmi"], mine)
		if tc, ok := conns["pmi"].(*net.TCPConn); ok {
			tc.CloseWrite()
		}
		close(toMpirun)
	}()
	go io.Copy(mine, conns["pmi"]) // mpirun's answers
	go func() {                    // mpirun's signals, until mpirun is gone
		sc := bufio.NewScanner(ctlR)
		for sc.Scan() {
			if n, err := strconv.Atoi(strings.TrimSpace(sc.Text())); err == nil && n > 0 {
				_ = syscall.Kill(-pgid, syscall.Signal(n))
			}
		}
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}()
	_ = cmd.Wait()
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	p.mu.Lock()
	delete(p.pgids, pgid)
	p.mu.Unlock()
	for _, k := range []string{"out", "err"} {
		if tc, ok := conns[k].(*net.TCPConn); ok {
			tc.CloseWrite()
		}
	}
	// What the rank said last (an abort) reaches mpirun before its exit.
	select {
	case <-toMpirun:
	case <-time.After(time.Second):
	}
	ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
	fmt.Fprintf(ctl, "exit %d\n", uint32(ws))
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
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
		for _, h := range j.ssh.hosts {
			h.held.drop()
		}
		for _, r := range ranks {
			j.ranks[r].sshCtl.Close() // the proxies exit without starting their ranks
		}
		return code
	}
	limit, code := checkTimeout, exitUnreachable
	if j.timeout > 0 && j.timeout < limit {
		limit, code = j.timeout, exitTimeout // -timeout counts from mpirun's start
	}
	deadline := time.NewTimer(limit)
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
			said := strings.TrimSpace(j.ranks[ex.rank].host.held.drop())
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
			if ex.waited && ex.ws.Exited() && ex.ws.ExitStatus() == exitNotFound {
				said += " (mpirun itself, which runs there as the ranks' proxy, must be at the same path on every host)"
			}
			return fail(exitUnreachable, fmt.Sprintf("mpirun: cannot start ranks on %s through %s (%s): %s; not starting the job",
				j.hostOf[ex.rank], j.launcherName(), status, said))
		case sig := <-signals:
			s := sig.(syscall.Signal)
			return fail(128+int(s), fmt.Sprintf("mpirun: received signal %d (%v) while starting the ranks; stopping the job", int(s), s))
		case <-deadline.C:
			for _, r := range ranks {
				if pending[r] {
					return fail(code, fmt.Sprintf("mpirun: cannot start ranks on %s through %s: no answer within %v; not starting the job",
						j.hostOf[r], j.launcherName(), limit))
				}
			}
		}
	}
	for _, h := range j.ssh.hosts {
		h.held.release()
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
	eof      chan struct{} // closed when src has been read to its end
}

func newHeldLines(src io.ReadCloser) *heldLines {
	pr, pw := io.Pipe()
	h := &heldLines{pr: pr, pw: pw, src: src, eof: make(chan struct{})}
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
	close(h.eof)
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
	select {
	case <-h.eof:
		h.pw.Close()
	default:
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
