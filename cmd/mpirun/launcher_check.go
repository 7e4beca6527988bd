package main

import (
	"bytes"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Before any rank starts, mpirun makes sure that every other host of the
// job has mpirun's own executable (the ranks' proxy), every program and
// every working directory at the same paths. With -launcher exec it runs a
// short check on every such host, through the launcher and on all hosts at
// once; with ssh the proxies check before they start their ranks (see
// launcher_ssh.go), which saves an ssh login per host. A host that lacks
// one, or that the launcher cannot reach, stops the job with one line
// naming the host and the path (or the launcher's complaint), before
// anything runs anywhere.
const (
	// exitUnreachable is mpirun's status when the launcher cannot run
	// anything on a host (ssh's own status for that).
	exitUnreachable = 255
	// checkTimeout bounds the check on one host.
	checkTimeout = 30 * time.Second
	// checkMissing is the check script's status when a path is missing.
	checkMissing = 3
)

// checkScript is run by sh on each host with arguments "x:PATH" (an
// executable file) and "d:PATH" (a directory); it prints the first that is
// missing and exits checkMissing.
const checkScript = `for a in "$@"; do p=${a#?:}; case $a in ` +
	`d:*) [ -d "$p" ] || { echo "missing d:$p"; exit 3; } ;; ` +
	`*) [ -f "$p" ] && [ -x "$p" ] || { echo "missing x:$p"; exit 3; } ;; esac; done`

// prepareRemote checks the job's other hosts (see above) for the exec
// launcher and, for ssh, opens the proxies' way back to mpirun. It returns
// 0, or the exit status after saying what is wrong.
func (j *job) prepareRemote() int {
	var hosts []string
	seen := map[string]bool{}
	for r, h := range j.hostOf {
		if j.remote[r] && !seen[h] {
			seen[h] = true
			hosts = append(hosts, h)
		}
	}
	if len(hosts) == 0 {
		return 0
	}
	if j.launcherKind == launcherSSH {
		b, err := newSSHBack(j.np)
		if err != nil {
			j.errorf("mpirun: %v", err)
			return 1
		}
		j.ssh = b
		return 0
	}
	args := []string{"x:" + j.self}
	for _, a := range j.apps {
		dir := a.wdir
		if dir == "" {
			dir = "."
		}
		dir, err := filepath.Abs(dir)
		if err != nil {
			j.errorf("mpirun: %v", err)
			return 1
		}
		for _, p := range []string{"x:" + a.binary, "d:" + dir} {
			if !seen[p] {
				seen[p] = true
				args = append(args, p)
			}
		}
	}
	errs := make([]string, len(hosts))
	codes := make([]int, len(hosts))
	var wg sync.WaitGroup
	for i, h := range hosts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i], errs[i] = j.checkHost(h, args)
		}()
	}
	wg.Wait()
	code := 0
	for i := range hosts {
		if errs[i] != "" {
			j.errorf("%s", errs[i])
			if code == 0 {
				code = codes[i]
			}
		}
	}
	return code
}

// launcherName names the launcher in messages.
func (j *job) launcherName() string {
	switch {
	case j.launcherKind == launcherSSH && len(j.launcher) == 1 && j.launcher[0] == "ssh":
		return "ssh"
	case j.launcherKind == launcherSSH:
		return "ssh (" + strings.Join(j.launcher, " ") + ")"
	}
	return "-launcher-exec " + strings.Join(j.launcher, " ")
}

// missingMessage is the exit status and the line that say host lacks what
// (the check's "x:PATH" or "d:DIR").
func (j *job) missingMessage(host, what string) (int, string) {
	kind, p, _ := strings.Cut(what, ":")
	switch {
	case kind == "d":
		return exitNotFound, fmt.Sprintf("mpirun: %s has no directory %s (the ranks' working directory, -wdir or mpirun's, must exist on every host); not starting the job", host, p)
	case p == j.self:
		return exitNotFound, fmt.Sprintf("mpirun: %s has no executable %s (mpirun itself, which runs there as the ranks' proxy, must be at the same path on every host); not starting the job", host, p)
	}
	return exitNotFound, fmt.Sprintf("mpirun: %s has no executable program %s (the program must be at the same path on every host); not starting the job", host, p)
}

// checkHost runs the check on host through the exec launcher and returns "" or the message and exit
// status that describe what is wrong.
func (j *job) checkHost(host string, args []string) (int, string) {
	argv := append(launcherArgv(j.launcher, host), append([]string{"sh", "-c", checkScript, "sh"}, args...)...)
	how := j.launcherName()
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return exitNotFound, fmt.Sprintf("mpirun: cannot start ranks on %s through %s: %v", host, how, err)
	}
	var out bytes.Buffer
	cmd := &exec.Cmd{Path: path, Args: argv, Stdout: &out, Stderr: &out,
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}}
	if err := cmd.Start(); err != nil {
		return exitCannotExec, fmt.Sprintf("mpirun: cannot start ranks on %s through %s: %v", host, how, err)
	}
	timer := time.AfterFunc(checkTimeout, func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	err = cmd.Wait()
	timedOut := !timer.Stop()
	if err == nil {
		return 0, ""
	}
	text := strings.TrimSpace(out.String())
	last := text
	if i := strings.LastIndexByte(text, '\n'); i >= 0 {
		last = text[i+1:]
	}
	if m, ok := strings.CutPrefix(last, "missing "); ok && cmd.ProcessState.ExitCode() == checkMissing {
		return j.missingMessage(host, m)
	}
	if timedOut {
		return exitUnreachable, fmt.Sprintf("mpirun: cannot start ranks on %s through %s: no answer within %v; not starting the job", host, how, checkTimeout)
	}
	if last == "" {
		last = err.Error()
	}
	return exitUnreachable, fmt.Sprintf("mpirun: cannot start ranks on %s through %s (%v): %s; not starting the job", host, how, err, last)
}
