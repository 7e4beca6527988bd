package wire

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// inSet reports whether fd is in the epoll set ep, from the kernel's
// account of the set (/proc/self/fdinfo).
func inSet(t *testing.T, ep, fd int) bool {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/self/fdinfo/%d", ep))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Contains(string(b), fmt.Sprintf("tfd: %8d ", fd))
}

// TestWatchJoinsWhileSleeping checks the AF_XDP socket's place in the
// endpoint's epoll set (xdp_watch.go) with a pipe standing in for the
// socket: out of the set while nobody sleeps, in it from a waiter's sleep
// (and ready at once if data came before), kept while any waiter still
// sleeps, and out again at the first idle poll after the last woke.
func TestWatchJoinsWhileSleeping(t *testing.T) {
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(ep)
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	w := &watch{ep: ep, fd: p[0]}
	evs := make([]unix.EpollEvent, 4)
	ready := func(ms int) bool {
		n, err := unix.EpollWait(ep, evs, ms)
		if err != nil {
			t.Fatal(err)
		}
		return n == 1 && int(evs[0].Fd) == p[0]
	}

	w.idle()
	if inSet(t, ep, p[0]) {
		t.Fatal("the socket is in the epoll set with no waiter")
	}
	if !w.sleep() || !inSet(t, ep, p[0]) {
		t.Fatal("a sleeping waiter's epoll set lacks the socket")
	}
	if ready(0) {
		t.Fatal("epoll reports the empty socket ready")
	}
	if _, err := unix.Write(p[1], []byte{1}); err != nil {
		t.Fatal(err)
	}
	if !ready(10000) {
		t.Fatal("data on the socket did not end the sleep")
	}
	// A second waiter, and the first wakes: the second still needs it.
	if !w.sleep() {
		t.Fatal("second sleep failed")
	}
	w.wake()
	w.idle()
	if !inSet(t, ep, p[0]) {
		t.Fatal("an idle poll took the socket out of the set while a waiter slept")
	}
	w.wake()
	w.idle()
	if inSet(t, ep, p[0]) {
		t.Fatal("the socket stayed in the epoll set after the last waiter woke and a poll found nothing")
	}
	// Data that came while the socket was out of the set: joining reports
	// it at once, so the waiter does not sleep through it.
	if !w.sleep() {
		t.Fatal("third sleep failed")
	}
	if !ready(0) {
		t.Fatal("a frame that came before the waiter joined was not reported")
	}
	w.wake()
}
