package main

// mpirun inside a Slurm allocation (salloc, sbatch, or srun --pty bash):
// without -hosts or -hostfile the allocation's nodes are the hosts, each
// with the tasks Slurm gives it as slots, and, unless a -launcher is asked
// for, the ranks start through srun, which runs them under slurmstepd
// with PMI-2 (srun --mpi=pmi2) on the nodes mpirun's placement chose.

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// slurmUsage ends mpirun -h.
const slurmUsage = `
Inside a Slurm allocation (salloc, sbatch, srun --pty bash: SLURM_JOB_ID
and SLURM_JOB_NODELIST set) and without -hosts or -hostfile, the
allocation's nodes are the hosts, with SLURM_TASKS_PER_NODE as their slots;
without -launcher (or with -launcher slurm), and with srun on the PATH,
the ranks start through "srun --mpi=pmi2" on the nodes the placement
chose (see docs/slurm.md); -launcher slurm outside an allocation is an
error.
`

// slurmAlloc is the Slurm allocation mpirun runs in.
type slurmAlloc struct {
	jobID  string
	srun   string // srun's path when the ranks start through it, else ""
	inStep bool   // mpirun runs in a job step, whose resources its srun shares
}

// viaSrun reports whether the ranks start through srun.
func (s *slurmAlloc) viaSrun() bool { return s != nil && s.srun != "" }

// slurmAllocation returns the allocation mpirun runs in (nil if none, or if
// the command line names hosts without -launcher slurm), and, unless the
// command line names hosts, sets hosts to its nodes, with
// SLURM_TASKS_PER_NODE as their slots. With -launcher slurm it is an error
// to run outside an allocation or without srun.
func slurmAllocation(o *options, hosts *[]host) (*slurmAlloc, error) {
	id, list := os.Getenv("SLURM_JOB_ID"), os.Getenv("SLURM_JOB_NODELIST")
	forced := o.launcher == launcherSlurm
	if forced && (id == "" || list == "") {
		return nil, usagef("-launcher slurm: not inside a Slurm allocation (SLURM_JOB_ID and SLURM_JOB_NODELIST are not set): run mpirun under salloc, in an sbatch script, or use -launcher ssh")
	}
	if id == "" || list == "" || len(*hosts) > 0 && !forced {
		return nil, nil
	}
	_, inStep := os.LookupEnv("SLURM_STEP_ID")
	a := &slurmAlloc{jobID: id, inStep: inStep}
	if o.launcher == "" && o.launcherExec == "" || forced {
		if p, err := exec.LookPath("srun"); err == nil {
			a.srun = p
		} else if forced {
			return nil, usagef("-launcher slurm: %v", err)
		}
	}
	if len(*hosts) > 0 {
		return a, nil // -launcher slurm on named hosts: srun checks they are the allocation's
	}
	nodes, err := expandHostlist(list)
	if err != nil {
		return nil, usagef("SLURM_JOB_NODELIST=%s: %v", list, err)
	}
	// Inside a job step (srun --pty bash, or srun ... mpirun) the tasks
	// per node are the step's, not the allocation's: the allocation's CPUs
	// per node are its slots then.
	slotVars := []string{"SLURM_TASKS_PER_NODE", "SLURM_JOB_CPUS_PER_NODE"}
	if inStep {
		slotVars[0], slotVars[1] = slotVars[1], slotVars[0]
	}
	slots := make([]int, len(nodes))
	for _, v := range slotVars {
		if tpn := os.Getenv(v); tpn != "" {
			if slots, err = expandTasksPerNode(tpn, len(nodes)); err != nil {
				return nil, usagef("%s=%s: %v", v, tpn, err)
			}
			break
		}
	}
	for i, n := range nodes {
		*hosts = append(*hosts, host{name: n, slots: slots[i], where: "SLURM_JOB_NODELIST"})
	}
	return a, nil
}

// expandHostlist expands a Slurm host list: comma-separated names, each
// with any number of bracketed ranges and numbers ("h[1-3]",
// "node[01-04,07]", "r[1-2]n[1-2]"), zero padding kept.
func expandHostlist(s string) ([]string, error) {
	var out []string
	depth, start := 0, 0
	for i := 0; i <= len(s); i++ {
		if i < len(s) {
			switch s[i] {
			case '[':
				depth++
				continue
			case ']':
				depth--
				if depth < 0 {
					return nil, fmt.Errorf("unbalanced ']' at %d", i)
				}
				continue
			case ',':
				if depth > 0 {
					continue
				}
			default:
				continue
			}
		}
		if depth != 0 {
			return nil, fmt.Errorf("unbalanced '['")
		}
		part := s[start:i]
		start = i + 1
		if part == "" {
			return nil, fmt.Errorf("empty host name")
		}
		names, err := expandHostPattern(part)
		if err != nil {
			return nil, err
		}
		out = append(out, names...)
	}
	return out, nil
}

// expandHostPattern expands one name of a host list, its first bracket
// first.
func expandHostPattern(p string) ([]string, error) {
	open := strings.IndexByte(p, '[')
	if open < 0 {
		return []string{p}, nil
	}
	shut := strings.IndexByte(p[open:], ']')
	if shut < 0 {
		return nil, fmt.Errorf("%q: unbalanced '['", p)
	}
	shut += open
	rest, err := expandHostPattern(p[shut+1:])
	if err != nil {
		return nil, err
	}
	var out []string
	for _, r := range strings.Split(p[open+1:shut], ",") {
		lo, hi, isRange := strings.Cut(r, "-")
		if !isRange {
			hi = lo
		}
		a, err1 := strconv.Atoi(lo)
		b, err2 := strconv.Atoi(hi)
		if err1 != nil || err2 != nil || a > b || lo == "" {
			return nil, fmt.Errorf("%q: bad range %q", p, r)
		}
		for n := a; n <= b; n++ {
			num := fmt.Sprintf("%0*d", len(lo), n)
			for _, tail := range rest {
				out = append(out, p[:open]+num+tail)
			}
		}
	}
	return out, nil
}

// expandTasksPerNode expands SLURM_TASKS_PER_NODE ("4,1(x2)": 4 tasks on
// the first node, 1 on each of the next two) for n nodes.
func expandTasksPerNode(s string, n int) ([]int, error) {
	var out []int
	for _, e := range strings.Split(s, ",") {
		count, times := e, 1
		if i := strings.Index(e, "(x"); i >= 0 && strings.HasSuffix(e, ")") {
			t, err := strconv.Atoi(e[i+2 : len(e)-1])
			if err != nil || t < 1 {
				return nil, fmt.Errorf("bad repeat in %q", e)
			}
			count, times = e[:i], t
		}
		c, err := strconv.Atoi(count)
		if err != nil || c < 0 {
			return nil, fmt.Errorf("bad task count %q", e)
		}
		for ; times > 0; times-- {
			out = append(out, c)
		}
	}
	if len(out) != n {
		return nil, fmt.Errorf("gives %d nodes' tasks, SLURM_JOB_NODELIST has %d nodes", len(out), n)
	}
	return out, nil
}

// srunArgs is the srun command line that starts the job: every rank on the
// node mpirun's placement gave it (arbitrary distribution, a node per task
// in rank order, overcommitting when the placement asks more than Slurm's
// CPUs), PMI-2, standard input to rank 0 only, and the step killed when a
// rank fails, as mpirun ends a job whose rank fails. An MPMD job runs the
// programs of conf, srun's --multi-prog file.
func (j *job) srunArgs(a *slurmAlloc, conf string) ([]string, error) {
	nodes := map[string]bool{}
	for _, h := range j.hostOf {
		nodes[h] = true
	}
	args := []string{a.srun, "--mpi=pmi2", "--ntasks=" + strconv.Itoa(j.np), "--nodes=" + strconv.Itoa(len(nodes)),
		"--nodelist=" + strings.Join(j.hostOf, ","), "--distribution=arbitrary", "--overcommit",
		"--input=0", "--kill-on-bad-exit=1"}
	if a.inStep {
		// A step does not get CPUs that another step of the job holds
		// unless it may overlap it: mpirun's own step holds some.
		args = append(args, "--overlap")
	}
	if j.tagOutput {
		args = append(args, "--label")
	}
	wdir := j.apps[0].wdir
	for _, ap := range j.apps[1:] {
		if ap.wdir != wdir {
			return nil, usagef("-wdir: under srun every program runs in one directory (%q and %q given)", wdir, ap.wdir)
		}
	}
	if wdir != "" {
		abs, err := filepath.Abs(wdir)
		if err != nil {
			return nil, err
		}
		args = append(args, "--chdir="+abs)
	}
	if conf != "" {
		return append(args, "--multi-prog", conf), nil
	}
	return append(append(args, j.apps[0].binary), j.apps[0].args...), nil
}

// multiProg is the --multi-prog file of an MPMD job: each program's ranks,
// run through env with the program's ADIMPI_APPNUM and -env settings (but
// for the job's own variables, which -env does not override, as environ
// says). srun splits its lines at blanks, so arguments holding blanks or
// quotes are refused.
func (j *job) multiProg() (string, error) {
	var b strings.Builder
	first := 0
	for _, ap := range j.apps {
		words := []string{"env", "ADIMPI_APPNUM=" + strconv.Itoa(ap.index)}
		env := ap.env
		if ap.libDir != "" {
			env = withLibraryDir(env, ap.libDir)
		}
		for _, kv := range env {
			name, _, _ := strings.Cut(kv, "=")
			if !slices.Contains(jobVars, name) {
				words = append(words, kv)
			}
		}
		words = append(words, ap.binary)
		words = append(words, ap.args...)
		for _, w := range words {
			if w == "" || strings.ContainsAny(w, " \t\n'\"\\%") {
				return "", usagef("under srun an MPMD job's words may not be empty or hold blanks, quotes, '\\' or '%%': %q", w)
			}
		}
		fmt.Fprintf(&b, "%d-%d %s\n", first, first+ap.np-1, strings.Join(words, " "))
		first += ap.np
	}
	f, err := os.CreateTemp("", "mpirun-multiprog-")
	if err != nil {
		return "", err
	}
	defer f.Close()
	_, err = f.WriteString(b.String())
	return f.Name(), err
}

// srunEnv is srun's environment: a rank's (see environ) without the PMI
// variables, which slurmstepd sets for each task. In an MPMD job it holds
// no program's -env: each program's comes from the --multi-prog file.
func (j *job) srunEnv() []string {
	a0env := j.apps[0].env
	if len(j.apps) > 1 {
		j.apps[0].env = nil
	}
	rankEnv := j.environ(0)
	j.apps[0].env = a0env
	var env []string
	for _, kv := range rankEnv {
		name, _, _ := strings.Cut(kv, "=")
		switch name {
		case "PMI_FD", "PMI_RANK", "PMI_SIZE", "PMI_PORT", "PMI_ID", "PMI_JOBID":
			continue
		}
		env = append(env, kv)
	}
	return env
}

// srunLabel is the label srun --label puts before a task's line.
var srunLabel = regexp.MustCompile(`^ *(\d+): `)

// srunAbort is the line a rank prints when it aborts the job under PMI-2
// (package pmi's abort2), with srun's label if any.
var srunAbort = regexp.MustCompile(`^(?: *\d+: )?adimpi: rank \d+ aborts the job \(exit code (-?\d+)\)`)

// srunExited is srun's report of tasks that exited non-zero.
var srunExited = regexp.MustCompile(`^srun: error: \S+: tasks? [\d,-]+: Exited with exit code (\d+)`)

// runSrun runs the job through srun and returns mpirun's exit status, as
// mpirun's own launching would: exitTimeout when -timeout fired; 128+S when
// mpirun received signal S; the code of the first MPI_Abort (0 made 1);
// the status of the first rank srun reports exiting non-zero; else srun's
// (the highest of the ranks', or 128+S for a rank killed by signal S).
// mpirun's SIGINT, SIGTERM and SIGHUP go to srun as SIGTERM, SIGTERM and
// SIGHUP (srun ends every rank; a SIGINT would only make it print the
// tasks' state).
func (j *job) runSrun(a *slurmAlloc) int {
	conf := ""
	if len(j.apps) > 1 {
		var err error
		if conf, err = j.multiProg(); err != nil {
			j.errorf("mpirun: %v", err)
			return exitUsage
		}
		defer os.Remove(conf)
	}
	argv, err := j.srunArgs(a, conf)
	if err != nil {
		j.errorf("mpirun: %v", err)
		return exitUsage
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = j.srunEnv()
	cmd.Stdin = os.Stdin
	outR, err := cmd.StdoutPipe()
	if err != nil {
		j.errorf("mpirun: %v", err)
		return 1
	}
	errR, err := cmd.StderrPipe()
	if err != nil {
		j.errorf("mpirun: %v", err)
		return 1
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		j.errorf("mpirun: starting srun: %v", err)
		return exitCannotExec
	}
	if j.started != nil {
		j.started()
	}
	out := j.followSrun(cmd, outR, errR)
	timedOut, received, err := j.waitSrun(cmd, out.exited, sigs)
	switch {
	case timedOut:
		return exitTimeout
	case err == nil:
		return 0
	case received != 0:
		return 128 + int(received)
	case out.abortCode > 0:
		return out.abortCode
	case out.exitCode > 0:
		return out.exitCode
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return cmd.ProcessState.ExitCode()
}

// srunOutcome is what srun's output said about the job's end. Its codes
// are set before exited delivers srun's end.
type srunOutcome struct {
	exited    chan error // srun's Wait, once its output has ended
	abortCode int        // the first MPI_Abort's code (0 made 1), or -1
	exitCode  int        // the first non-zero exit srun reports, or -1
}

// followSrun forwards srun's output (see relabel), noting the first
// MPI_Abort and the first failing rank, and waits for srun once both
// streams have ended.
func (j *job) followSrun(cmd *exec.Cmd, outR, errR io.Reader) *srunOutcome {
	o := &srunOutcome{exited: make(chan error, 1), abortCode: -1, exitCode: -1}
	done := make(chan struct{}, 2)
	go func() { j.relabel(outR, j.stdout, nil); done <- struct{}{} }()
	go func() {
		j.relabel(errR, j.stderr, func(line []byte) {
			if m := srunAbort.FindSubmatch(line); m != nil && o.abortCode < 0 {
				o.abortCode, _ = strconv.Atoi(string(m[1]))
				o.abortCode = max(o.abortCode, 1)
			}
			if m := srunExited.FindSubmatch(line); m != nil && o.exitCode < 0 {
				o.exitCode, _ = strconv.Atoi(string(m[1]))
			}
		})
		done <- struct{}{}
	}()
	go func() {
		<-done
		<-done
		o.exited <- cmd.Wait()
	}()
	return o
}

// waitSrun waits for srun's end (exited), passing mpirun's signals on and
// ending the job when -timeout fires. It returns whether the timeout
// fired, the first signal mpirun received (0 if none), and srun's Wait.
func (j *job) waitSrun(cmd *exec.Cmd, exited <-chan error, sigs <-chan os.Signal) (bool, syscall.Signal, error) {
	var timeout <-chan time.Time
	if j.timeout > 0 {
		timeout = time.After(j.timeout)
	}
	timedOut := false
	var received syscall.Signal
	for {
		select {
		case s := <-sigs:
			if received == 0 {
				received = s.(syscall.Signal)
			}
			if s == syscall.SIGINT {
				s = syscall.SIGTERM
			}
			_ = cmd.Process.Signal(s)
		case <-timeout:
			timedOut, timeout = true, nil
			go j.srunTimeout(cmd.Process)
		case err := <-exited:
			return timedOut, received, err
		}
	}
}

// srunTimeout ends a job whose -timeout fired: every rank says where it
// waits (SIGUSR2, which srun passes on), prints its stacks with
// -timeout-stacks (SIGQUIT), and is then terminated (SIGTERM, and SIGKILL
// for an srun still there after Slurm's grace).
func (j *job) srunTimeout(p *os.Process) {
	j.errorf("mpirun: -timeout %v expired: asking every rank where it waits, then ending the job", j.timeout)
	_ = p.Signal(waitReportSignal)
	time.Sleep(reportDelay)
	if j.timeoutStacks {
		_ = p.Signal(syscall.SIGQUIT)
		time.Sleep(reportDelay)
	}
	_ = p.Signal(syscall.SIGTERM)
	time.Sleep(10 * time.Second)
	_ = p.Kill()
}

// relabel copies srun's output to sink a line at a time; with -tag-output
// srun's "R: " label becomes mpirun's "[R@host] ". onLine, if not nil,
// sees each line as srun wrote it.
func (j *job) relabel(r io.Reader, sink *lineSink, onLine func([]byte)) {
	br := bufio.NewReaderSize(r, 64*1024)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			if line[len(line)-1] != '\n' {
				line = append(line, '\n')
			}
			if onLine != nil {
				onLine(line)
			}
			var prefix []byte
			if m := srunLabel.FindSubmatchIndex(line); j.tagOutput && m != nil {
				r, _ := strconv.Atoi(string(line[m[2]:m[3]]))
				if r < len(j.hostOf) {
					prefix = []byte(fmt.Sprintf("[%d@%s] ", r, j.hostOf[r]))
					line = line[m[1]:]
				}
			}
			sink.writeLine(prefix, line)
		}
		if err != nil {
			return
		}
	}
}
