package netcluster

import (
	"bytes"
	"fmt"
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
// host with the host's address. Every link is made inside the switch's
// namespace and the host end moved straight into the host, so none ever
// appears in the machine's own namespace.
func (c *Cluster) wire() error {
	var sw strings.Builder
	fmt.Fprintf(&sw, "link add name %s type bridge\nlink set %s up\n", bridgeName, bridgeName)
	for _, h := range c.Hosts {
		fmt.Fprintf(&sw, "link add name %s type veth peer name %s netns %d\n", h.Name, hostIface, h.PID)
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
// the host's namespaces, in the caller's working directory (or cmd.Dir if
// set before Start), with the environment of cmd.Env. The process started
// is nsenter; the program runs as its child inside the host and is killed
// if nsenter dies, so killing cmd.Process ends the program too. An unknown
// host makes Start fail.
func (c *Cluster) Command(host, name string, args ...string) *exec.Cmd {
	h, err := c.Host(host)
	if err != nil {
		cmd := exec.Command(name, args...)
		cmd.Err = err
		return cmd
	}
	argv := append([]string{"--target", strconv.Itoa(h.PID),
		"--mount", "--uts", "--ipc", "--net", "--pid", "--wd=.",
		"--", "setpriv", "--pdeathsig", "KILL", "--", name}, args...)
	return exec.Command("nsenter", argv...)
}

// Netem sets the netem queueing discipline of tc on the host's eth0, which
// shapes what the host sends: args are netem's parameters, e.g. "delay",
// "1ms", "loss", "1%" or "rate", "100mbit". No args removes it. The kernel
// must have netem (CONFIG_NET_SCH_NETEM).
func (c *Cluster) Netem(host string, args ...string) error {
	h, err := c.Host(host)
	if err != nil {
		return err
	}
	tc := []string{"--target", strconv.Itoa(h.PID), "--net", "--", "tc", "qdisc"}
	if len(args) == 0 {
		tc = append(tc, "del", "dev", hostIface, "root")
		err := run(exec.Command("nsenter", tc...))
		if err != nil && strings.Contains(err.Error(), "No such file") {
			return nil // no qdisc was set: nothing to remove
		}
		return err
	}
	tc = append(append(tc, "replace", "dev", hostIface, "root", "netem"), args...)
	if err := run(exec.Command("nsenter", tc...)); err != nil {
		if strings.Contains(err.Error(), "qdisc kind is unknown") {
			return fmt.Errorf("netcluster: netem on %s: this kernel has no netem queueing discipline (CONFIG_NET_SCH_NETEM): %v", host, err)
		}
		return fmt.Errorf("netcluster: netem on %s: %v", host, err)
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
