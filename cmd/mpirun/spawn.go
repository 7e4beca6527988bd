package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/adimpi/adimpi/internal/pmi"
)

// Spawned jobs (MPI_Comm_spawn). A rank's PMI-1 spawn request reaches the
// supervising goroutine (which owns j.ranks) through j.spawns; it starts
// the children as a new job with its own PMI server and key-value space
// (holding the spawner's preput keys, among them the port the children
// connect to), the job's device and environment, on this host or, when
// the spawn's Info "host" names another host of the job, there through
// the job's launcher (ssh proxy or exec launcher), and follows them like
// the world's ranks: their output is forwarded, labelled [J.R] under -l
// (spawn J, rank R; [J.R@host] when the job spans hosts), and a child
// that dies, aborts or exits without MPI_Finalize stops the whole job.

// spawnReq is a rank's spawn request and where to answer it.
type spawnReq struct {
	req   pmi.SpawnRequest
	reply chan spawnResult
}

type spawnResult struct {
	failed []bool
	err    error
}

// childInfo is what a spawned process has beyond a rankProc.
type childInfo struct {
	srv   *pmi.Server
	rank  int // in its own world
	spawn int // which spawn of the job started it (1, 2, ...)
	argv0 string
	host  string // another host of the job it runs on, "" for this one
}

// spawner is the PMI server's Spawner for every job of the run: it hands
// the request to the supervising goroutine and waits for its answer.
func (j *job) spawner(req pmi.SpawnRequest) ([]bool, error) {
	reply := make(chan spawnResult, 1)
	j.spawns <- spawnReq{req: req, reply: reply}
	res := <-reply
	return res.failed, res.err
}

// universe is what get_universe_size answers: -usize, else the world's size.
func (j *job) universe() int {
	if j.usize > 0 {
		return j.usize
	}
	return j.np
}

// setupServer makes srv serve spawns and share the run's name service.
func (j *job) setupServer(srv *pmi.Server) {
	srv.SetSpawner(j.spawner)
	srv.SetUniverseSize(j.universe())
	if srv != j.srv {
		srv.ShareNames(j.srv)
	}
}

// resolved is one spawn command ready to start.
type resolved struct {
	path, argv0, wdir string
	args              []string
	n, appnum         int
	host              string // another host of the job (its name as the job gives it), "" for this one
	lib               string // the directory of adimpi's libmpich.so.12 for a C program, or ""
}

// resolveSpawn finds each command's executable and working directory (on
// this host: every host has the same paths), and checks its host: this
// one, or another host of the job, reached through the job's launcher.
func (j *job) resolveSpawn(cmds []pmi.SpawnCmd) ([]resolved, []bool, error) {
	var out []resolved
	var failed []bool
	var errs []string
	for i, c := range cmds {
		info := map[string]string{}
		for _, kv := range c.Info {
			info[kv[0]] = kv[1]
		}
		rc := resolved{argv0: c.Command, wdir: info["wdir"], args: c.Args, n: c.MaxProcs, appnum: i}
		host, err := j.spawnHost(info["host"])
		rc.host = host
		if err == nil {
			rc.path, err = findCommand(c.Command, info["path"], rc.wdir)
		}
		if err == nil {
			// A C child needs the library even when its parent is a Go
			// program, whose environment does not name it.
			var out strings.Builder
			if rc.lib, err = prepareCProgram(rc.path, rc.args, &out); err != nil && out.Len() > 0 {
				j.errorf("mpirun: %s", strings.TrimSpace(out.String()))
			}
		}
		bad := err != nil || c.MaxProcs < 1
		if err == nil && c.MaxProcs < 1 {
			err = fmt.Errorf("maxprocs %d", c.MaxProcs)
		}
		if bad {
			errs = append(errs, fmt.Sprintf("command %d (%s): %v", i, c.Command, err))
		}
		for k := 0; k < max(c.MaxProcs, 0); k++ {
			failed = append(failed, bad)
		}
		out = append(out, rc)
	}
	if errs != nil {
		return nil, failed, errors.New(strings.Join(errs, "; "))
	}
	return out, failed, nil
}

// spawnHost returns where a spawn's Info "host" h puts the processes: ""
// for this machine (no host given, or one of this machine's names), else
// the name of another host of the job, which the job's launcher reaches.
func (j *job) spawnHost(h string) (string, error) {
	if h == "" || localNames()[strings.ToLower(h)] || isLocalAddr(h) {
		return "", nil
	}
	var names []string
	for _, jh := range j.hosts {
		if strings.EqualFold(jh.name, h) {
			if jh.local {
				return "", nil
			}
			if j.launcher == nil {
				return "", fmt.Errorf("host %q: no launcher reaches it", h)
			}
			return jh.name, nil
		}
		names = append(names, jh.name)
	}
	if len(names) == 0 {
		return "", fmt.Errorf("host %q: the job has no other hosts (name them with -hosts or -hostfile to spawn there)", h)
	}
	return "", fmt.Errorf("host %q is not a host of this job (%s)", h, strings.Join(names, ", "))
}

// findCommand finds an executable: a name with a slash relative to wdir,
// else in the directories of path (colon-separated), else in $PATH.
func findCommand(cmd, path, wdir string) (string, error) {
	check := func(p string) (string, error) {
		st, err := os.Stat(p)
		if err != nil {
			return "", err
		}
		if st.IsDir() || st.Mode()&0o111 == 0 {
			return "", fmt.Errorf("%s is not an executable file", p)
		}
		return filepath.Abs(p)
	}
	if strings.Contains(cmd, "/") {
		if !filepath.IsAbs(cmd) && wdir != "" {
			cmd = filepath.Join(wdir, cmd)
		}
		return check(cmd)
	}
	for _, d := range filepath.SplitList(path) {
		if p, err := check(filepath.Join(d, cmd)); err == nil {
			return p, nil
		}
	}
	p, err := exec.LookPath(cmd)
	if err != nil {
		return "", fmt.Errorf("%s: not found in the spawn's path nor in $PATH", cmd)
	}
	return filepath.Abs(p)
}

// spawn starts a request's children (in the supervising goroutine): on
// this host directly, on another host through the job's launcher. Either
// all start or none: the other hosts are checked first (the exec
// launcher's check; the ssh proxies' own, which they report before they
// start anything).
func (j *job) spawn(sr spawnReq) {
	if j.stopping {
		sr.reply <- spawnResult{err: errors.New("the job is stopping")}
		return
	}
	cmds, failed, err := j.resolveSpawn(sr.req.Cmds)
	if err != nil {
		sr.reply <- spawnResult{failed: failed, err: err}
		return
	}
	total := len(failed)
	allFailed := func() []bool {
		for i := range failed {
			failed[i] = true
		}
		return failed
	}
	if j.launcherKind == launcherExec {
		if msg := j.checkSpawnHosts(cmds); msg != "" {
			sr.reply <- spawnResult{failed: allFailed(), err: errors.New(msg)}
			return
		}
	}
	j.nspawn++
	srv := pmi.NewServer(total, fmt.Sprintf("adimpi_kvs_%d_spawn%d", os.Getpid(), j.nspawn))
	for _, kv := range sr.req.Preput {
		srv.Put(kv[0], kv[1])
	}
	j.setupServer(srv)
	base := len(j.ranks)
	go func() {
		for a := range srv.Aborts() {
			a.Rank += base
			j.childAborts <- a
		}
	}()
	j.ranks = append(j.ranks, make([]*rankProc, total)...)
	info := func(rank int, c resolved) *childInfo {
		return &childInfo{srv: srv, rank: rank, spawn: j.nspawn, argv0: c.argv0, host: c.host}
	}
	// Through ssh first: the proxies check their hosts and wait.
	var viaSSH []int
	if j.launcherKind == launcherSSH {
		if viaSSH, err = j.spawnSSH(cmds, base, total, info); err != nil {
			j.abandon(base, total)
			sr.reply <- spawnResult{failed: allFailed(), err: err}
			return
		}
	}
	rank := 0
	for _, c := range cmds {
		for k := 0; k < c.n; k++ {
			if j.ranks[base+rank] == nil {
				if err := j.startChild(base+rank, info(rank, c), c, total); err != nil {
					j.abandon(base, total)
					sr.reply <- spawnResult{failed: allFailed(), err: fmt.Errorf("starting child %d (%s): %v", rank, c.argv0, err)}
					return
				}
			}
			rank++
		}
	}
	for _, i := range viaSSH {
		j.ranks[i].sshCtl.goAhead()
	}
	sr.reply <- spawnResult{}
}

// abandon stops the processes of a spawn that failed (indices base to
// base+n-1 in j.ranks; nil for those not started) before they ran
// anything of their own: their exits do not stop the job.
func (j *job) abandon(base, n int) {
	for _, rp := range j.ranks[base : base+n] {
		switch {
		case rp == nil:
		case rp.sshCtl != nil:
			rp.abandoned = true
			rp.host.held.drop()
			rp.sshCtl.Close() // a proxy that called back exits without starting it
			// One that has not (a host ssh is still trying to reach)
			// goes with its ssh.
			_ = syscall.Kill(-rp.pid, syscall.SIGTERM)
		default:
			rp.abandoned = true
			_ = syscall.Kill(-rp.pid, syscall.SIGKILL)
		}
	}
}

// checkSpawnHosts runs the exec launcher's check (launcher_check.go) on
// the other hosts of cmds and returns "" or what is missing where.
func (j *job) checkSpawnHosts(cmds []resolved) string {
	byHost := map[string][]string{}
	var hosts []string
	for _, c := range cmds {
		if c.host == "" {
			continue
		}
		dir := c.wdir
		if dir == "" {
			dir = "."
		}
		dir, err := filepath.Abs(dir)
		if err != nil {
			return err.Error()
		}
		if byHost[c.host] == nil {
			hosts = append(hosts, c.host)
			byHost[c.host] = []string{"x:" + j.self}
		}
		byHost[c.host] = append(byHost[c.host], "x:"+c.path, "d:"+dir)
	}
	for _, h := range hosts {
		if _, msg := j.checkHost(h, byHost[h]); msg != "" {
			return strings.TrimPrefix(strings.TrimSuffix(msg, "; not starting the job"), "mpirun: ")
		}
	}
	return ""
}

// spawnSSH starts, through one ssh proxy per host, the children of cmds
// that go to other hosts (slots base+rank of j.ranks), waits until every
// proxy has checked its host, and returns their indices in j.ranks, for
// the go-ahead; or an error naming the host and what it lacks, or why ssh
// could not reach it.
func (j *job) spawnSSH(cmds []resolved, base, total int, info func(int, resolved) *childInfo) ([]int, error) {
	byHost := map[string][]sshStart{}
	var hosts []string
	var idx []int
	rank := 0
	for _, c := range cmds {
		for k := 0; k < c.n; k++ {
			if c.host != "" {
				rk, err := j.sshRank(base+rank, c.wdir, c.path, append([]string{c.argv0}, c.args...), j.childEnv(c, rank, total))
				if err != nil {
					return nil, err
				}
				if byHost[c.host] == nil {
					hosts = append(hosts, c.host)
				}
				byHost[c.host] = append(byHost[c.host], sshStart{rk: rk, child: info(rank, c)})
				idx = append(idx, base+rank)
			}
			rank++
		}
	}
	if len(idx) == 0 {
		return nil, nil
	}
	if j.ssh == nil {
		b, err := newSSHBack(total)
		if err != nil {
			return nil, err
		}
		j.ssh = b
	}
	events := make(chan sshEvent, len(idx))
	for _, h := range hosts {
		if err := j.startSSHHost(h, byHost[h], nil, events); err != nil {
			return nil, err
		}
	}
	return idx, j.awaitSpawnProxies(idx, events)
}

// awaitSpawnProxies waits, for at most checkTimeout, until the proxies of
// the spawned processes idx have checked their hosts. Exits of other
// processes that arrive meanwhile go back to the supervising loop.
func (j *job) awaitSpawnProxies(idx []int, events <-chan sshEvent) error {
	pending := map[int]bool{}
	for _, i := range idx {
		pending[i] = true
	}
	deadline := time.NewTimer(checkTimeout)
	defer deadline.Stop()
	for len(pending) > 0 {
		select {
		case ev := <-events:
			if ev.missing != "" {
				_, msg := j.missingMessage(j.ranks[ev.rank].child.host, ev.missing)
				return errors.New(strings.TrimPrefix(strings.TrimSuffix(msg, "; not starting the job"), "mpirun: "))
			}
			delete(pending, ev.rank)
		case ex := <-j.exits:
			if !pending[ex.rank] {
				go func() { j.exits <- ex }()
				continue
			}
			j.record(ex)
			rp := j.ranks[ex.rank]
			said := strings.TrimSpace(rp.host.held.drop())
			if i := strings.LastIndexByte(said, '\n'); i >= 0 {
				said = said[i+1:]
			}
			if said == "" {
				said = "it exited before its proxy called mpirun back"
			}
			return fmt.Errorf("cannot start processes on %s through %s: %s", rp.child.host, j.launcherName(), said)
		case <-deadline.C:
			for i := range pending {
				return fmt.Errorf("cannot start processes on %s through %s: no answer within %v", j.ranks[i].child.host, j.launcherName(), checkTimeout)
			}
		}
	}
	for _, i := range idx {
		j.ranks[i].host.held.release()
	}
	return nil
}

// startChild starts process index i of j.ranks, child c of a spawned job
// of size processes: directly, or on another host through the exec
// launcher (with mpirun's control pipe as descriptor 4, as start does).
func (j *job) startChild(i int, ci *childInfo, c resolved, size int) error {
	path, args := c.path, append([]string{c.argv0}, c.args...)
	var ctlR, ctlW *os.File
	var extra []*os.File
	if c.host != "" {
		var err error
		if path, args, err = j.launchArgv(c.host, c.wdir, c.path, c.args); err != nil {
			return err
		}
		if ctlR, ctlW, err = os.Pipe(); err != nil {
			return err
		}
		defer ctlR.Close()
		extra = append(extra, ctlR) // fd 4, proxyCtlFD
	}
	cmd, conn, outR, errR, err := startProcess(path, args, c.wdir, j.childEnv(c, ci.rank, size), nil, extra...)
	if err != nil {
		if ctlW != nil {
			ctlW.Close()
		}
		return err
	}
	rp := &rankProc{rank: i, cmd: cmd, pid: cmd.Process.Pid, served: make(chan struct{}), child: ci}
	if ctlW != nil {
		rp.ctl = ctlW
	}
	j.ranks[i] = rp
	j.follow(rp, outR, errR, conn)
	return nil
}

// childEnv is the environment of rank of a spawned job of size processes:
// the world's, then the child's own place.
func (j *job) childEnv(c resolved, rank, size int) []string {
	env := j.environ(0)
	if c.lib != "" {
		env = withLibraryDir(env, c.lib)
	}
	return append(env,
		"PMI_RANK="+strconv.Itoa(rank), "PMI_SIZE="+strconv.Itoa(size),
		pmi.EnvSpawned+"=1", "ADIMPI_APPNUM="+strconv.Itoa(c.appnum))
}

// server returns the PMI server of process r (the world's, or its spawned
// job's) and r's rank there.
func (j *job) server(r int) (*pmi.Server, int) {
	if c := j.ranks[r].child; c != nil {
		return c.srv, c.rank
	}
	return j.srv, r
}

// childWho names a spawned process in mpirun's messages.
func (j *job) childWho(r int) string {
	c := j.ranks[r].child
	if c.host != "" {
		return fmt.Sprintf("mpirun: spawned rank %d of spawn %d (%s) on %s (launcher pid %d)", c.rank, c.spawn, c.argv0, c.host, j.ranks[r].pid)
	}
	return fmt.Sprintf("mpirun: spawned rank %d of spawn %d (%s, pid %d)", c.rank, c.spawn, c.argv0, j.ranks[r].pid)
}
