// Package netcluster makes a simulated cluster on one Linux machine: N hosts,
// each a set of namespaces (network, PID, mount, UTS, IPC) held by one
// long-lived holder process that is PID 1 of its host, joined by a Linux
// bridge that lives in a namespace of its own (the switch). Hosts have
// addresses 198.18.0.1, 198.18.0.2, ... (the benchmark range, never a
// private or public range), hostnames h1, h2, ..., a private /dev/shm, a
// /proc of their own, and an /etc/hosts (a bind mount of the cluster's hosts
// file) that names every host. The rest of the file system is shared, as a
// cluster's network file system would be, so that a program built on the
// machine runs on every host.
//
// Nothing is created in the root network namespace and no named namespace
// ("ip netns") is used: the holders keep the namespaces alive, and when a
// holder dies its host's processes, interfaces and mounts vanish with it.
// The holders die with the process that started them (a parent-death signal
// and the end of a pipe from it), so a test that fails, panics or is killed
// leaves nothing behind.
//
// A binary that starts clusters must link this package: the holders are
// re-executions of that binary (see the package's init function). Root is
// needed.
package netcluster

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// MaxHosts is the largest cluster: hosts are numbered within one /24.
const MaxHosts = 253

// firstAddr is h1's address; host i has firstAddr + i - 1. The range is the
// benchmark range 198.18.0.0/15, which routes nowhere.
var firstAddr = netip.AddrFrom4([4]byte{198, 18, 0, 1})

// prefixLen is the length of the hosts' common network prefix.
const prefixLen = 24

// Files the cluster writes into its directory.
const (
	hostsFileName = "hosts"
	stateFileName = "cluster.json"
)

// Options describe a cluster to Start.
type Options struct {
	// Hosts is the number of hosts, 1 to MaxHosts.
	Hosts int
	// Dir holds the hosts file and the state file that Open reads. Empty
	// means a new temporary directory, removed by Close.
	Dir string
	// PrivateTmp gives every host a fresh tmpfs on /tmp as well. Off by
	// default because programs (go test binaries among them) are often
	// built under /tmp and must be reachable from every host.
	PrivateTmp bool
	// SSH runs an sshd on every host, with key-based login from any host
	// to any host through SSHConfig (see ssh.go). Needs openssh-server.
	SSH bool
	// MTU is the MTU of every link (both ends of each veth pair, and so
	// the bridge); 0 keeps the kernel's default of 1500. Jumbo frames
	// (9000) are what the XDP wire's benchmarks use.
	MTU int
	// CPUPerHost runs every process of each host on a CPU of its own
	// (cpus.go), host i on the (i-1 mod N)-th CPU of the N this process
	// may use; off, every host may use every CPU. Needs taskset.
	CPUPerHost bool
}

// Host is one simulated host.
type Host struct {
	// Name is the hostname, also the host's name in the hosts file: h1, h2, ...
	Name string `json:"name"`
	// Addr is the host's address on the cluster network.
	Addr netip.Addr `json:"addr"`
	// PID is the holder's process ID in the caller's PID namespace; inside
	// the host the holder is PID 1.
	PID int `json:"pid"`
	// Start is the holder's start time (clock ticks after boot), which
	// tells it from a later process that reuses PID.
	Start uint64 `json:"start"`
	// CPUs are the CPUs the host's processes run on; none means any
	// (Options.CPUPerHost).
	CPUs []int `json:"cpus,omitempty"`
}

// process names a process across PID reuse.
type process struct {
	PID   int    `json:"pid"`
	Start uint64 `json:"start"`
}

// state is what the cluster's directory records for Open and Stop.
type state struct {
	Creator process `json:"creator"`
	Switch  process `json:"switch"`
	Hosts   []Host  `json:"hosts"`
}

// Cluster is a running simulated cluster. One that Start returned lives
// until Close, or until its creator exits or drops the last reference to it
// (the garbage collector then closes the holders' pipes and they exit).
type Cluster struct {
	// Dir is the cluster's directory (hosts file, state file).
	Dir string
	// Hosts are the hosts, h1 first.
	Hosts []Host

	sw      process
	owned   bool                 // Start made it: Close tears it down
	tempDir bool                 // Dir was made by Start: Close removes it
	holders []*exec.Cmd          // switch first, then the hosts (owned only)
	lifes   []*os.File           // write ends of the holders' life pipes (owned only)
	delays  map[string]*exec.Cmd // delay lines this process started, by host (delay.go)
	sshds   []*exec.Cmd          // the hosts' sshds (Options.SSH, owned only)
	closed  bool
}

// HostsFile is the path of the cluster's hosts file, the one each host sees
// as /etc/hosts.
func (c *Cluster) HostsFile() string { return filepath.Join(c.Dir, hostsFileName) }

// Host returns the host called name.
func (c *Cluster) Host(name string) (Host, error) {
	for _, h := range c.Hosts {
		if h.Name == name {
			return h, nil
		}
	}
	names := make([]string, len(c.Hosts))
	for i, h := range c.Hosts {
		names[i] = h.Name
	}
	return Host{}, fmt.Errorf("netcluster: no host %q (hosts: %s)", name, strings.Join(names, " "))
}

// HostName is the name of host i (1-based).
func HostName(i int) string { return "h" + strconv.Itoa(i) }

// Start creates a cluster as opts describe and returns when every host is up
// and configured. On error nothing is left behind. The holders' parent-death
// signal fires when the thread that started them exits, so do not call
// Start from a goroutine locked to a thread that will end (LockOSThread
// without Unlock).
func Start(opts Options) (c *Cluster, err error) {
	if opts.Hosts < 1 || opts.Hosts > MaxHosts {
		return nil, fmt.Errorf("netcluster: %d hosts: need 1 to %d", opts.Hosts, MaxHosts)
	}
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("netcluster: creating namespaces needs root (running as uid %d)", os.Geteuid())
	}
	tools := []string{"ip", "nsenter", "setpriv"}
	if opts.CPUPerHost {
		tools = append(tools, "taskset")
	}
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("netcluster: %s not found (install iproute2 and util-linux): %v", tool, err)
		}
	}
	c = &Cluster{Dir: opts.Dir, owned: true}
	if c.Dir == "" {
		if c.Dir, err = os.MkdirTemp("", "netcluster-"); err != nil {
			return nil, fmt.Errorf("netcluster: %v", err)
		}
		c.tempDir = true
	} else if err = os.MkdirAll(c.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("netcluster: %v", err)
	}
	if c.Dir, err = filepath.Abs(c.Dir); err != nil {
		return nil, fmt.Errorf("netcluster: %v", err)
	}
	if _, err := os.Stat(filepath.Join(c.Dir, stateFileName)); err == nil {
		return nil, fmt.Errorf("netcluster: %s already holds a cluster (%s exists; stop it first)", c.Dir, stateFileName)
	}
	defer func() {
		if err != nil {
			c.Close()
			c = nil
		}
	}()
	for i := 1; i <= opts.Hosts; i++ {
		c.Hosts = append(c.Hosts, Host{Name: HostName(i), Addr: hostAddr(i)})
	}
	if opts.CPUPerHost {
		if err := assignCPUs(c.Hosts); err != nil {
			return nil, err
		}
	}
	if err := os.WriteFile(c.HostsFile(), c.hostsFile(), 0o644); err != nil {
		return nil, fmt.Errorf("netcluster: %v", err)
	}
	if c.sw, err = c.startHolder(roleSwitch, "switch", false); err != nil {
		return nil, err
	}
	for i := range c.Hosts {
		p, err := c.startHolder(roleHost, c.Hosts[i].Name, opts.PrivateTmp)
		if err != nil {
			return nil, err
		}
		c.Hosts[i].PID, c.Hosts[i].Start = p.PID, p.Start
		if len(c.Hosts[i].CPUs) > 0 {
			if err := pin(p.PID, c.Hosts[i].CPUs); err != nil {
				return nil, err
			}
		}
	}
	if err := c.wire(opts.MTU); err != nil {
		return nil, err
	}
	if opts.SSH {
		if err := c.startSSH(opts.PrivateTmp); err != nil {
			return nil, err
		}
	}
	if err := c.writeState(); err != nil {
		return nil, err
	}
	return c, nil
}

// hostAddr is the address of host i (1-based).
func hostAddr(i int) netip.Addr {
	a := firstAddr.As4()
	a[3] += byte(i - 1)
	return netip.AddrFrom4(a)
}

// hostsFile is the content of the hosts file: loopback, then every host.
func (c *Cluster) hostsFile() []byte {
	var b strings.Builder
	b.WriteString("# Written by netcluster: the hosts of the simulated cluster in " + c.Dir + "\n")
	b.WriteString("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n")
	for _, h := range c.Hosts {
		fmt.Fprintf(&b, "%s\t%s\n", h.Addr, h.Name)
	}
	return []byte(b.String())
}

// startHolder starts a holder in new namespaces and waits until it reports
// that its host is set up. The holder keeps the read end of a pipe whose
// write end only this process has: when this process dies, for whatever
// reason, the holder reads end-of-file and exits (the parent-death signal
// is a second line of defence).
func (c *Cluster) startHolder(role, name string, privateTmp bool) (process, error) {
	lifeR, lifeW, err := os.Pipe()
	if err != nil {
		return process{}, fmt.Errorf("netcluster: %v", err)
	}
	defer lifeR.Close()
	repR, repW, err := os.Pipe()
	if err != nil {
		lifeW.Close()
		return process{}, fmt.Errorf("netcluster: %v", err)
	}
	defer repR.Close()
	flags := uintptr(unix.CLONE_NEWNET | unix.CLONE_NEWPID)
	if role == roleHost {
		flags |= unix.CLONE_NEWNS | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC
	}
	cmd := &exec.Cmd{
		Path:   "/proc/self/exe",
		Args:   []string{"netcluster-" + role, name},
		Env:    holderEnv(role, name, c.HostsFile(), privateTmp),
		Dir:    "/",
		Stdin:  lifeR,
		Stdout: repW,
		Stderr: repW,
		SysProcAttr: &syscall.SysProcAttr{
			Cloneflags: flags,
			Pdeathsig:  syscall.SIGKILL,
		},
	}
	err = cmd.Start()
	repW.Close()
	if err != nil {
		lifeW.Close()
		return process{}, fmt.Errorf("netcluster: starting the holder of %s: %v", name, err)
	}
	c.holders = append(c.holders, cmd)
	c.lifes = append(c.lifes, lifeW)
	line, rerr := bufio.NewReader(repR).ReadString('\n')
	if strings.TrimSpace(line) != readyLine {
		if rerr == nil {
			rest := make([]byte, 4096)
			n, _ := repR.Read(rest)
			line += string(rest[:n])
		}
		return process{}, fmt.Errorf("netcluster: setting up %s failed: %s", name, strings.TrimSpace(line))
	}
	start, err := procStart(cmd.Process.Pid)
	if err != nil {
		return process{}, fmt.Errorf("netcluster: holder of %s: %v", name, err)
	}
	return process{PID: cmd.Process.Pid, Start: start}, nil
}

// writeState records the cluster in its directory for Open and Stop.
func (c *Cluster) writeState() error {
	me, err := procStart(os.Getpid())
	if err != nil {
		return fmt.Errorf("netcluster: %v", err)
	}
	s := state{Creator: process{os.Getpid(), me}, Switch: c.sw, Hosts: c.Hosts}
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("netcluster: %v", err)
	}
	tmp := filepath.Join(c.Dir, stateFileName+".tmp")
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("netcluster: %v", err)
	}
	return os.Rename(tmp, filepath.Join(c.Dir, stateFileName))
}

// Close tears the cluster down: every holder is killed and waited for, which
// ends every process of every host and removes every interface and mount;
// then the cluster's files go. Closing a cluster that Open returned only
// forgets it (Stop tears such a cluster down). Close may be called again.
func (c *Cluster) Close() error {
	if c == nil || c.closed {
		return nil
	}
	c.closed = true
	if !c.owned {
		return nil
	}
	var errs []error
	for _, cmd := range c.holders {
		if err := cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
			errs = append(errs, fmt.Errorf("netcluster: killing holder %d: %v", cmd.Process.Pid, err))
		}
	}
	for _, cmd := range c.holders {
		cmd.Wait() // killed: the status says so and is of no interest
	}
	for _, cmd := range c.delays { // they end with their hosts
		cmd.Process.Kill()
		cmd.Wait()
	}
	if old, _ := filepath.Glob(filepath.Join(c.Dir, "delay-*.json")); len(old) > 0 {
		for _, f := range old {
			os.Remove(f)
		}
	}
	for _, f := range c.lifes {
		f.Close()
	}
	if err := c.stopSSH(); err != nil {
		errs = append(errs, err)
	}
	if c.tempDir {
		if err := os.RemoveAll(c.Dir); err != nil {
			errs = append(errs, fmt.Errorf("netcluster: %v", err))
		}
	} else {
		for _, f := range []string{stateFileName, hostsFileName} {
			if err := os.Remove(filepath.Join(c.Dir, f)); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, fmt.Errorf("netcluster: %v", err))
			}
		}
	}
	return errors.Join(errs...)
}

// Open attaches to the cluster that a Start, in this or another process,
// recorded in dir. Its methods other than Close work as on the original;
// its Close only forgets it.
func Open(dir string) (*Cluster, error) {
	s, err := readState(dir)
	if err != nil {
		return nil, err
	}
	for _, h := range s.Hosts {
		if !alive(process{h.PID, h.Start}) {
			return nil, fmt.Errorf("netcluster: the cluster in %s is gone (holder of %s, PID %d, has exited)", dir, h.Name, h.PID)
		}
	}
	if !alive(s.Switch) {
		return nil, fmt.Errorf("netcluster: the cluster in %s is gone (its switch, PID %d, has exited)", dir, s.Switch.PID)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("netcluster: %v", err)
	}
	return &Cluster{Dir: abs, Hosts: s.Hosts, sw: s.Switch}, nil
}

// readState reads the state file of the cluster in dir.
func readState(dir string) (state, error) {
	var s state
	b, err := os.ReadFile(filepath.Join(dir, stateFileName))
	if errors.Is(err, os.ErrNotExist) {
		return s, fmt.Errorf("netcluster: no cluster in %s (no %s)", dir, stateFileName)
	}
	if err != nil {
		return s, fmt.Errorf("netcluster: %v", err)
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("netcluster: %s: %v", filepath.Join(dir, stateFileName), err)
	}
	return s, nil
}

// Stop tears down the cluster recorded in dir by another process: it asks
// the creator to stop (SIGTERM; its holders die with it), waits up to
// timeout for every holder to exit, and kills those that have not. The state
// and hosts files are removed.
func Stop(dir string, timeout time.Duration) error {
	s, err := readState(dir)
	if err != nil {
		return err
	}
	procs := []process{s.Creator, s.Switch}
	for _, h := range s.Hosts {
		procs = append(procs, process{h.PID, h.Start})
	}
	var fds []int
	for _, p := range procs {
		if fd, ok := pidfd(p); ok {
			fds = append(fds, fd)
			defer unix.Close(fd)
		}
	}
	if fd, ok := pidfd(s.Creator); ok {
		unix.PidfdSendSignal(fd, unix.SIGTERM, nil, 0)
		unix.Close(fd)
	}
	if !waitExit(fds, timeout) {
		for _, fd := range fds {
			unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
		}
		if !waitExit(fds, timeout) {
			return fmt.Errorf("netcluster: the cluster in %s did not exit within %v of SIGKILL", dir, timeout)
		}
	}
	for _, f := range []string{stateFileName, hostsFileName} {
		if err := os.Remove(filepath.Join(dir, f)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("netcluster: %v", err)
		}
	}
	return nil
}

// pidfd opens a pidfd on p if p is still the process it was.
func pidfd(p process) (int, bool) {
	fd, err := unix.PidfdOpen(p.PID, 0)
	if err != nil {
		return -1, false
	}
	if !alive(p) { // PID reused between the record and the open
		unix.Close(fd)
		return -1, false
	}
	return fd, true
}

// waitExit waits until every pidfd reports its process exited, or timeout.
func waitExit(fds []int, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for _, fd := range fds {
		for {
			ms := int(time.Until(deadline).Milliseconds())
			if ms <= 0 {
				return false
			}
			n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, ms)
			if err == unix.EINTR {
				continue
			}
			if err != nil || n == 0 {
				return false
			}
			break
		}
	}
	return true
}

// alive reports whether p is running (or a zombie not yet reaped) and is
// the process that was recorded, not a later one with its PID.
func alive(p process) bool {
	start, err := procStart(p.PID)
	return err == nil && start == p.Start
}

// procStart reads the start time of process pid from /proc/pid/stat.
func procStart(pid int) (uint64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces; the rest follows its ')'.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no ')'", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	const startField = 22 - 3 // field 22, counted after pid and comm
	if len(f) <= startField {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f)+2)
	}
	return strconv.ParseUint(f[startField], 10, 64)
}
