package netcluster

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
)

// Interface names: the bridge in the switch, each host's end of its link,
// and the switch's end of host hN's link, which is called hN.
const (
	bridgeName = "br0"
	hostIface  = "eth0"
)

// wire builds the network: a bridge in the switch's namespace and, for each
// host, a veth pair with one end on the bridge and the other, eth0, in the
// host with the host's address, both ends of MTU mtuOpt when it is set.
// Every link is made inside the switch's namespace and the host end moved
// straight into the host, so none ever appears in the machine's own
// namespace.
func (c *Cluster) wire(mtuOpt int) error {
	var sw strings.Builder
	fmt.Fprintf(&sw, "link add name %s type bridge\nlink set %s up\n", bridgeName, bridgeName)
	mtu := ""
	if mtuOpt > 0 {
		mtu = fmt.Sprintf(" mtu %d", mtuOpt)
	}
	for _, h := range c.Hosts {
		fmt.Fprintf(&sw, "link add name %s%s type veth peer name %s%s netns %d\n", h.Name, mtu, hostIface, mtu, h.PID)
		fmt.Fprintf(&sw, "link set %s master %s\nlink set %s up\n", h.Name, bridgeName, h.Name)
	}
	if err := ipBatch(c.sw.PID, sw.String()); err != nil {
		return fmt.Errorf("netcluster: building the switch: %v", err)
	}
	for _, h := range c.Hosts {
		cmds := fmt.Sprintf("link set lo up\naddr add %s/%d dev %s\nlink set %s up\n", h.Addr, prefixLen, hostIface, hostIface)
		if err := ipBatch(h.PID, cmds); err != nil {
			return fmt.Errorf("netcluster: configuring %s: %v", h.Name, err)
		}
	}
	return nil
}

// ipBatch runs the ip commands in the network namespace of process pid.
func ipBatch(pid int, cmds string) error {
	cmd := exec.Command("nsenter", "--target", strconv.Itoa(pid), "--net", "--", "ip", "-batch", "-")
	cmd.Stdin = strings.NewReader(cmds)
	return run(cmd)
}

// run runs cmd and turns a failure into an error that quotes its output.
func run(cmd *exec.Cmd) error {
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %v: %s", strings.Join(cmd.Args, " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}

// Command returns a command that runs name with args on host: in all of
// the host's namespaces, in the caller's working directory when Command is
// called (cmd.Dir is not used), with the environment of cmd.Env. The process started
// is nsenter; the program runs as its child inside the host and is killed
// if nsenter dies, so killing cmd.Process ends the program too. (The
// program's parent is then gone, and its exit is collected by the
// machine's init, not by the host's holder: the host's teardown waits for
// that.) On a host with CPUs of its own (Options.CPUPerHost) the program
// runs on them. An unknown host makes Start fail.
func (c *Cluster) Command(host, name string, args ...string) *exec.Cmd {
	h, err := c.Host(host)
	if err != nil {
		cmd := exec.Command(name, args...)
		cmd.Err = err
		return cmd
	}
	// The working directory is named by path, resolved inside the host's
	// mount namespace: one inherited from outside it (--wd=.) would be a
	// directory of another namespace, which getcwd cannot name.
	wd, err := os.Getwd()
	if err != nil {
		wd = "/"
	}
	argv := append([]string{"--target", strconv.Itoa(h.PID),
		"--mount", "--uts", "--ipc", "--net", "--pid", "--wd=" + wd,
		"--", "setpriv", "--pdeathsig", "KILL", "--"}, pinned(h, append([]string{name}, args...))...)
	return exec.Command("nsenter", argv...)
}

// Netem shapes what the switch sends to host, the way a slow or lossy cable
// would, with the netem queueing discipline of tc on the switch's end of
// the host's link: args are netem's parameters, e.g. "delay", "1ms",
// "loss", "1%", "rate", "100mbit". No args removes the shaping. Shaping is
// outside the host, so a loss is a loss on the wire, not a local drop the
// sender's TCP would see. A kernel without netem (CONFIG_NET_SCH_NETEM)
// still gets loss and rate (see shapeWithoutNetem) and a fixed delay (a
// delay line in the host, delay.go, which needs iptables).
func (c *Cluster) Netem(host string, args ...string) error {
	h, err := c.Host(host)
	if err != nil {
		return err
	}
	if err := c.stopDelay(h); err != nil {
		return fmt.Errorf("netcluster: netem on %s: removing the delay line: %v", host, err)
	}
	if err := c.tc("qdisc", "del", "dev", host, "root"); err != nil &&
		!strings.Contains(err.Error(), "handle of zero") && !strings.Contains(err.Error(), "No such file") {
		return fmt.Errorf("netcluster: netem on %s: %v", host, err)
	}
	if len(args) == 0 {
		return nil
	}
	err = c.tc(append([]string{"qdisc", "add", "dev", host, "root", "netem"}, args...)...)
	if err == nil {
		return nil
	}
	if !strings.Contains(err.Error(), "qdisc kind is unknown") {
		return fmt.Errorf("netcluster: netem on %s: %v", host, err)
	}
	const without = "this kernel has no netem queueing discipline (CONFIG_NET_SCH_NETEM), and without it"
	delay, rest, err := splitDelay(args)
	if err != nil {
		return fmt.Errorf("netcluster: netem on %s: %s %v", host, without, err)
	}
	if len(rest) > 0 {
		if err := c.shapeWithoutNetem(host, rest); err != nil {
			return fmt.Errorf("netcluster: netem on %s: %s %v", host, without, err)
		}
	}
	if delay > 0 {
		if err := c.startDelay(h, delay); err != nil {
			c.tc("qdisc", "del", "dev", host, "root")
			return fmt.Errorf("netcluster: netem on %s: %s %v", host, without, err)
		}
	}
	return nil
}

// tc runs tc with args in the switch's network namespace.
func (c *Cluster) tc(args ...string) error {
	return run(exec.Command("nsenter", append([]string{"--target", strconv.Itoa(c.sw.PID), "--net", "--", "tc"}, args...)...))
}

// shapeWithoutNetem gives the port the loss and rate of args with what
// kernels without netem usually have: an htb root whose class 1:1 limits
// the rate, and a class 1:2 whose queue holds nothing, into which a classic
// BPF filter sends each packet with the probability of the loss (a random
// number below the loss's share of 2^32). Delay cannot be had this way.
func (c *Cluster) shapeWithoutNetem(port string, args []string) error {
	var loss float64
	var rate string
	for i := 0; i < len(args); i++ {
		switch {
		case args[i] == "loss" && i+1 < len(args):
			i++
			if args[i] == "random" && i+1 < len(args) {
				i++
			}
			p, err := strconv.ParseFloat(strings.TrimSuffix(args[i], "%"), 64)
			if err != nil || p < 0 || p > 100 || !strings.HasSuffix(args[i], "%") {
				return fmt.Errorf("loss %q is not a percentage", args[i])
			}
			loss = p
		case args[i] == "rate" && i+1 < len(args):
			i++
			rate = args[i]
		default:
			return fmt.Errorf("only \"loss P%%\" and \"rate R\" can be had, not %q", strings.Join(args[i:], " "))
		}
	}
	cmds := [][]string{{"qdisc", "add", "dev", port, "root", "handle", "1:", "htb", "default", "1"}}
	if rate != "" {
		cmds = append(cmds, []string{"class", "add", "dev", port, "parent", "1:", "classid", "1:1", "htb", "rate", rate, "ceil", rate})
	}
	if loss > 0 {
		threshold := uint64(loss / 100 * (1 << 32))
		if threshold > 1<<32-1 {
			threshold = 1<<32 - 1
		}
		// ld rand; jge threshold -> ret 0 (no match); else ret -1 (class 1:2).
		const ldRand = 0xfffff038 // SKF_AD_OFF + SKF_AD_RANDOM
		prog := fmt.Sprintf("4,32 0 0 %d,53 1 0 %d,6 0 0 %d,6 0 0 0", uint32(ldRand), threshold, uint32(0xffffffff))
		cmds = append(cmds,
			[]string{"class", "add", "dev", port, "parent", "1:", "classid", "1:2", "htb", "rate", "100gbit"},
			[]string{"qdisc", "add", "dev", port, "parent", "1:2", "handle", "2:", "pfifo", "limit", "0"},
			[]string{"filter", "add", "dev", port, "parent", "1:", "bpf", "bytecode", prog, "classid", "1:2"})
	}
	for _, cmd := range cmds {
		if err := c.tc(cmd...); err != nil {
			c.tc("qdisc", "del", "dev", port, "root")
			return err
		}
	}
	return nil
}

// SetLink takes the host's link down or up at the switch, as pulling and
// plugging its cable would: the host's eth0 loses its carrier and nothing
// reaches it or leaves it until the link is up again.
func (c *Cluster) SetLink(host string, up bool) error {
	if _, err := c.Host(host); err != nil {
		return err
	}
	state := "down"
	if up {
		state = "up"
	}
	if err := ipBatch(c.sw.PID, fmt.Sprintf("link set %s %s\n", host, state)); err != nil {
		return fmt.Errorf("netcluster: link %s %s: %v", host, state, err)
	}
	return nil
}

// ShapedPackets reports how many packets to host its shaping has handled
// since Netem set it: those its delay line held (when it has one), else
// those the switch's queueing discipline on its link sent. Tests use it to
// check that the shaping they asked for is in the path.
func (c *Cluster) ShapedPackets(host string) (int64, error) {
	h, err := c.Host(host)
	if err != nil {
		return 0, err
	}
	if _, err := os.Stat(c.delayFile(host)); err == nil {
		ipt, err := iptables()
		if err != nil {
			return 0, err
		}
		cmd := exec.Command("nsenter", "--target", strconv.Itoa(h.PID), "--net", "--", ipt, "-w", "-t", "mangle", "-L", "PREROUTING", "-v", "-x", "-n")
		out, err := cmd.Output()
		if err != nil {
			return 0, fmt.Errorf("netcluster: reading %s's delay rule: %v", host, err)
		}
		for _, line := range strings.Split(string(out), "\n") {
			if f := strings.Fields(line); len(f) > 2 && f[2] == "NFQUEUE" {
				return strconv.ParseInt(f[0], 10, 64)
			}
		}
		return 0, fmt.Errorf("netcluster: %s has a delay line but no delay rule", host)
	}
	cmd := exec.Command("nsenter", "--target", strconv.Itoa(c.sw.PID), "--net", "--", "tc", "-s", "qdisc", "show", "dev", host)
	out, err := cmd.Output()
	if err != nil {
		return 0, fmt.Errorf("netcluster: reading the shaping of %s: %v", host, err)
	}
	// The root qdisc comes first: "qdisc KIND HANDLE root ...", then
	// " Sent B bytes P pkt ...".
	f := strings.Fields(string(out))
	for i := 0; i+4 < len(f); i++ {
		if f[i] == "Sent" && f[i+2] == "bytes" {
			return strconv.ParseInt(f[i+3], 10, 64)
		}
	}
	return 0, fmt.Errorf("netcluster: no statistics in the shaping of %s: %q", host, out)
}
