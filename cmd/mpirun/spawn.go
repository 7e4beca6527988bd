package main

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/adimpi/adimpi/internal/pmi"
)

// Spawned jobs (MPI_Comm_spawn). A rank's PMI-1 spawn request reaches the
// supervising goroutine (which owns j.ranks) through j.spawns; it starts
// the children as a new job with its own PMI server and key-value space
// (holding the spawner's preput keys, among them the port the children
// connect to), the job's device and environment, and follows them like
// the world's ranks: their output is forwarded, labelled [J.R] under -l
// (spawn J, rank R), and a child that dies, aborts or exits without
// MPI_Finalize stops the whole job.

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
}

// resolveSpawn finds each command's executable and working directory, and
// checks its host.
func resolveSpawn(cmds []pmi.SpawnCmd) ([]resolved, []bool, error) {
	var out []resolved
	var failed []bool
	var errs []string
	for i, c := range cmds {
		info := map[string]string{}
		for _, kv := range c.Info {
			info[kv[0]] = kv[1]
		}
		rc := resolved{argv0: c.Command, wdir: info["wdir"], args: c.Args, n: c.MaxProcs, appnum: i}
		err := error(nil)
		if h := info["host"]; h != "" && !localNames()[strings.ToLower(h)] && !isLocalAddr(h) {
			err = fmt.Errorf("host %q: mpirun spawns on this host only", h)
		} else {
			rc.path, err = findCommand(c.Command, info["path"], rc.wdir)
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

// spawn starts a request's children (in the supervising goroutine).
func (j *job) spawn(sr spawnReq) {
	if j.stopping {
		sr.reply <- spawnResult{err: errors.New("the job is stopping")}
		return
	}
	cmds, failed, err := resolveSpawn(sr.req.Cmds)
	if err != nil {
		sr.reply <- spawnResult{failed: failed, err: err}
		return
	}
	total := len(failed)
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
	rank := 0
	for _, c := range cmds {
		for k := 0; k < c.n; k++ {
			if err := j.startChild(srv, c, rank, total); err != nil {
				for i := rank; i < total; i++ {
					failed[i] = true
				}
				sr.reply <- spawnResult{failed: failed, err: fmt.Errorf("starting child %d (%s): %v", rank, c.argv0, err)}
				return
			}
			rank++
		}
	}
	sr.reply <- spawnResult{}
}

// startChild starts rank of a spawned job of size processes.
func (j *job) startChild(srv *pmi.Server, c resolved, rank, size int) error {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("socketpair: %w", err)
	}
	parentEnd := os.NewFile(uintptr(fds[0]), "pmi")
	childEnd := os.NewFile(uintptr(fds[1]), "pmi-child")
	defer childEnd.Close()
	conn, err := net.FileConn(parentEnd)
	parentEnd.Close()
	if err != nil {
		return fmt.Errorf("pmi socket: %w", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		conn.Close()
		return err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		conn.Close()
		outR.Close()
		outW.Close()
		return err
	}
	// The world's environment, then the child's own place.
	env := append(j.environ(0),
		"PMI_RANK="+strconv.Itoa(rank), "PMI_SIZE="+strconv.Itoa(size),
		pmi.EnvSpawned+"=1", "ADIMPI_APPNUM="+strconv.Itoa(c.appnum))
	cmd := &exec.Cmd{
		Path:        c.path,
		Args:        append([]string{c.argv0}, c.args...),
		Dir:         c.wdir,
		Env:         env,
		Stdout:      outW,
		Stderr:      errW,
		ExtraFiles:  []*os.File{childEnd}, // fd 3, PMI_FD
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL},
	}
	err = cmd.Start()
	outW.Close()
	errW.Close()
	if err != nil {
		conn.Close()
		outR.Close()
		errR.Close()
		return err
	}
	rp := &rankProc{rank: len(j.ranks), cmd: cmd, pid: cmd.Process.Pid, served: make(chan struct{}),
		child: &childInfo{srv: srv, rank: rank, spawn: j.nspawn, argv0: c.argv0}}
	j.ranks = append(j.ranks, rp)
	j.followChild(rp, outR, errR, conn)
	return nil
}

// followChild is follow for a spawned process.
func (j *job) followChild(rp *rankProc, outR, errR *os.File, conn net.Conn) {
	label := j.label(rp.rank)
	var prefix []byte
	if j.tagOutput {
		prefix = label
	}
	j.output.Add(2)
	go func() {
		defer j.output.Done()
		forwardLines(outR, j.stdout, prefix, label, nil)
	}()
	go func() {
		defer j.output.Done()
		// A child's wait report names its rank in its own world: any
		// report line from it answers for it (collectWaitReports).
		forwardLines(errR, j.stderr, prefix, label, func(line []byte) {
			if bytes.HasPrefix(line, []byte(waitReportPrefix)) {
				select {
				case j.reports <- rp.rank:
				default:
				}
			}
		})
	}()
	go func() {
		defer close(rp.served)
		err := rp.child.srv.Serve(rp.child.rank, conn)
		if err != nil && !errors.Is(err, pmi.ErrDisconnected) && !errors.Is(err, pmi.ErrAborted) {
			j.errorf("mpirun: %v", err)
		}
	}()
	go func() {
		_ = rp.cmd.Wait()
		ev := exitEvent{rank: rp.rank}
		if ps := rp.cmd.ProcessState; ps != nil {
			ev.ws, ev.waited = ps.Sys().(syscall.WaitStatus)
		}
		j.exits <- ev
	}()
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
	return fmt.Sprintf("mpirun: spawned rank %d of spawn %d (%s, pid %d)", c.rank, c.spawn, c.argv0, j.ranks[r].pid)
}
