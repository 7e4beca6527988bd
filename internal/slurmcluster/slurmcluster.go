// Package slurmcluster runs a real Slurm cluster, from Debian's slurm-wlm
// packages, on the simulated hosts of internal/netcluster: slurmctld on h1,
// a slurmd on every host (NodeName=hN NodeAddr=198.18.0.N), and, for
// authentication, a munged on every host sharing one key, as on a real
// cluster (auth/munge and cred/munge). Each host's munged listens on a
// socket in a directory of that host's own, bind-mounted inside the host's
// mount namespace over the path slurm.conf names, so that the Slurm
// daemons and commands of each host talk to their own host's munged.
//
// The daemons live in the hosts' namespaces and die with them: closing the
// cluster (or the death of the process that started it) tears the hosts
// down and ends every Slurm and munge process. Everything the cluster
// writes (slurm.conf, the munge key, state, spool directories, logs) is
// under its directory; nothing is written to /etc or /var.
//
// Slurm's commands find the cluster through SLURM_CONF: run them on a host
// with Command (which sets it), e.g. srun on h1, the login node.
package slurmcluster

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/adimpi/adimpi/internal/netcluster"
)

// Tools are the programs the cluster needs (Debian packages slurm-wlm,
// which brings munge, slurmctld, slurmd and slurm-client).
var Tools = []string{"slurmctld", "slurmd", "srun", "sbatch", "sinfo", "munged"}

// DefaultCPUs is the number of CPUs each host declares to Slurm unless
// Options say otherwise: enough for 4 tasks per host whatever the machine
// has (slurmd is told to believe the configuration, not the hardware).
const DefaultCPUs = 4

// readyTimeout bounds how long Start waits for every node to be idle.
const readyTimeout = 60 * time.Second

// Options describe a cluster to Start.
type Options struct {
	// Hosts is the number of hosts, h1 to hN.
	Hosts int
	// Dir holds the cluster's files; empty means a new temporary
	// directory, removed by Close. Keep it short: Slurm's Unix sockets
	// live below it and their paths may not exceed 107 bytes.
	Dir string
	// CPUs is the number of CPUs of each host; 0 means DefaultCPUs.
	CPUs int
}

// Cluster is a running Slurm cluster on simulated hosts.
type Cluster struct {
	// Net is the simulated cluster the daemons run on.
	Net *netcluster.Cluster
	// Dir is the cluster's directory.
	Dir string
	// Conf is the path of slurm.conf, the SLURM_CONF of every command.
	Conf string
	// Hosts are the node names, h1 first; h1 also runs slurmctld.
	Hosts []string
	// CPUs is the number of CPUs of each node.
	CPUs int

	ownNet  bool // Start made Net: Close tears it down
	tempDir bool
	closed  bool
}

// Missing returns why a cluster cannot be started on this machine (not
// root, or a tool of Tools missing), or "" if it can.
func Missing() string {
	if os.Geteuid() != 0 {
		return fmt.Sprintf("slurmcluster: simulated hosts need root to create namespaces (running as uid %d)", os.Geteuid())
	}
	var missing []string
	for _, t := range Tools {
		if _, err := exec.LookPath(t); err != nil {
			missing = append(missing, t)
		}
	}
	if len(missing) > 0 {
		return fmt.Sprintf("slurmcluster: %s not found: install Debian's slurm-wlm (apt-get install slurm-wlm)", strings.Join(missing, ", "))
	}
	return ""
}

// Start starts simulated hosts and a Slurm cluster on them, and returns
// when every node is idle. On error nothing is left behind.
func Start(opts Options) (c *Cluster, err error) {
	if why := Missing(); why != "" {
		return nil, errors.New(why)
	}
	dir, tempDir := opts.Dir, false
	if dir == "" {
		if dir, err = os.MkdirTemp("", "slurm-"); err != nil {
			return nil, fmt.Errorf("slurmcluster: %v", err)
		}
		tempDir = true
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return nil, fmt.Errorf("slurmcluster: %v", err)
	}
	net, err := netcluster.Start(netcluster.Options{Hosts: opts.Hosts, Dir: filepath.Join(dir, "net")})
	if err != nil {
		if tempDir {
			os.RemoveAll(dir)
		}
		return nil, fmt.Errorf("slurmcluster: %v", err)
	}
	c, err = StartOn(net, dir, opts.CPUs)
	if err != nil {
		net.Close()
		if tempDir {
			os.RemoveAll(dir)
		}
		return nil, err
	}
	c.ownNet, c.tempDir = true, tempDir
	return c, nil
}

// StartOn starts a Slurm cluster on the hosts of net, every one a node, its
// files in dir, each node with cpus CPUs (0: DefaultCPUs), and returns
// when every node is idle. The daemons end when net's hosts do; Close on
// the result tears net down only if Start made it.
func StartOn(net *netcluster.Cluster, dir string, cpus int) (*Cluster, error) {
	if why := Missing(); why != "" {
		return nil, errors.New(why)
	}
	if cpus <= 0 {
		cpus = DefaultCPUs
	}
	c := &Cluster{Net: net, Dir: dir, Conf: filepath.Join(dir, "slurm.conf"), CPUs: cpus}
	for _, h := range net.Hosts {
		c.Hosts = append(c.Hosts, h.Name)
	}
	if err := c.writeFiles(); err != nil {
		return nil, fmt.Errorf("slurmcluster: %v", err)
	}
	for _, h := range c.Hosts {
		if err := c.startMunge(h); err != nil {
			return nil, err
		}
	}
	if err := c.daemon(c.Hosts[0], "slurmctld", "slurmctld"); err != nil {
		return nil, err
	}
	for _, h := range c.Hosts {
		if err := c.daemon(h, "slurmd", "slurmd", "-N", h); err != nil {
			return nil, err
		}
	}
	if err := c.waitIdle(readyTimeout); err != nil {
		return nil, err
	}
	return c, nil
}

// hostDir is the directory of host h's own files.
func (c *Cluster) hostDir(h string) string { return filepath.Join(c.Dir, h) }

// mungeDir is where every host sees its own munged's socket.
func (c *Cluster) mungeDir() string { return filepath.Join(c.Dir, "munge") }

// writeFiles writes slurm.conf and the munge key and makes the
// directories the daemons use.
func (c *Cluster) writeFiles() error {
	dirs := []string{c.mungeDir(), filepath.Join(c.Dir, "ctld")}
	for _, h := range c.Hosts {
		dirs = append(dirs, filepath.Join(c.hostDir(h), "munge"), filepath.Join(c.hostDir(h), "spool"))
	}
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	key := make([]byte, 1024)
	if _, err := rand.Read(key); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(c.Dir, "munge.key"), key, 0o400); err != nil {
		return err
	}
	// A path of Unix socket may hold 107 bytes: the longest is slurmstepd's.
	if n := len(filepath.Join(c.hostDir(c.Hosts[len(c.Hosts)-1]), "spool", "sock.pmi2.4294967294.4294967294")); n > 107 {
		return fmt.Errorf("directory %s is too long for Slurm's Unix sockets (%d bytes > 107)", c.Dir, n)
	}
	// slurmd initialises a cgroup plugin even when no plugin of the
	// configuration uses cgroups, and the autodetected one fails on a host
	// whose fresh /sys has no cgroup file system; the cgroup/v1 plugin
	// starts without one (and nothing here asks it for anything).
	cg := "# Written by internal/slurmcluster.\nCgroupPlugin=cgroup/v1\nCgroupAutomount=no\n"
	if err := os.WriteFile(filepath.Join(c.Dir, "cgroup.conf"), []byte(cg), 0o644); err != nil {
		return err
	}
	return os.WriteFile(c.Conf, []byte(c.slurmConf()), 0o644)
}

// slurmConf is the cluster's slurm.conf: a minimal configuration without
// cgroups, accounting or a database, in which root runs jobs, nodes return
// to service by themselves, and a finished job frees its nodes at once.
func (c *Cluster) slurmConf() string {
	var b strings.Builder
	fmt.Fprintf(&b, `# Written by internal/slurmcluster for the simulated cluster in %[1]s.
ClusterName=adimpi
SlurmctldHost=%[2]s(%[3]s)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=%[4]s/munge.socket
StateSaveLocation=%[1]s/ctld
SlurmctldPidFile=%[1]s/ctld/slurmctld.pid
SlurmctldLogFile=%[1]s/ctld/slurmctld.log
SlurmdSpoolDir=%[1]s/%%n/spool
SlurmdPidFile=%[1]s/%%n/slurmd.pid
SlurmdLogFile=%[1]s/%%n/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
SlurmdParameters=config_overrides
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
InactiveLimit=0
KillWait=2
MinJobAge=2
MessageTimeout=10
SlurmctldTimeout=30
SlurmdTimeout=30
`, c.Dir, c.Hosts[0], c.Net.Hosts[0].Addr, c.mungeDir())
	for _, h := range c.Net.Hosts {
		fmt.Fprintf(&b, "NodeName=%s NodeAddr=%s CPUs=%d State=UNKNOWN\n", h.Name, h.Addr, c.CPUs)
	}
	fmt.Fprintf(&b, "PartitionName=adimpi Nodes=%s Default=YES MaxTime=INFINITE State=UP\n", strings.Join(c.Hosts, ","))
	return b.String()
}

// startMunge gives host h its own munge directory at mungeDir (a bind
// mount inside the host) and starts munged there.
func (c *Cluster) startMunge(h string) error {
	own := filepath.Join(c.hostDir(h), "munge")
	if err := c.run(h, "mount", "--bind", own, c.mungeDir()); err != nil {
		return fmt.Errorf("slurmcluster: %s: %v", h, err)
	}
	m := c.mungeDir()
	// --force: munged refuses a socket whose directory's ancestors others
	// cannot search (a 0700 temporary directory), which is of no matter
	// here, where root runs every command and job.
	return c.daemon(h, "munged", "munged", "--force", "--key-file="+filepath.Join(c.Dir, "munge.key"),
		"--socket="+filepath.Join(m, "munge.socket"), "--pid-file="+filepath.Join(m, "munged.pid"),
		"--seed-file="+filepath.Join(m, "munged.seed"), "--log-file="+filepath.Join(m, "munged.log"))
}

// daemon starts a daemon on host h; it puts itself in the background, and
// its own output before that goes to h's start log.
func (c *Cluster) daemon(h, what, name string, args ...string) error {
	if err := c.run(h, name, args...); err != nil {
		return fmt.Errorf("slurmcluster: starting %s on %s: %v%s", what, h, err, c.logTail(h, what))
	}
	return nil
}

// run runs name on host h and waits for it. Its output goes to a file, not
// a pipe: a daemon that keeps the descriptors would hold a pipe open.
func (c *Cluster) run(h, name string, args ...string) error {
	logPath := filepath.Join(c.hostDir(h), "start.log")
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer log.Close()
	before, _ := log.Seek(0, 2)
	cmd := c.Command(h, name, args...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Run(); err != nil {
		out, _ := os.ReadFile(logPath)
		if int(before) <= len(out) {
			out = out[before:]
		}
		return fmt.Errorf("%s: %v: %s", name, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Command returns a command that runs name with args on host h with
// SLURM_CONF naming the cluster's slurm.conf (see netcluster's Command).
// Variables of a Slurm job this process may run in are left out, so that
// srun and sbatch start jobs of this cluster.
func (c *Cluster) Command(h, name string, args ...string) *exec.Cmd {
	cmd := c.Net.Command(h, name, args...)
	cmd.Env = c.Env(os.Environ())
	return cmd
}

// Env returns env without SLURM_* variables and with the cluster's
// SLURM_CONF.
func (c *Cluster) Env(env []string) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if !strings.HasPrefix(kv, "SLURM_") {
			out = append(out, kv)
		}
	}
	return append(out, "SLURM_CONF="+c.Conf)
}

// waitIdle polls sinfo on h1 until every node is idle. (Slurm offers no
// way to be told: a node registers when its slurmd and slurmctld have
// found each other.)
func (c *Cluster) waitIdle(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last string
	for {
		cmd := c.Command(c.Hosts[0], "sinfo", "-h", "-N", "-o", "%N %T")
		out, err := cmd.CombinedOutput()
		last = strings.TrimSpace(string(out))
		if err == nil {
			idle := 0
			for _, line := range strings.Split(last, "\n") {
				if f := strings.Fields(line); len(f) == 2 && f[1] == "idle" {
					idle++
				}
			}
			if idle == len(c.Hosts) {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("slurmcluster: the nodes are not idle after %v: sinfo says %q%s%s", timeout, last,
				c.logTail("", "slurmctld"), c.logTail(c.Hosts[len(c.Hosts)-1], "slurmd"))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// logTail is the end of a daemon's log, for error messages.
func (c *Cluster) logTail(h, what string) string {
	var path string
	switch what {
	case "slurmctld":
		path = filepath.Join(c.Dir, "ctld", "slurmctld.log")
	case "slurmd":
		path = filepath.Join(c.hostDir(h), "slurmd.log")
	case "munged":
		path = filepath.Join(c.hostDir(h), "munge", "munged.log")
	default:
		return ""
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := bytes.Split(bytes.TrimSpace(b), []byte("\n"))
	if len(lines) > 8 {
		lines = lines[len(lines)-8:]
	}
	return "\n" + path + " ends:\n" + string(bytes.Join(lines, []byte("\n")))
}

// Close tears the cluster down if Start made it: every host, with every
// daemon and job on it, then the cluster's directory if Start made that.
// A cluster from StartOn ends with its hosts. Close may be called again.
func (c *Cluster) Close() error {
	if c == nil || c.closed {
		return nil
	}
	c.closed = true
	if !c.ownNet {
		return nil
	}
	err := c.Net.Close()
	if c.tempDir {
		if rerr := os.RemoveAll(c.Dir); rerr != nil && err == nil {
			err = fmt.Errorf("slurmcluster: %v", rerr)
		}
	}
	return err
}
