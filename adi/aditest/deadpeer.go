package aditest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/adimpi/adimpi/adi"
	"github.com/adimpi/adimpi/internal/pmi"
)

// The environment of the second process of a dead-peer check.
const (
	envPeer   = "ADITEST_PEER"   // set (to the parent's pid) in the peer process
	envOpts   = "ADITEST_OPTS"   // the device options, k=v,k=v
	envDevice = "ADITEST_DEVICE" // the device's name, for the log
)

func isPeer() bool { return os.Getenv(envPeer) != "" }

// deadPeer: rank 0 (this process) has a receive posted from rank 1 (the
// test binary again, in its own process) and a large send to it waiting
// for that receive when rank 1 is killed; both must fail with an error that
// names rank 1, within the device's liveness checks, and a new send to it
// must be refused.
func deadPeer(t testing.TB, c Config) {
	if isPeer() {
		os.Exit(peerMain(c))
	}
	if c.InProcess {
		t.Skipf("SKIP: %s lives in one process: no peer process can die", c.Name)
	}
	srv := pmi.NewServer(2, "aditest-"+c.Name)
	var mine net.Conn
	var childEnd *os.File
	for rank := range 2 {
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		sf := os.NewFile(uintptr(fds[0]), "pmi-server")
		sc, err := net.FileConn(sf)
		sf.Close()
		if err != nil {
			t.Fatal(err)
		}
		go srv.Serve(rank, sc)
		cf := os.NewFile(uintptr(fds[1]), "pmi-client")
		if rank == 1 {
			childEnd = cf
			continue
		}
		mine, err = net.FileConn(cf)
		cf.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(os.Args[0], "-test.run="+runPattern(t.Name()), "-test.count=1")
	cmd.Env = append(os.Environ(), envPeer+"="+strconv.Itoa(os.Getpid()), envOpts+"="+joinOpts(c.Options), envDevice+"="+c.Name,
		"PMI_FD=3", "PMI_RANK=1", "PMI_SIZE=2")
	cmd.ExtraFiles = []*os.File{childEnd}
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	childEnd.Close()
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	client, err := pmi.NewClient(mine, 0, 2)
	if err != nil {
		t.Fatal(err)
	}
	d := c.New()
	if err := d.Init(adi.Config{Rank: 0, Size: 2, KVS: client, Options: c.Options}); err != nil {
		t.Fatal(err)
	}
	defer d.Finalize()
	r := &Rank{ID: 0, Dev: d}
	hello := make([]byte, 5)
	ready, err := r.Recv(1, 1, 1, adi.Bytes(hello))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Wait(ready); err != nil || string(hello) != "hello" {
		t.Fatalf("rank 1 did not say hello: %v, %q", err, hello)
	}
	recv, err := r.Recv(1, 1, 2, adi.Bytes(make([]byte, 10)))
	if err != nil {
		t.Fatal(err)
	}
	long, err := r.Send(adi.ModeStandard, 1, 1, 3, adi.Bytes(make([]byte, 8<<20)))
	if err != nil {
		t.Fatal(err)
	}
	sync, err := r.Send(adi.ModeSync, 1, 1, 4, adi.Bytes(make([]byte, 8)))
	if err != nil {
		t.Fatal(err)
	}
	pending := []*adi.Request{recv, long, sync}
	for i := 0; i < 100; i++ {
		if _, err := d.Progress(); err != nil {
			t.Fatal(err)
		}
	}
	for _, q := range pending {
		if q.Done() {
			t.Fatalf("request (op %d tag %d) completed with rank 1 alive and receiving nothing: %+v", q.Op, q.Tag, q.Status)
		}
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait() // reaped: a zombie still looks alive
	start := time.Now()
	if err := r.Wait(pending...); err != nil {
		t.Fatalf("after rank 1 died: %v", err)
	}
	t.Logf("pending requests failed %v after rank 1 died", time.Since(start).Round(time.Millisecond))
	for _, q := range pending {
		if q.Status.Err == nil || !strings.Contains(q.Status.Err.Error(), "rank 1") {
			t.Errorf("request (op %d tag %d) completed with %+v, want an error naming rank 1", q.Op, q.Tag, q.Status)
		}
	}
	// A send started after the death fails at once or completes with the
	// error; either way it names the rank.
	late := &adi.Request{Op: adi.OpSend, Context: 1, Peer: 1, Tag: 5, Buf: adi.Bytes([]byte("late"))}
	if err = d.Isend(late); err == nil {
		if err = r.Wait(late); err != nil {
			t.Fatalf("a send to the dead rank 1: %v", err)
		}
		err = late.Status.Err
	}
	if err == nil || !strings.Contains(err.Error(), "rank 1") {
		t.Errorf("a send to the dead rank 1: %v, want an error naming rank 1", err)
	}
}

// peerMain is rank 1 of deadPeer: it wires up, says hello, and progresses
// until it is killed, or until its parent is gone (so that it never
// outlives a test that crashed).
func peerMain(c Config) int {
	parent, _ := strconv.Atoi(os.Getenv(envPeer))
	fail := func(what string, err error) int {
		fmt.Fprintf(os.Stderr, "aditest: %s peer: %s: %v\n", os.Getenv(envDevice), what, err)
		return 2
	}
	cl, err := pmi.Connect()
	if err != nil {
		return fail("pmi", err)
	}
	d := c.New()
	if err := d.Init(adi.Config{Rank: cl.Rank(), Size: cl.Size(), KVS: cl, Options: splitOpts(os.Getenv(envOpts))}); err != nil {
		return fail("Init", err)
	}
	q := &adi.Request{Op: adi.OpSend, Context: 1, Peer: 0, Tag: 1, Buf: adi.Bytes([]byte("hello"))}
	if err := d.Isend(q); err != nil {
		return fail("Isend", err)
	}
	for {
		seq := d.Seq()
		if _, err := d.Progress(); err != nil {
			return fail("Progress", err)
		}
		if os.Getppid() != parent {
			return 3
		}
		d.Sleep(seq, 10*time.Millisecond)
	}
}

// runPattern is the -test.run pattern that selects exactly the test name.
func runPattern(name string) string {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	return strings.Join(parts, "/")
}

func joinOpts(o map[string]string) string {
	var kv []string
	for k, v := range o {
		kv = append(kv, k+"="+v)
	}
	return strings.Join(kv, ",")
}

func splitOpts(s string) map[string]string {
	o := map[string]string{}
	for kv := range strings.SplitSeq(s, ",") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			o[k] = v
		}
	}
	return o
}
