package main

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// options are the job-wide settings of the command line (those of its
// first application).
type options struct {
	device        string
	deviceOpts    []string
	wire          string // -wire: tcp or xdp, passed to ranks as wire.EnvWire
	tagOutput     bool
	timeout       time.Duration
	timeoutStacks bool
	listDevices   bool
	deviceHelp    bool
	asyncProgress bool
	keepRseq      bool
	usize         int // -usize: MPI_UNIVERSE_SIZE
	help          bool
	version       bool
	hosts         []string // -hosts, comma-separated lists
	host          []string // -host, the same
	hostfile      string
	ppn           int
	launcher      string // -launcher: ssh or exec ("": exec if -launcher-exec is given, else ssh)
	launcherExec  string // -launcher-exec: the command that starts a rank on {host}
	roundRobin    bool   // -rr, -map-by node
	mapBy         string
	genv          []string // NAME=VALUE from -genv NAME VALUE
	export        []string // NAME or NAME=VALUE from -x
}

// appOptions are the settings of one application of an MPMD command line
// (mpirun -n 1 ./a : -n 3 ./b); the first application also carries the
// job-wide options.
type appOptions struct {
	np    int
	wdir  string
	env   []string // NAME=VALUE from -env NAME VALUE
	prog  string
	args  []string
	npSet bool // -n was given (otherwise np comes from the hosts' slots, else 1)
}

// pairFlags take two values (NAME VALUE), which normalizeArgs joins into
// one (NAME=VALUE) for pflag.
var pairFlags = map[string]bool{"genv": true, "env": true}

// newFlagSet returns the flags of an application's segment of the command
// line; the first segment (first) also has the job-wide flags.
func newFlagSet(o *options, a *appOptions, first bool) *pflag.FlagSet {
	fs := pflag.NewFlagSet("mpirun", pflag.ContinueOnError)
	fs.SetInterspersed(false) // everything after prog belongs to prog
	fs.SortFlags = false
	fs.IntVarP(&a.np, "np", "n", 1, "start `N` ranks of this program (default: the slots of -hosts/-hostfile, else 1)")
	fs.StringVar(&a.wdir, "wdir", "", "run this program's ranks in directory `dir` (default: mpirun's)")
	fs.StringArrayVar(&a.env, "env", nil, "set NAME=VALUE for this program's ranks")
	if !first {
		return fs
	}
	defDev := os.Getenv("ADIMPI_DEVICE")
	if defDev == "" {
		defDev = defaultDevice
	}
	fs.StringVar(&o.device, "device", defDev, "communication device `name` for the job (default: $ADIMPI_DEVICE, else "+defaultDevice+")")
	fs.StringArrayVar(&o.deviceOpts, "device-opt", nil, "device option `key=value`; repeatable, passed to every rank in order")
	fs.StringVar(&o.wire, "wire", os.Getenv("ADIMPI_WIRE"), "`kind` of wire between hosts: tcp (default) or xdp (AF_XDP, falling back to TCP where it cannot be had; docs/xdp.md)")
	fs.StringArrayVar(&o.genv, "genv", nil, "set NAME=VALUE for every rank")
	fs.StringArrayVarP(&o.export, "x", "x", nil, "pass mpirun's variable `NAME` to every rank; -x NAME=VALUE sets it")
	fs.BoolVarP(&o.tagOutput, "tag-output", "l", false, "prefix every output line with \"[rank] \", or \"[rank@host] \" when ranks run on other hosts (-l: label)")
	fs.StringArrayVar(&o.hosts, "hosts", nil, "run on `host[:slots],...`")
	fs.StringArrayVar(&o.host, "host", nil, "same as -hosts (Open MPI's spelling): `host[:slots],...`")
	fs.StringVarP(&o.hostfile, "hostfile", "f", "", "read hosts from `file`: lines host, host:slots or host slots=N")
	fs.StringVar(&o.hostfile, "machinefile", "", "same as -hostfile: `file`")
	fs.IntVar(&o.ppn, "ppn", 0, "`N` ranks per host (overrides the hosts' slots)")
	fs.BoolVar(&o.roundRobin, "rr", false, "place ranks on the hosts round-robin (default: block, filling each host's slots in turn)")
	fs.StringVar(&o.mapBy, "map-by", "slot", "placement `how`: slot (block) or node (round-robin)")
	fs.StringVar(&o.launcher, "launcher", "", "how to start ranks on other hosts: `ssh` (the default), exec (run -launcher-exec) or slurm (srun, inside a Slurm allocation)")
	fs.StringVar(&o.launcherExec, "launcher-exec", "", "with -launcher exec (implied): start a rank on another host by running `CMD` (words split as a shell would, {host} replaced by the host) followed by mpirun's proxy, the program and its arguments; with -launcher ssh: the ssh command to use instead of ssh (the host is appended unless a word has {host})")
	fs.DurationVar(&o.timeout, "timeout", 0, "stop the whole job after `duration` (such as 30s or 5m; 0 = no limit), after every rank says where it waits")
	fs.BoolVar(&o.timeoutStacks, "timeout-stacks", false, "when -timeout fires, also print every goroutine's stack of every rank (SIGQUIT)")
	fs.BoolVar(&o.listDevices, "list-devices", false, "print the names of the available devices, one per line, and exit")
	fs.BoolVar(&o.deviceHelp, "device-help", false, "print the -device-opt keys of the device (-device) with their defaults, ranges and meaning, and exit")
	fs.BoolVar(&o.asyncProgress, "async-progress", false, "ask ranks to run an asynchronous progress thread (sets ADIMPI_ASYNC_PROGRESS=1)")
	fs.BoolVar(&o.keepRseq, "keep-rseq", false, "leave glibc's per-thread rseq registration on (by default ranks get GLIBC_TUNABLES=glibc.pthread.rseq=0)")
	fs.IntVar(&o.usize, "usize", 0, "MPI_UNIVERSE_SIZE: how many processes the job may have, spawned ones included (default: the number of ranks)")
	fs.BoolVar(&o.version, "version", false, "print mpirun's version and exit")
	fs.BoolVarP(&o.help, "help", "h", false, "show this help and exit")
	return fs
}

// takesValue reports whether flag f consumes an argument.
func takesValue(f *pflag.Flag) bool { return f.NoOptDefVal == "" }

// normalizeArgs rewrites one segment of the command line for pflag:
// single-dash long flags (-np 4, -hosts a) become double-dash ones, and the
// two values of -genv/-env NAME VALUE become one NAME=VALUE. Only the
// arguments before prog are touched. A flag missing its values is left for
// pflag to report.
func normalizeArgs(fs *pflag.FlagSet, args []string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" || !strings.HasPrefix(a, "-") || a == "-" {
			return append(out, args[i:]...) // prog and its arguments
		}
		dashes := "-"
		if strings.HasPrefix(a, "--") {
			dashes = "--"
		}
		name, _, hasValue := strings.Cut(a[len(dashes):], "=")
		if pairFlags[name] && fs.Lookup(name) != nil && !hasValue {
			if i+2 < len(args) {
				out = append(out, "--"+name+"="+args[i+1]+"="+args[i+2])
				i += 2
			} else {
				out = append(out, "--"+name) // pflag reports the missing value
			}
			continue
		}
		f := fs.Lookup(name)
		if dashes == "--" || (f != nil && len(name) > 1) {
			// A long flag (one or two dashes).
			out = append(out, "--"+a[len(dashes):])
			if f != nil && takesValue(f) && !hasValue && i+1 < len(args) {
				i++
				out = append(out, args[i])
			}
			continue
		}
		if short := fs.ShorthandLookup(name[:1]); short != nil && (len(name) == 1 || takesValue(short)) {
			// -n 4, -n4, -l, -h, -f file: pflag's own shorthand syntax
			// (-lh as a cluster of booleans is not accepted: -hosts
			// misspelt must not read as -h -o -s -t -s).
			out = append(out, a)
			if takesValue(short) && len(a) == 2 && i+1 < len(args) {
				i++
				out = append(out, args[i])
			}
			continue
		}
		// An unknown flag: let pflag report it by its whole name rather
		// than as a cluster of shorthand letters.
		out = append(out, "--"+a[1:])
	}
	return out
}

// splitApps cuts an MPMD command line at its ":" arguments.
func splitApps(args []string) [][]string {
	var segs [][]string
	start := 0
	for i, a := range args {
		if a == ":" {
			segs = append(segs, args[start:i])
			start = i + 1
		}
	}
	return append(segs, args[start:])
}

// usageError is a mistake on the command line.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return &usageError{fmt.Sprintf(format, a...)} }

// parseArgs parses a whole command line: the job-wide options and one
// appOptions per application. It returns pflag.ErrHelp for -h.
func parseArgs(args []string) (*options, []*appOptions, error) {
	o := &options{}
	var apps []*appOptions
	for i, seg := range splitApps(args) {
		a := &appOptions{}
		fs := newFlagSet(o, a, i == 0)
		fs.SetOutput(nilWriter{})
		if err := fs.Parse(normalizeArgs(fs, seg)); err != nil {
			if err == pflag.ErrHelp {
				return o, nil, err
			}
			if i > 0 {
				return nil, nil, usagef("program %d of the command line: %v (job-wide flags go before the first program)", i+1, err)
			}
			return nil, nil, usagef("%v", err)
		}
		if i == 0 && (o.help || o.version || o.listDevices || o.deviceHelp) {
			return o, nil, nil
		}
		a.npSet = fs.Changed("np")
		if fs.NArg() == 0 {
			if i == 0 && len(seg) == len(args) {
				return nil, nil, usagef("no program given")
			}
			return nil, nil, usagef("program %d of the command line (after %d \":\"): no program given", i+1, i)
		}
		a.prog, a.args = fs.Arg(0), fs.Args()[1:]
		if a.np < 1 {
			return nil, nil, usagef("-np must be at least 1, not %d", a.np)
		}
		for _, kv := range a.env {
			if err := checkEnvPair("-env", kv); err != nil {
				return nil, nil, err
			}
		}
		apps = append(apps, a)
	}
	for _, kv := range o.genv {
		if err := checkEnvPair("-genv", kv); err != nil {
			return nil, nil, err
		}
	}
	for _, x := range o.export {
		if name, _, _ := strings.Cut(x, "="); !validEnvName(name) {
			return nil, nil, usagef("-x %q: want NAME or NAME=VALUE", x)
		}
	}
	if o.timeout < 0 {
		return nil, nil, usagef("-timeout must not be negative")
	}
	switch o.mapBy {
	case "slot", "core":
	case "node":
		o.roundRobin = true
	default:
		return nil, nil, usagef("-map-by %q: want slot or node", o.mapBy)
	}
	switch o.launcher {
	case "", launcherSSH, launcherExec:
	case launcherSlurm:
		if o.launcherExec != "" {
			return nil, nil, usagef("-launcher slurm takes no -launcher-exec: srun starts the ranks")
		}
	default:
		return nil, nil, usagef("-launcher %q: want ssh, exec or slurm", o.launcher)
	}
	if o.launcher == "exec" && o.launcherExec == "" {
		return nil, nil, usagef("-launcher exec needs the command: -launcher-exec 'CMD {host}'")
	}
	if o.ppn < 0 {
		return nil, nil, usagef("-ppn must be at least 1, not %d", o.ppn)
	}
	return o, apps, nil
}

// checkEnvPair checks a NAME=VALUE made of -genv/-env NAME VALUE.
func checkEnvPair(flag, kv string) error {
	name, _, ok := strings.Cut(kv, "=")
	if !ok || !validEnvName(name) {
		return usagef("%s %q: want %s NAME VALUE", flag, kv, flag)
	}
	return nil
}

// validEnvName reports whether s can name an environment variable.
func validEnvName(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// nilWriter discards pflag's own messages: mpirun prints the error itself.
type nilWriter struct{}

func (nilWriter) Write(p []byte) (int, error) { return len(p), nil }
