package netcluster

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/adimpi/adimpi/internal/testnote"
)

// envHelper makes the test binary one of the small programs below, which
// the tests run inside the hosts.
const envHelper = "NETCLUSTER_TEST_HELPER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(envHelper); mode != "" {
		os.Exit(helper(mode, os.Args[1:]))
	}
	os.Exit(m.Run())
}

// helper runs one of the in-host programs and returns its exit status.
func helper(mode string, args []string) int {
	var err error
	switch mode {
	case "hostname": // print the hostname
		var name string
		name, err = os.Hostname()
		fmt.Println(name)
	case "ps": // print "pid cmdline" for every process this host's /proc shows
		err = ps()
	case "serve": // serve args[0], echoing each line prefixed by the hostname
		err = serve(args[0])
	case "dial": // dial args[0] within args[1], send a line, print the answer
		err = dial(args[0], args[1])
	case "rtt": // print the least of 5 round-trip times to args[0], in ns
		err = rtt(args[0])
	case "udpsink": // count the datagrams that reach args[0]; answer "q" with the count
		err = udpSink(args[0])
	case "udpsend": // send args[1] datagrams to args[0], print how many arrived
		err = udpSend(args[0], args[1])
	case "tcpsink": // serve args[0], reading each connection to its end, then answering
		err = tcpSink(args[0])
	case "tcpsend": // send args[1] bytes to args[0], print the time until answered, in ns
		err = tcpSend(args[0], args[1])
	case "cluster": // start a cluster of args[0] hosts in args[1], print its state, wait
		err = holdCluster(args[0], args[1])
	default:
		err = fmt.Errorf("unknown helper %q", mode)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

func ps() error {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return err
	}
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue // exited meanwhile
		}
		fmt.Printf("%s %s\n", e.Name(), strings.TrimRight(strings.ReplaceAll(string(b), "\x00", " "), " "))
	}
	return nil
}

func serve(addr string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	name, _ := os.Hostname()
	fmt.Println("listening")
	for {
		conn, err := l.Accept()
		if err != nil {
			return err
		}
		go func() {
			defer conn.Close()
			r := bufio.NewReader(conn)
			for {
				line, err := r.ReadString('\n')
				if err != nil {
					return
				}
				if _, err := io.WriteString(conn, name+" "+line); err != nil {
					return
				}
			}
		}()
	}
}

func dial(addr, timeout string) error {
	d, err := time.ParseDuration(timeout)
	if err != nil {
		return err
	}
	conn, err := net.DialTimeout("tcp", addr, d)
	if err != nil {
		return err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(d))
	if _, err := io.WriteString(conn, "hello\n"); err != nil {
		return err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return err
	}
	fmt.Print(line)
	return nil
}

func rtt(addr string) error {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	r := bufio.NewReader(conn)
	best := time.Duration(1<<63 - 1)
	for range 5 {
		t0 := time.Now()
		if _, err := io.WriteString(conn, "x\n"); err != nil {
			return err
		}
		if _, err := r.ReadString('\n'); err != nil {
			return err
		}
		best = min(best, time.Since(t0))
	}
	fmt.Println(int64(best))
	return nil
}

func udpSink(addr string) error {
	conn, err := net.ListenPacket("udp", addr)
	if err != nil {
		return err
	}
	// Room for every datagram of a burst, so that only the link loses any.
	raw, err := conn.(*net.UDPConn).SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	raw.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 16<<20)
	})
	if serr != nil {
		return serr
	}
	fmt.Println("listening")
	count := 0
	buf := make([]byte, 64)
	for {
		n, from, err := conn.ReadFrom(buf)
		if err != nil {
			return err
		}
		if string(buf[:n]) == "q" {
			conn.WriteTo([]byte(strconv.Itoa(count)), from)
		} else {
			count++
		}
	}
}

func udpSend(addr, n string) error {
	count, err := strconv.Atoi(n)
	if err != nil {
		return err
	}
	conn, err := net.Dial("udp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	for range count {
		if _, err := conn.Write([]byte("d")); err != nil {
			return err
		}
	}
	// The question and its answer may be lost too: ask until answered.
	buf := make([]byte, 64)
	for range 50 {
		conn.Write([]byte("q"))
		conn.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		if n, err := conn.Read(buf); err == nil {
			fmt.Println(string(buf[:n]))
			return nil
		}
	}
	return fmt.Errorf("no answer from %s to 50 questions", addr)
}

func tcpSink(addr string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	fmt.Println("listening")
	for {
		conn, err := l.Accept()
		if err != nil {
			return err
		}
		io.Copy(io.Discard, conn)
		io.WriteString(conn, "done\n")
		conn.Close()
	}
}

func tcpSend(addr, n string) error {
	size, err := strconv.Atoi(n)
	if err != nil {
		return err
	}
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	t0 := time.Now()
	if _, err := conn.Write(make([]byte, size)); err != nil {
		return err
	}
	conn.(*net.TCPConn).CloseWrite()
	if _, err := bufio.NewReader(conn).ReadString('\n'); err != nil {
		return err
	}
	fmt.Println(int64(time.Since(t0)))
	return nil
}

func holdCluster(n, dir string) error {
	hosts, err := strconv.Atoi(n)
	if err != nil {
		return err
	}
	if heldCluster, err = Start(Options{Hosts: hosts, Dir: dir}); err != nil {
		return err
	}
	fmt.Println("started")
	select {} // until killed
}

// heldCluster keeps the cluster of holdCluster reachable: a Cluster that the
// garbage collector frees takes its hosts with it.
var heldCluster *Cluster

// helperCmd runs the test binary as helper mode on host.
func helperCmd(t *testing.T, c *Cluster, host, mode string, args ...string) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := c.Command(host, exe, args...)
	cmd.Env = append(os.Environ(), envHelper+"="+mode)
	return cmd
}

// output runs cmd and returns its standard output, failing t on error.
func output(t *testing.T, cmd *exec.Cmd) string {
	t.Helper()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, stderr.String())
	}
	return string(out)
}

// startServer starts the echo server on host at port and returns once it
// listens; it is killed when the test ends.
func startServer(t *testing.T, c *Cluster, host string, port int) {
	t.Helper()
	cmd := helperCmd(t, c, host, "serve", ":"+strconv.Itoa(port))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if line != "listening\n" {
		t.Fatalf("server on %s: %q, %v", host, line, err)
	}
}

// rootView is what the machine's own namespace shows: named network
// namespaces and links.
func rootView(t *testing.T) (netns, links []string) {
	t.Helper()
	ns, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		t.Fatalf("ip netns list: %v", err)
	}
	out, err := exec.Command("ip", "-o", "link", "show").Output()
	if err != nil {
		t.Fatalf("ip link show: %v", err)
	}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if f := strings.Fields(l); len(f) > 1 {
			links = append(links, strings.TrimSuffix(f[1], ":"))
		}
	}
	return strings.Fields(string(ns)), links
}

// checkGone fails t if any of pids still runs or if the root namespace
// shows a named namespace or a link that it did not show before.
func checkGone(t *testing.T, pids []int, netnsBefore, linksBefore []string) {
	t.Helper()
	for _, pid := range pids {
		if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err == nil {
			if b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); !strings.Contains(string(b), ") Z ") {
				t.Errorf("holder %d still runs after teardown", pid)
			}
		}
	}
	netns, links := rootView(t)
	for _, n := range netns {
		if !slices.Contains(netnsBefore, n) {
			t.Errorf("ip netns list shows %s after teardown", n)
		}
	}
	for _, l := range links {
		if !slices.Contains(linksBefore, l) {
			t.Errorf("ip link shows %s in the root namespace after teardown", l)
		}
	}
}

func holderPIDs(c *Cluster) []int {
	pids := []int{c.sw.PID}
	for _, h := range c.Hosts {
		pids = append(pids, h.PID)
	}
	return pids
}

// TestCluster checks that three hosts are hosts: own hostname, /dev/shm,
// processes; that they reach each other by name over TCP; that a link taken
// down cuts its host off and netem delay raises the round-trip time; and
// that teardown leaves nothing.
func TestCluster(t *testing.T) {
	netnsBefore, linksBefore := rootView(t)
	c := StartT(t, 3)
	pids := holderPIDs(c)

	t.Run("hostname", func(t *testing.T) {
		for _, h := range c.Hosts {
			if got := strings.TrimSpace(output(t, helperCmd(t, c, h.Name, "hostname"))); got != h.Name {
				t.Errorf("hostname on %s: %q", h.Name, got)
			}
		}
	})

	t.Run("wd", func(t *testing.T) {
		wd, _ := os.Getwd()
		if got := strings.TrimSpace(output(t, c.Command("h2", "/bin/pwd", "-P"))); got != wd {
			t.Errorf("a command on h2 runs in %q, not in the caller's directory %q", got, wd)
		}
	})

	t.Run("shm", func(t *testing.T) {
		f := fmt.Sprintf("/dev/shm/netcluster-test-%d", os.Getpid())
		t.Cleanup(func() { os.Remove(f) }) // only there if isolation failed
		output(t, c.Command("h1", "sh", "-c", "echo h1 > "+f))
		output(t, c.Command("h1", "test", "-e", f))
		if err := c.Command("h2", "test", "-e", f).Run(); err == nil {
			t.Errorf("h2 sees %s, written on h1", f)
		}
		if _, err := os.Stat(f); err == nil {
			t.Errorf("the machine sees %s, written on h1", f)
		}
	})

	t.Run("pid", func(t *testing.T) {
		for _, h := range c.Hosts {
			procs := map[string]string{}
			for _, l := range strings.Split(strings.TrimSpace(output(t, helperCmd(t, c, h.Name, "ps"))), "\n") {
				pid, cmdline, _ := strings.Cut(l, " ")
				procs[pid] = cmdline
			}
			if want := "netcluster-host " + h.Name; procs["1"] != want {
				t.Errorf("PID 1 on %s is %q, want its holder %q", h.Name, procs["1"], want)
			}
			for pid, cmdline := range procs {
				if strings.HasPrefix(cmdline, "netcluster-") && pid != "1" {
					t.Errorf("%s sees another holder: %s %s", h.Name, pid, cmdline)
				}
			}
			if len(procs) > 2 { // the holder and the ps helper
				t.Errorf("%s sees %d processes, not only its own two", h.Name, len(procs))
			}
		}
	})

	startServer(t, c, "h2", 7000)

	t.Run("tcp", func(t *testing.T) {
		for _, from := range []string{"h1", "h3", "h2"} {
			got := output(t, helperCmd(t, c, from, "dial", "h2:7000", "5s"))
			if got != "h2 hello\n" {
				t.Errorf("%s dialling h2:7000 got %q, want %q", from, got, "h2 hello\n")
			}
		}
	})

	t.Run("link", func(t *testing.T) {
		if err := c.SetLink("h2", false); err != nil {
			t.Fatal(err)
		}
		if out, err := helperCmd(t, c, "h1", "dial", "h2:7000", "500ms").CombinedOutput(); err == nil {
			t.Errorf("h1 reached h2 with h2's link down: %s", out)
		}
		if err := c.SetLink("h2", true); err != nil {
			t.Fatal(err)
		}
		if got := output(t, helperCmd(t, c, "h1", "dial", "h2:7000", "5s")); got != "h2 hello\n" {
			t.Errorf("h1 dialling h2 with the link up again: %q", got)
		}
	})

	t.Run("netem", func(t *testing.T) {
		// A delay on h2 lengthens every round trip from h1 by it (netem, or
		// on kernels without netem the delay line), together with a loss;
		// removing the shaping gives the short round trips back and ends
		// the delay line.
		const delay = 30 * time.Millisecond
		rttTo := func() time.Duration {
			ns, _ := strconv.ParseInt(strings.TrimSpace(output(t, helperCmd(t, c, "h1", "rtt", "h2:7000"))), 10, 64)
			return time.Duration(ns)
		}
		err := c.Netem("h2", "delay", delay.String(), "loss", "1%")
		if err != nil && strings.Contains(err.Error(), "iptables") && strings.Contains(err.Error(), "not found") {
			testnote.Skip(t, fmt.Sprintf("netcluster: this kernel has no netem, and the delay line needs iptables: %v", err))
		}
		if err != nil {
			t.Fatal(err)
		}
		if got := rttTo(); got < delay || got > 10*delay {
			t.Errorf("round trip h1-h2 with %v delay on h2: %v, want at least the delay and not ten times it", delay, got)
		}
		if n, err := c.ShapedPackets("h2"); err != nil || n == 0 {
			t.Errorf("the shaping of h2 handled %d packets (%v), want the round trips'", n, err)
		}
		var line process // the delay line, if this kernel needs one
		if b, err := os.ReadFile(c.delayFile("h2")); err == nil {
			if err := json.Unmarshal(b, &line); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.Netem("h2"); err != nil {
			t.Fatal(err)
		}
		if got := rttTo(); got >= delay {
			t.Errorf("round trip h1-h2 with the delay removed: %v, want less than %v", got, delay)
		}
		if _, err := os.Stat(c.delayFile("h2")); err == nil {
			t.Errorf("the delay line of h2 is still recorded after its removal")
		}
		if line.PID != 0 && alive(line) {
			t.Errorf("the delay line of h2 (PID %d) still runs after its removal", line.PID)
		}
	})

	t.Run("loss", func(t *testing.T) {
		// Half of what reaches h3 is lost: of 400 datagrams from h1, 100 to
		// 300 arrive (a binomial count outside that range has a chance
		// below 1e-20); without loss all of them.
		cmd := helperCmd(t, c, "h3", "udpsink", ":7002")
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { cmd.Process.Kill(); cmd.Wait() }()
		if line, err := bufio.NewReader(out).ReadString('\n'); line != "listening\n" {
			t.Fatalf("udp sink on h3: %q, %v", line, err)
		}
		// send sends n datagrams from h1 and returns how many arrived.
		total := 0
		send := func(n int) int {
			got, err := strconv.Atoi(strings.TrimSpace(output(t, helperCmd(t, c, "h1", "udpsend", "h3:7002", strconv.Itoa(n)))))
			if err != nil {
				t.Fatal(err)
			}
			got, total = got-total, got
			return got
		}
		// First without loss, which also settles h1's ARP entry for h3:
		// an ARP exchange lost under loss would hold back, and drop, the
		// datagrams queued behind it.
		if got := send(10); got != 10 {
			t.Errorf("without loss %d of 10 datagrams arrived", got)
		}
		if err := c.Netem("h3", "loss", "50%"); err != nil {
			t.Fatal(err)
		}
		if got := send(400); got < 100 || got > 300 {
			t.Errorf("with 50%% loss on h3's link %d of 400 datagrams arrived, want 100 to 300", got)
		}
		if err := c.Netem("h3"); err != nil {
			t.Fatal(err)
		}
		if got := send(400); got != 400 {
			t.Errorf("with the loss removed %d of 400 datagrams arrived", got)
		}
	})

	t.Run("rate", func(t *testing.T) {
		// 512 KiB to a host whose link takes 8 Mbit/s (1 MB/s) need at
		// least about half a second; allow for the shaper's burst.
		cmd := helperCmd(t, c, "h3", "tcpsink", ":7003")
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { cmd.Process.Kill(); cmd.Wait() }()
		if line, err := bufio.NewReader(out).ReadString('\n'); line != "listening\n" {
			t.Fatalf("tcp sink on h3: %q, %v", line, err)
		}
		if err := c.Netem("h3", "rate", "8mbit"); err != nil {
			t.Fatal(err)
		}
		defer c.Netem("h3")
		ns, _ := strconv.ParseInt(strings.TrimSpace(output(t, helperCmd(t, c, "h1", "tcpsend", "h3:7003", strconv.Itoa(512<<10)))), 10, 64)
		if got, least := time.Duration(ns), 400*time.Millisecond; got < least {
			t.Errorf("512 KiB to h3 at 8 Mbit/s took %v, want at least %v", got, least)
		}
	})

	t.Run("kill", func(t *testing.T) {
		// Killing the nsenter that Command starts kills the program it runs.
		cmd := helperCmd(t, c, "h3", "serve", ":7001")
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if line, err := bufio.NewReader(out).ReadString('\n'); line != "listening\n" {
			cmd.Process.Kill()
			t.Fatalf("server on h3: %q, %v", line, err)
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", cmd.Process.Pid, cmd.Process.Pid))
		prog, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || prog == 0 {
			cmd.Process.Kill()
			t.Fatalf("the program under nsenter %d: %q, %v", cmd.Process.Pid, b, err)
		}
		start, err := procStart(prog)
		if err != nil {
			t.Fatal(err)
		}
		fd, ok := pidfd(process{prog, start})
		if !ok {
			t.Fatalf("program %d gone before the kill", prog)
		}
		defer unix.Close(fd)
		cmd.Process.Kill()
		cmd.Wait()
		if !waitExit([]int{fd}, 10*time.Second) {
			unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
			t.Errorf("program %d on h3 still runs 10s after its nsenter was killed", prog)
		}
	})

	t.Run("teardown", func(t *testing.T) {
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		checkGone(t, pids, netnsBefore, linksBefore)
	})
}

// TestKilledCreator checks that a cluster vanishes when the process that
// made it is killed with SIGKILL, which runs no cleanup of its own.
func TestKilledCreator(t *testing.T) {
	if os.Geteuid() != 0 && os.Getenv("CI") == "" {
		testnote.Skip(t, "netcluster needs root to create namespaces")
	}
	netnsBefore, linksBefore := rootView(t)
	dir := t.TempDir()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	child := exec.Command(exe, "2", dir)
	child.Env = append(os.Environ(), envHelper+"=cluster")
	child.Stderr = os.Stderr
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer child.Process.Kill()
	if line, err := bufio.NewReader(out).ReadString('\n'); line != "started\n" {
		child.Wait()
		t.Fatalf("the child could not start a cluster: %q, %v", line, err)
	}
	b, err := os.ReadFile(filepath.Join(dir, stateFileName))
	if err != nil {
		t.Fatal(err)
	}
	var s state
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	procs := []process{s.Switch}
	for _, h := range s.Hosts {
		procs = append(procs, process{h.PID, h.Start})
	}
	var fds, pids []int
	for _, p := range procs {
		fd, ok := pidfd(p)
		if !ok {
			t.Fatalf("holder %d is not running while its creator is", p.PID)
		}
		defer unix.Close(fd)
		fds = append(fds, fd)
		pids = append(pids, p.PID)
	}
	if err := child.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	child.Wait()
	if !waitExit(fds, 10*time.Second) {
		for _, fd := range fds {
			unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0) // leave nothing behind
		}
		t.Fatalf("holders %v still run 10s after their creator was killed", pids)
	}
	checkGone(t, pids, netnsBefore, linksBefore)
}
