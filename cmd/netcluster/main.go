// Command netcluster makes a simulated cluster on this machine: N hosts,
// each with its own network, PID, mount, IPC and UTS namespaces, joined by a
// bridge, with addresses 198.18.0.1... and names h1, h2, ... in a hosts file
// that every host sees as /etc/hosts (see package internal/netcluster).
//
//	netcluster up -n 3 [-dir D] [--ssh]    start 3 hosts and return; they run until "down"
//	netcluster up -n 3 --slurm [-dir D]    the same, with a Slurm cluster on the hosts (docs/slurm.md)
//	netcluster exec [-dir D] h2 -- cmd...  run cmd on h2
//	netcluster netem [-dir D] h1 delay 1ms loss 1%   shape what h1 receives (tc netem, or a delay line); "off" removes it
//	netcluster link [-dir D] h2 down|up    pull or plug h2's cable
//	netcluster hosts [-dir D]              list the hosts
//	netcluster down [-dir D]               tear the cluster down
//
// With --ssh every host runs an sshd that accepts the cluster's own key:
// "netcluster exec h1 -- D/ssh/ssh h2 CMD" (a script running ssh -F
// D/ssh/ssh_config) logs in from h1 to h2. D defaults to
// $TMPDIR/adimpi-netcluster. "up" leaves a supervisor
// process behind (its log is D/netcluster.log); the hosts die with it.
// Needs root.
package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"

	"github.com/adimpi/adimpi/internal/netcluster"
	"github.com/adimpi/adimpi/internal/slurmcluster"
)

// slurmDir is the subdirectory of the cluster's directory that holds the
// Slurm cluster of "up --slurm".
const slurmDir = "slurm"

// slurmEnv is env for a command run on a host: when the cluster runs Slurm
// and env names no slurm.conf, SLURM_CONF names the cluster's.
func slurmEnv(dir string, env []string) []string {
	conf := filepath.Join(dir, slurmDir, "slurm.conf")
	if _, err := os.Stat(conf); err != nil {
		return env
	}
	for _, kv := range env {
		if strings.HasPrefix(kv, "SLURM_CONF=") {
			return env
		}
	}
	return append(env, "SLURM_CONF="+conf)
}

const usage = `usage:
  netcluster up [-n N] [-dir D] [--private-tmp] [--slurm] [--ssh] [--mtu M] [--cpu-per-host]
  netcluster exec [-dir D] HOST -- CMD [ARGS...]
  netcluster netem [-dir D] HOST NETEM-ARGS...|off
  netcluster link [-dir D] HOST down|up
  netcluster hosts [-dir D]
  netcluster down [-dir D]
`

// stopTimeout bounds how long "down" waits for the hosts to exit.
const stopTimeout = 10 * time.Second

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes one subcommand and returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	sub, args := args[0], args[1:]
	fs := pflag.NewFlagSet("netcluster "+sub, pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.SetInterspersed(false)
	dir := fs.String("dir", filepath.Join(os.TempDir(), "adimpi-netcluster"), "the cluster's directory (hosts file, state, log)")
	n := fs.IntP("hosts", "n", 3, "number of hosts (up)")
	privateTmp := fs.Bool("private-tmp", false, "give every host its own /tmp as well (up)")
	slurm := fs.Bool("slurm", false, "run a Slurm cluster on the hosts: slurmctld on h1, slurmd and munged on each (up)")
	withSSH := fs.Bool("ssh", false, "run an sshd on every host, with key-based login through D/ssh/ssh (up)")
	mtu := fs.Int("mtu", 0, "the links' MTU, e.g. 9000 for jumbo frames (up; default the kernel's, 1500)")
	cpuPerHost := fs.Bool("cpu-per-host", false, "run each host's processes on a CPU of its own, host i on CPU (i-1) mod the CPUs there are (up)")
	if err := fs.Parse(normalize(args)); err != nil {
		return 2
	}
	rest := fs.Args()
	var err error
	switch sub {
	case "up":
		err = up(*dir, *n, hostOpts{*privateTmp, *slurm, *withSSH, *mtu, *cpuPerHost}, stdout)
	case "serve": // the supervisor that "up" starts
		err = serve(*dir, *n, hostOpts{*privateTmp, *slurm, *withSSH, *mtu, *cpuPerHost})
	case "down":
		err = netcluster.Stop(*dir, stopTimeout)
	case "hosts":
		err = withCluster(*dir, func(c *netcluster.Cluster) error {
			for _, h := range c.Hosts {
				fmt.Fprintf(stdout, "%s\t%s\tholder PID %d\n", h.Name, h.Addr, h.PID)
			}
			return nil
		})
	case "exec":
		if len(rest) > 1 && rest[1] == "--" {
			rest = append(rest[:1], rest[2:]...)
		}
		if len(rest) < 2 {
			fmt.Fprint(stderr, usage)
			return 2
		}
		err = execOn(*dir, rest[0], rest[1:])
	case "netem":
		if len(rest) < 2 {
			fmt.Fprint(stderr, usage)
			return 2
		}
		err = withCluster(*dir, func(c *netcluster.Cluster) error {
			if len(rest) == 2 && rest[1] == "off" {
				return c.Netem(rest[0])
			}
			return c.Netem(rest[0], rest[1:]...)
		})
	case "link":
		if len(rest) != 2 || (rest[1] != "up" && rest[1] != "down") {
			fmt.Fprint(stderr, usage)
			return 2
		}
		err = withCluster(*dir, func(c *netcluster.Cluster) error { return c.SetLink(rest[0], rest[1] == "up") })
	default:
		fmt.Fprint(stderr, usage)
		return 2
	}
	if err != nil {
		fmt.Fprintf(stderr, "netcluster %s: %s\n", sub, strings.TrimPrefix(err.Error(), "netcluster: "))
		return 1
	}
	return 0
}

// longFlags are the long flags and whether each takes a value.
var longFlags = map[string]bool{"dir": true, "hosts": true, "private-tmp": false, "slurm": false, "ssh": false, "mtu": true}

// normalize lets the long flags be written with one dash, as in
// "netcluster up -dir D", which pflag would read as -d -i -r. Flags end at
// the first operand or "--".
func normalize(args []string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" || !strings.HasPrefix(a, "-") {
			return append(out, args[i:]...)
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		takesValue, long := longFlags[name]
		if long && !strings.HasPrefix(a, "--") {
			a = "-" + a
		}
		out = append(out, a)
		if (takesValue || a == "-n") && !hasValue && i+1 < len(args) {
			i++
			out = append(out, args[i])
		}
	}
	return out
}

// withCluster runs f on the cluster recorded in dir.
func withCluster(dir string, f func(*netcluster.Cluster) error) error {
	c, err := netcluster.Open(dir)
	if err != nil {
		return err
	}
	defer c.Close()
	return f(c)
}

// execOn replaces this process by the command that runs argv on host, so
// that its exit status and signals are the command's.
func execOn(dir, host string, argv []string) error {
	c, err := netcluster.Open(dir)
	if err != nil {
		return err
	}
	cmd := c.Command(host, argv[0], argv[1:]...)
	if cmd.Err != nil {
		return cmd.Err
	}
	path, err := exec.LookPath(cmd.Path)
	if err != nil {
		return err
	}
	return unix.Exec(path, cmd.Args, slurmEnv(dir, os.Environ()))
}

// hostOpts are what "up" puts on the hosts besides their namespaces.
type hostOpts struct {
	privateTmp bool // every host has its own /tmp
	slurm      bool // a Slurm cluster runs on the hosts
	ssh        bool // every host runs sshd
	mtu        int  // the links' MTU (0: the default)
	cpuPerHost bool // each host runs on a CPU of its own
}

// up starts the supervisor ("netcluster serve") in a session of its own,
// waits until it reports the cluster up, and prints the hosts.
func up(dir string, n int, ho hostOpts, stdout io.Writer) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if c, err := netcluster.Open(dir); err == nil {
		c.Close()
		return fmt.Errorf("a cluster is already up in %s (netcluster down -dir %s)", dir, dir)
	}
	// A state file left by a creator that died: its hosts died with it.
	if err := netcluster.Stop(dir, stopTimeout); err != nil && !strings.Contains(err.Error(), "no cluster in") {
		return err
	}
	logPath := filepath.Join(dir, "netcluster.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logf.Close()
	args := []string{"serve", "--dir", dir, "--hosts", strconv.Itoa(n)}
	if ho.privateTmp {
		args = append(args, "--private-tmp")
	}
	if ho.slurm {
		args = append(args, "--slurm")
	}
	if ho.mtu > 0 {
		args = append(args, "--mtu", strconv.Itoa(ho.mtu))
	}
	if ho.ssh {
		args = append(args, "--ssh")
	}
	if ho.cpuPerHost {
		args = append(args, "--cpu-per-host")
	}
	cmd := exec.Command("/proc/self/exe", args...)
	cmd.Stderr = logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	if line != "ready\n" {
		cmd.Wait()
		log, _ := os.ReadFile(logPath)
		return fmt.Errorf("the cluster did not come up: %s", strings.TrimSpace(string(log)))
	}
	cmd.Process.Release()
	c, err := netcluster.Open(dir)
	if err != nil {
		return err
	}
	defer c.Close()
	for _, h := range c.Hosts {
		fmt.Fprintf(stdout, "%s\t%s\n", h.Name, h.Addr)
	}
	fmt.Fprintf(stdout, "hosts file %s; run a command with: netcluster exec -dir %s h1 -- CMD\n", c.HostsFile(), dir)
	if ho.slurm {
		fmt.Fprintf(stdout, "Slurm: SLURM_CONF=%s; e.g. netcluster exec -dir %s h1 -- srun --mpi=pmi2 -N %d -n %d PROG\n",
			filepath.Join(dir, slurmDir, "slurm.conf"), dir, n, 2*n)
	}
	if c.HasSSH() {
		fmt.Fprintf(stdout, "every host runs sshd; from a host, ssh to another with %s (ssh -F %s), e.g.: netcluster exec -dir %s h1 -- %s h2 hostname\n",
			c.SSHCommand(), c.SSHConfig(), dir, c.SSHCommand())
	}
	return nil
}

// serve is the supervisor: it starts the cluster, reports "ready" on
// stdout, and tears the cluster down on SIGTERM, SIGINT or SIGHUP.
func serve(dir string, n int, ho hostOpts) error {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, unix.SIGTERM, unix.SIGINT, unix.SIGHUP)
	c, err := netcluster.Start(netcluster.Options{Hosts: n, Dir: dir, PrivateTmp: ho.privateTmp, SSH: ho.ssh, MTU: ho.mtu, CPUPerHost: ho.cpuPerHost})
	if err != nil {
		return err
	}
	if ho.slurm {
		// A fresh Slurm directory: no state of an earlier cluster.
		sdir := filepath.Join(dir, slurmDir)
		if err := os.RemoveAll(sdir); err != nil {
			c.Close()
			return err
		}
		if err := os.MkdirAll(sdir, 0o755); err != nil {
			c.Close()
			return err
		}
		if _, err := slurmcluster.StartOn(c, sdir, 0); err != nil {
			c.Close()
			return err
		}
	}
	fmt.Println("ready")
	os.Stdout.Close()
	s := <-sigs
	fmt.Fprintf(os.Stderr, "netcluster: %v: tearing the cluster down\n", s)
	return errors.Join(c.Close())
}
