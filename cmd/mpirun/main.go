// Command mpirun starts an MPI job: N copies of a program, wired together
// through a PMI-1 server that mpirun runs itself.
//
//	mpirun [-device D] [-np N] [flags] prog [args...] [: [-np N] prog2 [args...]]...
//
// prog may be an executable (a path, or a bare name looked up in PATH), a Go
// source file, or a Go package directory or import path; Go sources are
// built once with "go build" into a cache directory that later runs reuse.
// Several programs separated by ":" make one MPMD job. Run "mpirun -h" for
// the flags, the environment and the exit statuses.
package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/adimpi/adimpi/adi"
	// Link every device so that -device and -list-devices know them all.
	_ "github.com/adimpi/adimpi/devices"
)

// Exit statuses of mpirun itself (a failing job exits with its rank's
// status instead). A usage error is 64 (EX_USAGE of sysexits.h) rather than
// 2, the status of a Go program that panics.
const (
	exitUsage       = 64  // bad flags or arguments
	exitCannotExec  = 126 // prog exists but cannot be run
	exitNotFound    = 127 // prog not found
	exitTimeout     = 124 // -timeout expired
	exitBuildFailed = 1   // go build failed
)

// defaultDevice is used when neither -device nor ADIMPI_DEVICE is given.
const defaultDevice = "netvm"

func main() {
	if len(os.Args) > 1 && os.Args[1] == proxyFlag {
		os.Exit(proxy(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == sshProxyFlag {
		os.Exit(sshProxy())
	}
	os.Exit(mpirun(os.Args[1:], os.Stdout, os.Stderr))
}

func usage(w io.Writer) {
	var o options
	var a appOptions
	fmt.Fprintf(w, `Usage: mpirun [flags] prog [args...]
       mpirun [flags] [-n N] prog [args...] : [-n N] prog2 [args...] : ...

Starts -n copies of prog as one MPI job and waits for them. Each rank finds
mpirun's PMI-1 server through an inherited socket, and the ranks' standard
output and error are forwarded line by line.

With ":" the job runs several programs (MPMD): the world is the
concatenation of their ranks, in order, and each program's ranks get its
index (0, 1, ...) as ADIMPI_APPNUM (MPI's APPNUM). Each program may have its
own -n, -wdir and -env; the other flags are job-wide and go before the
first program.

prog is one of:
  an executable file, or a bare name looked up in $PATH; one linked
  against libmpich.so.12 (a C program built with mpicc.mpich), or a
  wrapper such as strace or perf with such a program among its arguments,
  gets adimpi's drop-in library, built once from cmd/libmpich into the
  build cache below and put first in the ranks' LD_LIBRARY_PATH
  (docs/c-abi.md);
  a Go source file (prog.go), or a Go package directory (./examples/ring)
  or import path: it is built once with "go build" in the current
  directory into mpirun's build cache ($XDG_CACHE_HOME/adimpi/mpirun, else
  ~/.cache/adimpi/mpirun), where later runs reuse it.

Flags of each program:
%s
Job-wide flags:
%s
Flags take one dash or two (-np 4, --np 4, --np=4), as Hydra and Open MPI
accept them.

Hosts: -hosts, -host and -hostfile name the hosts (hostfile lines "host",
"host:slots" or "host slots=N"; '#' comments); without -n the job has
-ppn times the number of hosts ranks, else as many as the hosts give slots.
Ranks are placed in blocks: each host takes its slots (-ppn if given; 1 for
a host without slots when others have some; an even share of -n when no
host has any) before the next; -rr or -map-by node deals them round-robin.
Ranks on this machine (localhost, 127.0.0.1, its host name or addresses)
start as usual; ranks on other hosts start through a launcher:

  -launcher ssh (the default): "ssh HOST exec MPIRUN -adimpi-ssh-proxy",
     once per host, where MPIRUN is mpirun's own executable, the host's
     proxy: it reads its ranks' programs, arguments, directories and
     environments from mpirun on its standard input (ahead of rank 0's
     input), checks that they are there, connects back to mpirun over TCP
     for each rank (control, PMI, output, error) and runs the ranks. ssh
     must log in without a prompt (keys), and the host must reach this one
     over TCP (mpirun listens on an ephemeral port of every address).
     -launcher-exec CMD replaces "ssh" (the host is appended unless a word
     of CMD has {host}).
  -launcher exec, or -launcher-exec CMD alone: CMD is split into words as a
     shell would (no shell runs), {host} replaced by the host's name,
     followed by mpirun's executable as the rank's proxy
     (-adimpi-rank-proxy), the working directory, the program and its
     arguments. CMD must pass the environment and open descriptors 3 and 4
     through and kill what it started when it is itself killed, as
     "netcluster exec -dir D {host} --" and "ip netns exec {host}" do.

mpirun, the program and the working directory (mpirun's, or -wdir) must
exist at the same paths on every host: before any rank starts, mpirun
checks that on every other host through the launcher, and a host that
lacks one, or cannot be reached, stops the job with one line naming it
(exit 127 or 255). A job on several hosts labels lines "[rank@host] " with
-tag-output and names the host in mpirun's messages.

Environment read by mpirun:
  ADIMPI_DEVICE       default for -device
  ADIMPI_DEVICE_OPT   device options k1=v1,k2=v2, put before the -device-opt
                      pairs (which override them)
  ADIMPI_LIBMPICH_DIR  a directory holding a prebuilt libmpich.so.12 for C
                      programs, used instead of building one
  ADIMPI_WIRE         default for -wire

Environment set for every rank (in addition to mpirun's own environment,
-x, -genv and -env):
  PMI_FD=3            PMI-1 connection to mpirun (an inherited socket)
  PMI_RANK, PMI_SIZE  the rank and the number of ranks
  ADIMPI_APPNUM       the index of the rank's program on an MPMD command line
  ADIMPI_DEVICE       the -device name
  ADIMPI_DEVICE_OPT   the -device-opt pairs, comma-joined: k1=v1,k2=v2
  ADIMPI_ASYNC_PROGRESS=1  with -async-progress
  ADIMPI_WIRE         the -wire kind (tcp or xdp), when given
  ADIMPI_JOB_SECRET   the job's secret (32 random bytes, hex), with which
                      ranks authenticate their connections to each other
  GLIBC_TUNABLES      gains glibc.pthread.rseq=0 unless it names that tunable
                      or -keep-rseq is given: the kernel then keeps no rseq
                      area per thread up to date at every context switch
Setting ADIMPI_PMI_DEBUG=1 makes every rank log its PMI traffic to stderr.

Standard input goes to rank 0 only; the other ranks read /dev/null.
SIGINT and SIGTERM are forwarded to every rank; ranks still running 1s
later are killed.

When -timeout fires, mpirun sends every rank SIGUSR2: an adimpi rank prints
one line saying in which MPI call it waits, for which peer, tag and
communicator, and for how long. Then (with -timeout-stacks) SIGQUIT makes
every Go rank print its goroutines' stacks, each line labelled [rank].

Exit status:
  0        every rank exited 0 (after MPI_Finalize, if it used MPI)
  N        the first failing rank exited with status N (2: a Go panic); or
           called MPI_Abort with code N (a code of 0 becomes 1); or exited 0
           without MPI_Finalize (N = 1)
  128+S    a rank, or mpirun, was killed by / received signal S
  1        go build failed
  64       usage error (bad flags, arguments, hosts or hostfile)
  124      the -timeout expired
  126/127  prog cannot be executed / was not found (127: on another host)
  255      another host cannot be reached through the launcher
`, flagUsages(newFlagSet(&o, &a, false), nil), flagUsages(newFlagSet(&o, &a, true), newFlagSet(&o, &a, false)))
	fmt.Fprint(w, slurmUsage)
}

// flagUsages lists the flags of fs that are not in skip, in mpirun's own
// single-dash style.
func flagUsages(fs, skip *pflag.FlagSet) string {
	var b strings.Builder
	fs.VisitAll(func(f *pflag.Flag) {
		if skip != nil && skip.Lookup(f.Name) != nil {
			return
		}
		name := "-" + f.Name
		if f.Shorthand != "" && f.Shorthand != f.Name {
			name = "-" + f.Shorthand + ", " + name
		}
		varname, text := pflag.UnquoteUsage(f)
		switch {
		case pairFlags[f.Name]:
			name += " NAME VALUE"
		case takesValue(f):
			name += " " + varname
		}
		fmt.Fprintf(&b, "  %-24s %s\n", name, text)
	})
	return b.String()
}

// version is mpirun's version: the module's, as the go command recorded it.
func version() string {
	v := "(devel)"
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" {
			v = bi.Main.Version
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				v += " " + s.Value[:12]
			}
		}
	}
	return fmt.Sprintf("mpirun (adimpi) %s, %s, PMI-1\n", v, goruntime.Version())
}

// mpirun runs the command line args and returns the exit status.
func mpirun(args []string, stdout, stderr io.Writer) int {
	usageErr := func(err error) int {
		fmt.Fprintf(stderr, "mpirun: %v\nRun 'mpirun -h' for help.\n", err)
		return exitUsage
	}
	o, apps, err := parseArgs(args)
	switch {
	case errors.Is(err, pflag.ErrHelp) || err == nil && o.help:
		usage(stdout)
		return 0
	case err != nil:
		return usageErr(err)
	case o.version:
		fmt.Fprint(stdout, version())
		return 0
	case o.listDevices:
		for _, name := range adi.Devices() {
			fmt.Fprintln(stdout, name)
		}
		return 0
	case o.deviceHelp:
		if err := deviceHelp(stdout, o.device); err != nil {
			return usageErr(err)
		}
		return 0
	}
	if _, ok := adi.Lookup(o.device); !ok {
		return usageErr(usagef("unknown device %q; known devices: %s", o.device, strings.Join(adi.Devices(), ", ")))
	}
	switch o.wire {
	case "", "tcp", "xdp":
		if o.wire != "" {
			o.genv = append([]string{"ADIMPI_WIRE=" + o.wire}, o.genv...)
		}
	default:
		return usageErr(usagef("-wire %q: want tcp or xdp", o.wire))
	}
	for _, kv := range o.deviceOpts {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || k == "" || strings.Contains(kv, ",") {
			return usageErr(usagef("-device-opt %q: want key=value without commas", kv))
		}
	}
	// Options from the environment come first, so that -device-opt
	// overrides them (a rank keeps the last value of a key).
	if env := os.Getenv("ADIMPI_DEVICE_OPT"); env != "" {
		var inherited []string
		for _, kv := range strings.Split(env, ",") {
			if kv = strings.TrimSpace(kv); kv == "" {
				continue
			}
			if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
				return usageErr(usagef("ADIMPI_DEVICE_OPT: %q: want key=value", kv))
			}
			inherited = append(inherited, kv)
		}
		o.deviceOpts = append(inherited, o.deviceOpts...)
	}
	hosts, err := readHosts(o)
	if err != nil {
		return usageErr(err)
	}
	slurm, err := slurmAllocation(o, &hosts) // slurm.go: inside an allocation, its nodes
	if err != nil {
		return usageErr(err)
	}
	// Inside an allocation srun starts every rank: no launcher is needed.
	anyRemote := markLocal(hosts) && !slurm.viaSrun()
	if n := defaultNP(hosts, o.ppn); len(apps) == 1 && !apps[0].npSet && n > 0 {
		apps[0].np = n
	}
	var launcher []string
	self := ""
	kind := o.launcher
	if kind == "" {
		kind = launcherSSH
		if o.launcherExec != "" {
			kind = launcherExec
		}
	}
	if anyRemote {
		if launcher, err = launcherCommand(kind, o.launcherExec); err != nil {
			fmt.Fprintf(stderr, "mpirun: %v\n", err)
			return exitNotFound
		}
		if self, err = os.Executable(); err != nil {
			fmt.Fprintf(stderr, "mpirun: finding its own executable for the remote ranks' proxy: %v\n", err)
			return 1
		}
	}
	env, err := jobEnv(o)
	if err != nil {
		return usageErr(err)
	}
	secret, err := newSecret()
	if err != nil {
		fmt.Fprintf(stderr, "mpirun: %v\n", err)
		return 1
	}

	j := &job{
		device:        o.device,
		deviceOpts:    o.deviceOpts,
		env:           env,
		tagOutput:     o.tagOutput,
		timeout:       o.timeout,
		timeoutStacks: o.timeoutStacks,
		asyncProgress: o.asyncProgress,
		keepRseq:      o.keepRseq,
		stdout:        &lineSink{w: stdout},
		stderr:        &lineSink{w: stderr},
		secret:        secret,
		launcher:      launcher,
		launcherKind:  kind,
		self:          self,
		usize:         o.usize,
	}
	var unlocks []func()
	defer func() {
		for _, u := range unlocks {
			u()
		}
	}()
	built := map[string]string{} // target → binary: an MPMD line may name a package twice
	for i, a := range apps {
		ja, unlock, code := prepareApp(a, i, built, stderr)
		if code != 0 {
			return code
		}
		if unlock != nil {
			unlocks = append(unlocks, unlock)
		}
		j.apps = append(j.apps, ja)
		j.np += a.np
	}
	j.placeRanks(hosts, o.ppn, o.roundRobin)
	j.hosts = hosts
	j.started = func() {
		for _, u := range unlocks {
			u()
		}
		unlocks = nil
	}
	if slurm.viaSrun() {
		return j.runSrun(slurm)
	}
	return j.run()
}

// readHosts reads -hosts, -host and -hostfile, in that order.
func readHosts(o *options) ([]host, error) {
	var hosts []host
	for _, l := range []struct {
		flag  string
		lists []string
	}{{"-hosts", o.hosts}, {"-host", o.host}} {
		h, err := parseHostList(l.flag, l.lists)
		if err != nil {
			return nil, err
		}
		hosts = append(hosts, h...)
	}
	if o.hostfile != "" {
		h, err := parseHostfile(o.hostfile)
		if err != nil {
			return nil, err
		}
		hosts = append(hosts, h...)
	}
	return hosts, nil
}

// launcherCommand returns the words of the command that reaches other
// hosts (-launcher-exec split as a shell would; for ssh without it, "ssh")
// and checks that its program exists here.
func launcherCommand(kind, cmd string) ([]string, error) {
	if kind == launcherSSH && cmd == "" {
		if _, err := exec.LookPath("ssh"); err != nil {
			return nil, fmt.Errorf("-launcher ssh (the default for other hosts): %v (install an ssh client, or start ranks with -launcher-exec 'CMD {host}')", err)
		}
		return []string{"ssh"}, nil
	}
	words, err := splitCommand(cmd)
	if err != nil {
		return nil, fmt.Errorf("-launcher-exec %q: %v", cmd, err)
	}
	if len(words) == 0 {
		return nil, fmt.Errorf("-launcher-exec %q: no command", cmd)
	}
	if !strings.Contains(words[0], hostPlaceholder) {
		if _, err := exec.LookPath(words[0]); err != nil {
			return nil, fmt.Errorf("-launcher-exec %q: %v", cmd, err)
		}
	}
	return words, nil
}

// newSecret makes the job's secret (32 random bytes in hex), which every
// rank gets as wire.EnvSecret to authenticate its connections to the
// others.
func newSecret() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("making the job secret: %v", err)
	}
	return hex.EncodeToString(b), nil
}

// jobEnv is what -x and -genv add to every rank's environment, as
// NAME=VALUE in order (a later one wins).
func jobEnv(o *options) ([]string, error) {
	var env []string
	for _, x := range o.export {
		if strings.Contains(x, "=") {
			env = append(env, x)
			continue
		}
		v, ok := os.LookupEnv(x)
		if !ok {
			return nil, usagef("-x %s: mpirun's environment has no %s", x, x)
		}
		env = append(env, x+"="+v)
	}
	return append(env, o.genv...), nil
}

// prepareApp resolves (and if need be builds) one program of the command
// line; built maps the targets already built in this run to their binaries.
// It returns a non-zero exit status on failure, having said why; and for a
// newly built program, the function that unlocks its build cache entry.
func prepareApp(a *appOptions, index int, built map[string]string, stderr io.Writer) (*app, func(), int) {
	if a.wdir != "" {
		if fi, err := os.Stat(a.wdir); err != nil || !fi.IsDir() {
			fmt.Fprintf(stderr, "mpirun: -wdir %s: not a directory\nRun 'mpirun -h' for help.\n", a.wdir)
			return nil, nil, exitUsage
		}
	}
	target, build, err := resolveProgram(a.prog)
	if err != nil {
		fmt.Fprintf(stderr, "mpirun: %v\n", err)
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return nil, nil, exitNotFound
		}
		return nil, nil, exitCannotExec
	}
	ja := &app{index: index, np: a.np, binary: target, argv0: a.prog, args: a.args, wdir: a.wdir, env: a.env}
	if !build {
		lib, err := prepareCProgram(target, a.args, stderr) // a C program linked against libmpich.so.12, or a wrapper of one (cprog.go)
		if err != nil {
			fmt.Fprintf(stderr, "mpirun: %v\n", err)
			return nil, nil, exitBuildFailed
		}
		ja.libDir = lib
		return ja, nil, 0
	}
	if bin, ok := built[target]; ok {
		ja.binary = bin
		return ja, nil, 0
	}
	bin, unlock, err := goBuild(target, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "mpirun: %v\n", err)
		return nil, nil, exitBuildFailed
	}
	built[target] = bin
	ja.binary = bin
	return ja, unlock, 0
}

// resolveProgram decides how to run prog. It returns the executable's
// path, or (with build set) the argument to pass to go build.
func resolveProgram(prog string) (target string, build bool, err error) {
	fi, statErr := os.Stat(prog)
	switch {
	case strings.HasSuffix(prog, ".go"):
		if statErr != nil {
			return "", false, fmt.Errorf("Go source %s: %w", prog, statErr)
		}
		if fi.IsDir() {
			return goPackageArg(prog), true, nil
		}
		return prog, true, nil
	case statErr == nil && fi.IsDir():
		return goPackageArg(prog), true, nil
	case statErr == nil:
		if fi.Mode()&0o111 == 0 {
			return "", false, fmt.Errorf("%s is not executable", prog)
		}
		abs, err := filepath.Abs(prog)
		if err != nil {
			return "", false, err
		}
		return abs, false, nil
	case !strings.Contains(prog, "/"):
		p, err := exec.LookPath(prog)
		if err != nil {
			return "", false, fmt.Errorf("program %q: %w", prog, err)
		}
		abs, err := filepath.Abs(p)
		if err != nil {
			return "", false, err
		}
		return abs, false, nil
	case !strings.HasPrefix(prog, ".") && !strings.HasPrefix(prog, "/") &&
		strings.Contains(strings.SplitN(prog, "/", 2)[0], "."):
		return prog, true, nil // an import path such as example.com/x/cmd
	default:
		return "", false, fmt.Errorf("program %s: %w", prog, statErr)
	}
}

// goPackageArg turns a directory into an argument go build reads as a
// directory rather than an import path.
func goPackageArg(dir string) string {
	if filepath.IsAbs(dir) {
		return dir
	}
	c := filepath.Clean(dir)
	if c == "." || c == ".." || strings.HasPrefix(c, "../") {
		return c
	}
	return "./" + c
}

// deviceHelp prints the options of device name as its option table gives
// them (adi.OptionHelper), for mpirun -device-help.
func deviceHelp(stdout io.Writer, name string) error {
	f, ok := adi.Lookup(name)
	if !ok {
		return usagef("unknown device %q; known devices: %s", name, strings.Join(adi.Devices(), ", "))
	}
	h, ok := f().(adi.OptionHelper)
	if !ok {
		fmt.Fprintf(stdout, "device %s describes no options\n", name)
		return nil
	}
	fmt.Fprintf(stdout, "device %s options (-device-opt key=value):\n%s", name, h.OptionHelp())
	return nil
}
