package xsk_test

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/adimpi/adimpi/internal/netcluster"
	"github.com/adimpi/adimpi/internal/xdpprog"
	"github.com/adimpi/adimpi/internal/xsk"
)

// The tests run this binary again inside a simulated host, in the role
// named by roleEnv.
const roleEnv = "XSK_TEST_ROLE"

// sizeEnv is the size of the ping role's frames.
const sizeEnv = "XSK_TEST_SIZE"

// modeEnv, set to "native", attaches the program in the driver instead of
// in generic mode.
const modeEnv = "XSK_TEST_MODE"

const testJob = 0x1122334455667788

func TestMain(m *testing.M) {
	if role := os.Getenv(roleEnv); role != "" {
		if err := child(role, os.Args[len(os.Args)-1]); err != nil {
			fmt.Fprintln(os.Stderr, role+":", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// open attaches the steering program to eth0 and opens a socket on its
// queue 0 that the program feeds.
func open() (*xdpprog.Program, *xsk.Socket, net.HardwareAddr, error) {
	ifc, err := net.InterfaceByName("eth0")
	if err != nil {
		return nil, nil, nil, err
	}
	p, err := xdpprog.Attach(ifc.Index, 1, testJob, os.Getenv(modeEnv) != "native")
	if err != nil {
		return nil, nil, nil, err
	}
	// Frames of 4 KiB that a jumbo frame spans several of (Multi).
	s, err := xsk.Open(xsk.Config{Ifindex: ifc.Index, Queue: 0, Frames: 256, FrameSize: 4096, Multi: true})
	if err != nil {
		p.Close()
		return nil, nil, nil, err
	}
	if err := p.Steer(0, s.FD()); err != nil {
		s.Close()
		p.Close()
		return nil, nil, nil, err
	}
	return p, s, ifc.HardwareAddr, nil
}

// child runs one role: "echo" returns every job frame to its sender until
// its standard input closes; "ping" sends arg (the echo's MAC address) 200
// numbered frames of sizeEnv bytes (default 64) one at a time and checks
// each comes back whole; "hold"
// attaches the program, prints its id and waits to be killed.
func child(role, arg string) error {
	p, s, mac, err := open()
	if err != nil {
		return err
	}
	defer p.Close()
	defer s.Close()
	switch role {
	case "hold":
		id, err := p.ID()
		if err != nil {
			return err
		}
		fmt.Printf("id %d\n", id)
		select {}
	case "echo":
		fmt.Printf("mac %s\n", mac)
		done := make(chan struct{})
		go func() { _, _ = bufio.NewReader(os.Stdin).ReadString('\n'); close(done) }()
		for {
			select {
			case <-done:
				return nil
			default:
			}
			wait(s, 100)
			s.Completed(s.FreeTX)
			s.Receive(64, func(f []byte) {
				out := append([]byte(nil), f...)
				copy(out[0:6], f[6:12])
				copy(out[6:12], mac)
				s.SendFrame(out)
			})
			if err := s.Kick(); err != nil {
				return err
			}
		}
	case "ping":
		peer, err := net.ParseMAC(arg)
		if err != nil {
			return err
		}
		size := 64
		if v := os.Getenv(sizeEnv); v != "" {
			if size, err = strconv.Atoi(v); err != nil || size < 64 {
				return fmt.Errorf("%s=%q", sizeEnv, v)
			}
		}
		var rtts []time.Duration
		f := make([]byte, size)
		for i := range 200 {
			copy(f[0:6], peer)
			copy(f[6:12], mac)
			binary.BigEndian.PutUint16(f[12:14], xdpprog.EtherType)
			binary.LittleEndian.PutUint64(f[14:22], testJob)
			binary.LittleEndian.PutUint32(f[22:26], uint32(i))
			for j := 26; j < size; j++ {
				f[j] = byte(i*7 + j)
			}
			t0 := time.Now()
			if !s.SendFrame(f) {
				return fmt.Errorf("frame %d of %d bytes: no room to send", i, size)
			}
			got := false
			resend := t0.Add(time.Second)
			for deadline := t0.Add(5 * time.Second); !got; {
				// The first frame over links just built may be dropped
				// (a loaded CI machine lost it once): it is sent again
				// each second until it comes back; every later frame
				// must come back the first time.
				if i == 0 && time.Now().After(resend) {
					if !s.SendFrame(f) {
						return fmt.Errorf("frame 0 of %d bytes: no room to send it again", size)
					}
					resend = resend.Add(time.Second)
				}
				if err := s.Kick(); err != nil {
					return err
				}
				s.Completed(s.FreeTX)
				s.Receive(64, func(f []byte) {
					if len(f) >= 26 && binary.LittleEndian.Uint32(f[22:26]) == uint32(i) && bytes.Equal(f[0:6], mac) {
						got = true
						if len(f) != size {
							err = fmt.Errorf("frame %d: %d bytes sent, %d came back", i, size, len(f))
						}
						for j := 26; j < len(f) && err == nil; j++ {
							if f[j] != byte(i*7+j) {
								err = fmt.Errorf("frame %d of %d bytes: byte %d changed", i, size, j)
							}
						}
					}
				})
				if !got {
					if time.Now().After(deadline) {
						return fmt.Errorf("frame %d: no echo within 5 s", i)
					}
					wait(s, 10)
				}
			}
			if err != nil {
				return err
			}
			rtts = append(rtts, time.Since(t0))
		}
		st, err := s.Stats()
		if err != nil {
			return err
		}
		fmt.Printf("ok min %v zerocopy %v rx_dropped %d\n", minDur(rtts), s.ZeroCopy, st.Rx_dropped)
	}
	return nil
}

func wait(s *xsk.Socket, ms int) {
	fds := []unix.PollFd{{Fd: int32(s.FD()), Events: unix.POLLIN}}
	_, _ = unix.Poll(fds, ms)
}

func minDur(d []time.Duration) time.Duration {
	m := d[0]
	for _, x := range d {
		m = min(m, x)
	}
	return m
}

func start(t *testing.T, c *netcluster.Cluster, host, role, arg string) (*exec.Cmd, *bufio.Reader, *bytes.Buffer) {
	t.Helper()
	cmd := c.Command(host, os.Args[0], "-test.run=^$", arg)
	cmd.Env = append(os.Environ(), roleEnv+"="+role)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if role == "echo" {
		if _, err := cmd.StdinPipe(); err != nil {
			t.Fatal(err)
		}
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd, bufio.NewReader(out), &stderr
}

// TestEcho sends job frames through the steering program and an AF_XDP
// socket on each of two hosts and checks every one comes back.
func TestEcho(t *testing.T) { echo(t, netcluster.StartT(t, 2), 64) }

// TestEchoJumbo does the same with frames of 9000 bytes on links of MTU
// 9000: each spans three UMEM frames on the way out and in (XDP_USE_SG).
func TestEchoJumbo(t *testing.T) {
	echo(t, netcluster.StartOptsT(t, netcluster.Options{Hosts: 2, MTU: 9000}), 9014)
}

// TestEchoJumboNative echoes the jumbo frames with the program in veth's
// driver (native mode) on both hosts. veth refuses a program that does
// not take frames in fragments on links whose MTU exceeds a page.
func TestEchoJumboNative(t *testing.T) {
	t.Setenv(modeEnv, "native")
	c := netcluster.StartOptsT(t, netcluster.Options{Hosts: 2, MTU: 9000})
	echo(t, c, 9014)
}

func echo(t *testing.T, c *netcluster.Cluster, size int) {
	_, out, stderr := start(t, c, "h1", "echo", "-")
	line, err := out.ReadString('\n')
	if err != nil {
		t.Fatalf("echo: %v: %s", err, stderr)
	}
	if os.Getenv(modeEnv) == "native" {
		show, err := c.Command("h1", "ip", "link", "show", "eth0").CombinedOutput()
		if err != nil || !strings.Contains(string(show), "prog/xdp ") || strings.Contains(string(show), "xdpgeneric") {
			t.Fatalf("eth0 has no program in the driver: %v: %s", err, show)
		}
	}
	mac := strings.TrimPrefix(strings.TrimSpace(line), "mac ")
	ping := c.Command("h2", os.Args[0], "-test.run=^$", mac)
	ping.Env = append(os.Environ(), roleEnv+"=ping", sizeEnv+"="+strconv.Itoa(size))
	res, err := ping.CombinedOutput()
	if err != nil || !strings.HasPrefix(string(res), "ok ") {
		t.Fatalf("ping: %v: %s\necho stderr: %s", err, res, stderr)
	}
	t.Logf("%s", res)
}

// TestDetachOnKill checks that the kernel drops the steering program when
// the process that attached it is killed with SIGKILL.
func TestDetachOnKill(t *testing.T) {
	c := netcluster.StartT(t, 1)
	cmd, out, stderr := start(t, c, "h1", "hold", "-")
	line, err := out.ReadString('\n')
	if err != nil {
		t.Fatalf("hold: %v: %s", err, stderr)
	}
	id, err := strconv.Atoi(strings.TrimPrefix(strings.TrimSpace(line), "id "))
	if err != nil {
		t.Fatalf("hold said %q", line)
	}
	if p, err := ebpf.NewProgramFromID(ebpf.ProgramID(id)); err != nil {
		t.Fatalf("program %d is not loaded while its process lives: %v", id, err)
	} else {
		p.Close()
	}
	if err := cmd.Process.Signal(unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	// The kernel frees the program after the last reference goes, which
	// the release of the link and map takes a grace period to do.
	deadline := time.Now().Add(10 * time.Second)
	for {
		p, err := ebpf.NewProgramFromID(ebpf.ProgramID(id))
		if errors.Is(err, os.ErrNotExist) {
			break
		}
		if err == nil {
			p.Close()
		}
		if time.Now().After(deadline) {
			t.Fatalf("program %d still loaded 10 s after its process was killed (%v)", id, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	show, err := c.Command("h1", "ip", "link", "show", "eth0").CombinedOutput()
	if err != nil || strings.Contains(string(show), "xdp") {
		t.Fatalf("eth0 still has an XDP program after the kill: %v: %s", err, show)
	}
}
