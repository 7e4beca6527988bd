// Command mpirun starts an MPI job: N copies of a program, wired together
// through a PMI-1 server that mpirun runs itself.
//
//	mpirun [-device D] [-np N] [flags] prog [args...]
//
// prog may be an executable (a path, or a bare name looked up in PATH), a Go
// source file, or a Go package directory or import path; Go sources are
// built once with "go build" and the binary is removed afterwards. Run
// "mpirun -h" for the flags, the environment and the exit statuses.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/adimpi/adimpi/adi"
	// Link every device so that -device and -list-devices know them all.
	_ "github.com/adimpi/adimpi/devices"
)

// Exit statuses of mpirun itself (a failing job exits with its rank's
// status instead).
const (
	exitUsage       = 2   // bad flags or arguments
	exitCannotExec  = 126 // prog exists but cannot be run
	exitNotFound    = 127 // prog not found
	exitTimeout     = 124 // -timeout expired
	exitBuildFailed = 1   // go build failed
)

// defaultDevice is used when neither -device nor ADIMPI_DEVICE is given.
const defaultDevice = "netvm"

func main() {
	os.Exit(mpirun(os.Args[1:], os.Stdout, os.Stderr))
}

// options are the parsed command line.
type options struct {
	np            int
	device        string
	deviceOpts    []string
	tagOutput     bool
	timeout       time.Duration
	listDevices   bool
	asyncProgress bool
	help          bool
}

// longFlags lists mpirun's long flag names and whether each takes a value;
// it drives the rewriting of single-dash long flags (see normalizeArgs).
var longFlags = map[string]bool{
	"np":             true,
	"device":         true,
	"device-opt":     true,
	"tag-output":     false,
	"timeout":        true,
	"list-devices":   false,
	"async-progress": false,
	"help":           false,
}

// shortFlags lists mpirun's shorthand letters; shortFlagsWithValue those
// that consume the next argument.
var (
	shortFlags          = map[string]bool{"n": true, "h": true}
	shortFlagsWithValue = map[string]bool{"-n": true}
)

func newFlagSet(o *options) *pflag.FlagSet {
	fs := pflag.NewFlagSet("mpirun", pflag.ContinueOnError)
	fs.SetInterspersed(false) // everything after prog belongs to prog
	fs.SortFlags = false
	defDev := os.Getenv("ADIMPI_DEVICE")
	if defDev == "" {
		defDev = defaultDevice
	}
	fs.IntVarP(&o.np, "np", "n", 1, "start `N` ranks (processes)")
	fs.StringVar(&o.device, "device", defDev, "communication device `name` for the job (default: $ADIMPI_DEVICE, else "+defaultDevice+")")
	fs.StringArrayVar(&o.deviceOpts, "device-opt", nil, "device option `key=value`; repeatable, passed to every rank in order")
	fs.BoolVar(&o.tagOutput, "tag-output", false, "prefix every output line with \"[rank] \"")
	fs.DurationVar(&o.timeout, "timeout", 0, "stop the whole job after `duration` (such as 30s or 5m; 0 = no limit); ranks get SIGQUIT, so Go programs print their goroutines' stacks")
	fs.BoolVar(&o.listDevices, "list-devices", false, "print the names of the available devices, one per line, and exit")
	fs.BoolVar(&o.asyncProgress, "async-progress", false, "ask ranks to run an asynchronous progress thread (sets ADIMPI_ASYNC_PROGRESS=1)")
	fs.BoolVarP(&o.help, "help", "h", false, "show this help and exit")
	return fs
}

func usage(w io.Writer, fs *pflag.FlagSet) {
	fmt.Fprintf(w, `Usage: mpirun [flags] prog [args...]

Starts -np copies of prog as one MPI job and waits for them. Each rank finds
mpirun's PMI-1 server through an inherited socket, and the ranks' standard
output and error are forwarded line by line.

prog is one of:
  an executable file, or a bare name looked up in $PATH;
  a Go source file (prog.go), or a Go package directory (./examples/ring)
  or import path: it is built once with "go build" in the current
  directory, and the binary is deleted when the job ends.

Flags (one or two dashes: -np 4 and --np 4 are the same):
%s
Environment read by mpirun:
  ADIMPI_DEVICE       default for -device
  ADIMPI_DEVICE_OPT   device options k1=v1,k2=v2, put before the -device-opt
                      pairs (which override them)

Environment set for every rank (in addition to mpirun's own environment):
  PMI_FD=3            PMI-1 connection to mpirun (an inherited socket)
  PMI_RANK, PMI_SIZE  the rank and the number of ranks
  ADIMPI_DEVICE       the -device name
  ADIMPI_DEVICE_OPT   the -device-opt pairs, comma-joined: k1=v1,k2=v2
  ADIMPI_ASYNC_PROGRESS=1  with -async-progress
Setting ADIMPI_PMI_DEBUG=1 makes every rank log its PMI traffic to stderr.

Standard input goes to rank 0 only; the other ranks read /dev/null.
SIGINT and SIGTERM are forwarded to every rank; ranks still running 1s
later are killed.

Exit status:
  0        every rank exited 0 (after MPI_Finalize, if it used MPI)
  N        the first failing rank exited with status N; or called MPI_Abort
           with code N (a code of 0 becomes 1); or exited 0 without
           MPI_Finalize (N = 1)
  128+S    a rank, or mpirun, was killed by / received signal S
  124      the -timeout expired
  126/127  prog cannot be executed / was not found
  2        usage error
`, flagUsages(fs))
}

// flagUsages lists the flags in mpirun's own single-dash style.
func flagUsages(fs *pflag.FlagSet) string {
	var b strings.Builder
	fs.VisitAll(func(f *pflag.Flag) {
		name := "-" + f.Name
		if f.Shorthand != "" {
			name = "-" + f.Shorthand + ", " + name
		}
		varname, text := pflag.UnquoteUsage(f)
		if f.Value.Type() != "bool" {
			name += " " + varname
		}
		if f.Name == "np" {
			text += " (default 1)"
		}
		fmt.Fprintf(&b, "  %-22s %s\n", name, text)
	})
	return b.String()
}

// normalizeArgs rewrites single-dash long flags (-np 4) into pflag's
// double-dash form (--np 4). Only arguments before prog are touched.
func normalizeArgs(args []string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" || !strings.HasPrefix(a, "-") || a == "-" {
			return append(out, args[i:]...) // prog and its arguments
		}
		if strings.HasPrefix(a, "--") {
			out = append(out, a)
			name, _, hasValue := strings.Cut(a[2:], "=")
			if longFlags[name] && !hasValue && i+1 < len(args) {
				i++
				out = append(out, args[i])
			}
			continue
		}
		name, _, hasValue := strings.Cut(a[1:], "=")
		if takesValue, ok := longFlags[name]; ok && len(name) > 1 {
			out = append(out, "-"+a)
			if takesValue && !hasValue && i+1 < len(args) {
				i++
				out = append(out, args[i])
			}
			continue
		}
		if len(name) > 1 && !shortFlags[name[:1]] {
			// An unknown long flag: let pflag report it by its name
			// rather than as a cluster of shorthand letters.
			out = append(out, "-"+a)
			continue
		}
		out = append(out, a)
		if shortFlagsWithValue[a] && i+1 < len(args) {
			i++
			out = append(out, args[i])
		}
	}
	return out
}

// mpirun runs the command line args and returns the exit status.
func mpirun(args []string, stdout, stderr io.Writer) int {
	var o options
	fs := newFlagSet(&o)
	fs.SetOutput(io.Discard)
	if err := fs.Parse(normalizeArgs(args)); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			usage(stdout, fs)
			return 0
		}
		fmt.Fprintf(stderr, "mpirun: %v\nRun 'mpirun -h' for help.\n", err)
		return exitUsage
	}
	if o.help {
		usage(stdout, fs)
		return 0
	}
	if o.listDevices {
		for _, name := range adi.Devices() {
			fmt.Fprintln(stdout, name)
		}
		return 0
	}
	usageErr := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "mpirun: "+format+"\nRun 'mpirun -h' for help.\n", a...)
		return exitUsage
	}
	if fs.NArg() == 0 {
		return usageErr("no program given")
	}
	if o.np < 1 {
		return usageErr("-np must be at least 1, not %d", o.np)
	}
	if o.timeout < 0 {
		return usageErr("-timeout must not be negative")
	}
	if _, ok := adi.Lookup(o.device); !ok {
		return usageErr("unknown device %q; known devices: %s", o.device, strings.Join(adi.Devices(), ", "))
	}
	for _, kv := range o.deviceOpts {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || k == "" || strings.Contains(kv, ",") {
			return usageErr("-device-opt %q: want key=value without commas", kv)
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
				return usageErr("ADIMPI_DEVICE_OPT: %q: want key=value", kv)
			}
			inherited = append(inherited, kv)
		}
		o.deviceOpts = append(inherited, o.deviceOpts...)
	}

	prog, progArgs := fs.Arg(0), fs.Args()[1:]
	target, build, err := resolveProgram(prog)
	if err != nil {
		fmt.Fprintf(stderr, "mpirun: %v\n", err)
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return exitNotFound
		}
		return exitCannotExec
	}
	binary := target
	if build {
		dir, err := os.MkdirTemp("", "mpirun-build-")
		if err != nil {
			fmt.Fprintf(stderr, "mpirun: %v\n", err)
			return exitBuildFailed
		}
		defer os.RemoveAll(dir)
		binary, err = goBuild(target, dir, stderr)
		if err != nil {
			fmt.Fprintf(stderr, "mpirun: %v\n", err)
			return exitBuildFailed
		}
	}

	j := &job{
		np:            o.np,
		binary:        binary,
		argv0:         prog,
		args:          progArgs,
		device:        o.device,
		deviceOpts:    o.deviceOpts,
		tagOutput:     o.tagOutput,
		timeout:       o.timeout,
		asyncProgress: o.asyncProgress,
		stdout:        &lineSink{w: stdout},
		stderr:        &lineSink{w: stderr},
	}
	return j.run()
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

// goBuild builds target (a .go file, directory or import path) into dir
// and returns the binary's path. go build's messages go to stderr.
func goBuild(target, dir string, stderr io.Writer) (string, error) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("building %s needs the go command in $PATH: %w", target, err)
	}
	name := strings.TrimSuffix(filepath.Base(target), ".go")
	if !strings.HasSuffix(target, ".go") {
		if abs, err := filepath.Abs(target); err == nil && strings.HasPrefix(target, ".") {
			name = filepath.Base(abs)
		} else {
			name = path.Base(target)
		}
	}
	if name == "" || name == "." || name == "/" {
		name = "prog"
	}
	out := filepath.Join(dir, name)
	cmd := exec.Command(goTool, "build", "-o", out, target)
	cmd.Stdout = stderr
	cmd.Stderr = stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build %s failed: %v", target, err)
	}
	return out, nil
}
