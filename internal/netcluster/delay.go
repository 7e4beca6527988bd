package netcluster

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A delay line holds back every packet a host receives for a fixed time,
// on kernels without netem (which would do it in a queueing discipline).
// An iptables NFQUEUE rule in the host's network namespace (mangle table,
// PREROUTING, on eth0) hands each arriving packet to a netfilter queue,
// where it waits in the kernel; a delay-line process bound to that queue
// reads each packet's identifier and, the delay after its arrival, lets it
// and everything before it go on (one batch verdict). Packets keep their
// order, none is copied to user space, and the delay adds to whatever the
// switch's shaping (loss, rate) does.
//
// The delay line is a re-execution of the binary (role roleDelay, as the
// holders are) in the caller's namespaces apart from the network one,
// which it joins. It outlives the process that started it (a netcluster
// command that returns), and ends when the shaping is removed or changed
// (SIGTERM: it lets every waiting packet go first) or when its host's
// holder exits. Its identity is recorded in the cluster's directory
// (delay-HOST.json), so that another process can stop it.

// roleDelay is the delay line's role.
const roleDelay = "delay"

// Environment of a delay line: the delay, and the holder of its host
// ("pid:start") whose network it joins and with which it ends.
const (
	envDelay  = "ADIMPI_NETCLUSTER_DELAY"
	envHolder = "ADIMPI_NETCLUSTER_HOLDER"
)

// delayQueue is the netfilter queue of a host's delay line (queues are
// per network namespace).
const delayQueue = 0

// delayRule is the iptables command line that adds (op -A) or deletes
// (op -D) the rule that sends what a host receives to its delay line.
func delayRule(ipt, op string) []string {
	return []string{ipt, "-w", "-t", "mangle", op, "PREROUTING", "-i", hostIface, "-j", "NFQUEUE", "--queue-num", strconv.Itoa(delayQueue)}
}

// splitDelay takes "delay D" out of netem arguments.
func splitDelay(args []string) (time.Duration, []string, error) {
	var d time.Duration
	var rest []string
	for i := 0; i < len(args); i++ {
		if args[i] != "delay" {
			rest = append(rest, args[i])
			continue
		}
		if i+1 >= len(args) {
			return 0, nil, errors.New("delay without a time")
		}
		v, err := time.ParseDuration(args[i+1])
		if err != nil || v <= 0 {
			return 0, nil, fmt.Errorf("delay %q is not a positive time (like 1ms)", args[i+1])
		}
		if i+2 < len(args) {
			if _, err := time.ParseDuration(args[i+2]); err == nil {
				return 0, nil, fmt.Errorf("delay %s %s: only a fixed delay can be had (no jitter)", args[i+1], args[i+2])
			}
		}
		d = v
		i++
	}
	return d, rest, nil
}

// iptables finds the iptables command.
func iptables() (string, error) {
	for _, name := range []string{"iptables-legacy", "iptables"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", errors.New("a delay needs iptables (its NFQUEUE rule feeds the delay line), which was not found (install iptables)")
}

// delayFile is where the cluster records host's delay line.
func (c *Cluster) delayFile(host string) string {
	return filepath.Join(c.Dir, "delay-"+host+".json")
}

// startDelay starts host's delay line and sends what the host receives
// through it.
func (c *Cluster) startDelay(h Host, d time.Duration) error {
	ipt, err := iptables()
	if err != nil {
		return err
	}
	repR, repW, err := os.Pipe()
	if err != nil {
		return err
	}
	defer repR.Close()
	null, err := os.Open(os.DevNull)
	if err != nil {
		repW.Close()
		return err
	}
	defer null.Close()
	cmd := &exec.Cmd{
		Path:   "/proc/self/exe",
		Args:   []string{"netcluster-delay", h.Name},
		Env:    []string{envRole + "=" + roleDelay, envName + "=" + h.Name, envDelay + "=" + d.String(), envHolder + "=" + fmt.Sprintf("%d:%d", h.PID, h.Start)},
		Dir:    "/",
		Stdin:  null,
		Stdout: repW,
		Stderr: repW,
		// Its own session: a terminal's ^C to the command that started it
		// does not reach it.
		SysProcAttr: &syscall.SysProcAttr{Setsid: true},
	}
	err = cmd.Start()
	repW.Close()
	if err != nil {
		return fmt.Errorf("starting the delay line of %s: %v", h.Name, err)
	}
	if line, _ := bufio.NewReader(repR).ReadString('\n'); strings.TrimSpace(line) != readyLine {
		cmd.Process.Kill()
		cmd.Wait()
		return fmt.Errorf("the delay line of %s failed: %s", h.Name, strings.TrimSpace(line))
	}
	start, err := procStart(cmd.Process.Pid)
	if err == nil {
		var b []byte
		b, err = json.Marshal(process{cmd.Process.Pid, start})
		if err == nil {
			err = os.WriteFile(c.delayFile(h.Name), b, 0o644)
		}
	}
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		return err
	}
	if c.delays == nil {
		c.delays = map[string]*exec.Cmd{}
	}
	c.delays[h.Name] = cmd
	if err := inNet(h.PID, delayRule(ipt, "-A")...); err != nil {
		c.stopDelay(h)
		return err
	}
	return nil
}

// inNet runs a command in the network namespace of process pid.
func inNet(pid int, argv ...string) error {
	return run(exec.Command("nsenter", append([]string{"--target", strconv.Itoa(pid), "--net", "--"}, argv...)...))
}

// stopDelay removes host's delay line, if it has one: first the rule, then
// the process, which lets what waits go on.
func (c *Cluster) stopDelay(h Host) error {
	b, err := os.ReadFile(c.delayFile(h.Name))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var p process
	if err := json.Unmarshal(b, &p); err != nil {
		return fmt.Errorf("%s: %v", c.delayFile(h.Name), err)
	}
	var errs []error
	if ipt, err := iptables(); err == nil {
		if err := inNet(h.PID, delayRule(ipt, "-D")...); err != nil && !strings.Contains(err.Error(), "does a matching rule exist") {
			errs = append(errs, err)
		}
	}
	if fd, ok := pidfd(p); ok {
		unix.PidfdSendSignal(fd, unix.SIGTERM, nil, 0)
		if !waitExit([]int{fd}, 5*time.Second) {
			unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
		}
		unix.Close(fd)
	}
	if cmd := c.delays[h.Name]; cmd != nil {
		cmd.Wait()
		delete(c.delays, h.Name)
	}
	if err := os.Remove(c.delayFile(h.Name)); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// delayLine is the delay line's process: it joins its host's network,
// binds the queue, reports ready, and releases each packet the delay
// after its arrival until told to stop or its host ends.
func delayLine() int {
	unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(&[]byte("nc-delay-" + os.Getenv(envName) + "\x00")[0])), 0, 0, 0)
	fail := func(err error) int {
		fmt.Fprintf(os.Stdout, "error: %v\n", err)
		return 1
	}
	d, err := time.ParseDuration(os.Getenv(envDelay))
	if err != nil {
		return fail(err)
	}
	var holder process
	if _, err := fmt.Sscanf(os.Getenv(envHolder), "%d:%d", &holder.PID, &holder.Start); err != nil {
		return fail(fmt.Errorf("%s=%q: %v", envHolder, os.Getenv(envHolder), err))
	}
	hfd, ok := pidfd(holder)
	if !ok {
		return fail(fmt.Errorf("the host's holder (PID %d) is gone", holder.PID))
	}
	// The queue belongs to the network namespace of the thread that opens
	// it; the thread stays locked (and so is never reused) after the switch.
	runtime.LockOSThread()
	ns, err := unix.Open(fmt.Sprintf("/proc/%d/ns/net", holder.PID), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fail(err)
	}
	if err := unix.Setns(ns, unix.CLONE_NEWNET); err != nil {
		return fail(fmt.Errorf("joining the network of %s: %v", os.Getenv(envName), err))
	}
	unix.Close(ns)
	q, err := openNfqueue(delayQueue)
	if err != nil {
		return fail(err)
	}
	fmt.Fprintln(os.Stdout, readyLine)
	if null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0); err == nil {
		unix.Dup2(int(null.Fd()), 1)
		unix.Dup2(int(null.Fd()), 2)
		null.Close()
	}

	// One thread does it all, at a higher priority than the programs whose
	// packets it holds (it runs on the main thread, locked above), so that
	// a packet leaves close to its time even on a busy machine.
	_ = unix.Setpriority(unix.PRIO_PROCESS, 0, -10)
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, unix.SIGTERM, unix.SIGINT, unix.SIGHUP)
	hostGone := make(chan struct{})
	go func() {
		waitExit([]int{hfd}, 100*365*24*time.Hour)
		close(hostGone)
	}()
	type arrival struct {
		id  uint32
		due time.Time
	}
	var waiting []arrival // in order of arrival, so of due time
	var ids []uint32
	var last uint32 // the newest identifier read
	for {
		// Wake for the oldest packet's time, and at least every 100 ms
		// to look at the signals.
		wait := 100 * time.Millisecond
		if len(waiting) > 0 {
			wait = max(min(wait, time.Until(waiting[0].due)), 0)
		}
		var err error
		if ids, err = q.read(ids[:0], wait); err != nil {
			return 1
		}
		now := time.Now()
		for _, id := range ids {
			waiting = append(waiting, arrival{id, now.Add(d)})
			last = id
		}
		k := 0
		for k < len(waiting) && !waiting[k].due.After(now) {
			k++
		}
		if k > 0 {
			if err := q.acceptUpTo(waiting[k-1].id); err != nil {
				return 1
			}
			waiting = append(waiting[:0], waiting[k:]...)
		}
		select {
		case <-stop:
			if len(waiting) > 0 {
				q.acceptUpTo(last)
			}
			return 0
		case <-hostGone:
			return 0
		default:
		}
	}
}
