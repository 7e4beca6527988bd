package main

// xskping: the raw AF_XDP frame round trip between two simulated hosts, the
// floor under the XDP wire's latency. "mpibench xskping echo" on one host
// returns every frame of its job to the sender until its standard input
// closes; "mpibench xskping ping MAC" on another sends frames to it one at
// a time and prints the round trips. Both ends wait as the MPI devices do:
// they spin on the rings for a while, then sleep in poll(2) on the socket.

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/adimpi/adimpi/internal/xdpprog"
	"github.com/adimpi/adimpi/internal/xsk"
)

// xskPingJob is the job id the raw frames carry (the program steers by it).
const xskPingJob = 0x58534b50494e47

// xskSpin is how long an end spins on its rings before it sleeps in poll:
// as long as an MPI rank spins before it sleeps (mpi's default).
const xskSpin = time.Millisecond

// runXSKPing is "mpibench xskping echo|ping MAC [ROUND-TRIPS [BYTES]]".
func runXSKPing(args []string) int {
	if err := xskPing(args); err != nil {
		fmt.Fprintln(os.Stderr, "mpibench xskping:", err)
		return 1
	}
	return 0
}

func xskPing(args []string) error {
	if len(args) < 1 || (args[0] != "echo" && (args[0] != "ping" || len(args) < 2)) {
		return errors.New("usage: mpibench xskping echo | ping MAC [ROUND-TRIPS [BYTES]]")
	}
	ifc, err := net.InterfaceByName("eth0")
	if err != nil {
		return err
	}
	prog, err := xdpprog.Attach(ifc.Index, 1, xskPingJob, true)
	if err != nil {
		return err
	}
	defer prog.Close()
	s, err := xsk.Open(xsk.Config{Ifindex: ifc.Index, Queue: 0, Frames: 1024, FrameSize: 4096})
	if err != nil {
		return err
	}
	defer s.Close()
	if err := prog.Steer(0, s.FD()); err != nil {
		return err
	}
	mac := ifc.HardwareAddr
	if args[0] == "echo" {
		return xskEcho(s, mac)
	}
	peer, err := net.ParseMAC(args[1])
	if err != nil {
		return err
	}
	n, size := 2000, 128
	if len(args) > 2 {
		if n, err = strconv.Atoi(args[2]); err != nil || n < 1 {
			return fmt.Errorf("round trips %q", args[2])
		}
	}
	if len(args) > 3 {
		if size, err = strconv.Atoi(args[3]); err != nil || size < 64 || size > 4096 {
			return fmt.Errorf("bytes %q: want 64 to 4096", args[3])
		}
	}
	rtts, err := xskRoundTrips(s, mac, peer, n, size)
	if err != nil {
		return err
	}
	slices.Sort(rtts)
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1000 }
	fmt.Printf("xskping,raw,2,%d,%.3f,us_rtt_median\n", size, us(rtts[len(rtts)/2]))
	fmt.Printf("xskping,raw,2,%d,%.3f,us_rtt_min\n", size, us(rtts[0]))
	return nil
}

// xskWait waits for a received frame: it spins for xskSpin, yielding the
// core now and then, then sleeps in poll(2) for up to ms milliseconds. It reports whether a frame is there.
func xskWait(s *xsk.Socket, got func() bool, ms int) bool {
	for t0, i := time.Now(), 0; time.Since(t0) < xskSpin; i++ {
		if got() {
			return true
		}
		if i%16 == 15 {
			// Let the other end run if it shares this core.
			_, _, _ = unix.Syscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
		}
	}
	fds := []unix.PollFd{{Fd: int32(s.FD()), Events: unix.POLLIN}}
	_, _ = unix.Poll(fds, ms)
	return got()
}

// xskEcho sends every frame back, source and destination swapped, until
// standard input closes.
func xskEcho(s *xsk.Socket, mac net.HardwareAddr) error {
	fmt.Printf("mac %s\n", mac)
	done := make(chan struct{})
	go func() { _, _ = bufio.NewReader(os.Stdin).ReadString('\n'); close(done) }()
	out := make([]byte, 4096)
	echo := func() bool {
		return s.Receive(64, func(f []byte) {
			n := copy(out, f)
			copy(out[0:6], f[6:12])
			copy(out[6:12], mac)
			s.SendFrame(out[:n])
		}) > 0
	}
	for {
		select {
		case <-done:
			return nil
		default:
		}
		if xskWait(s, echo, 100) {
			if err := s.Kick(); err != nil {
				return err
			}
			s.Completed(s.FreeTX)
		}
	}
}

// xskRoundTrips sends n numbered frames of size bytes to peer one at a time
// and times each one's return.
func xskRoundTrips(s *xsk.Socket, mac, peer net.HardwareAddr, n, size int) ([]time.Duration, error) {
	f := make([]byte, size)
	copy(f[0:6], peer)
	copy(f[6:12], mac)
	binary.BigEndian.PutUint16(f[12:14], xdpprog.EtherType)
	binary.LittleEndian.PutUint64(f[14:22], xskPingJob)
	var rtts []time.Duration
	for i := range n + n/10 { // the first tenth warms up
		binary.LittleEndian.PutUint32(f[22:26], uint32(i))
		back := false
		got := func() bool {
			s.Receive(64, func(g []byte) {
				if len(g) >= 26 && binary.LittleEndian.Uint32(g[22:26]) == uint32(i) {
					back = true
				}
			})
			return back
		}
		t0 := time.Now()
		if !s.SendFrame(f) {
			return nil, fmt.Errorf("frame %d: no room to send", i)
		}
		if err := s.Kick(); err != nil {
			return nil, err
		}
		for deadline := t0.Add(2 * time.Second); !xskWait(s, got, 10); {
			if time.Now().After(deadline) {
				return nil, fmt.Errorf("frame %d: no echo within 2 s", i)
			}
		}
		d := time.Since(t0)
		s.Completed(s.FreeTX)
		if i >= n/10 {
			rtts = append(rtts, d)
		}
	}
	return rtts, nil
}
