package bip

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/adimpi/adimpi/adi"
	"github.com/adimpi/adimpi/internal/pmi"

	"github.com/adimpi/adimpi/internal/testbuild"
)

// With BIP_CHILD set, the test binary plays rank 1 of TestDevicePeerDeath:
// it wires up the MPI device, tells rank 0 it is there with one eager
// message, and then waits to be killed without ever receiving.
func TestMain(m *testing.M) {
	if os.Getenv("BIP_CHILD") != "" {
		os.Exit(deathChild())
	}
	os.Exit(m.Run())
}

func deathChild() int {
	c, err := pmi.Connect()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	d := new(Device)
	if err := d.Init(adi.Config{Rank: c.Rank(), Size: c.Size(), KVS: c}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	r := &adi.Request{Op: adi.OpSend, Peer: 0, Tag: 1, Buf: adi.Bytes([]byte("here"))}
	if err := d.Isend(r); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 4
	}
	for {
		seq := d.Seq()
		if _, err := d.Progress(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 5
		}
		d.Sleep(seq, time.Second)
	}
}

// TestDevicePeerDeath: rank 0 (this process) has a posted receive from
// rank 1 and a long send to rank 1 waiting for its acknowledgement when
// rank 1 is killed; both must fail with ErrOther, not hang.
func TestDevicePeerDeath(t *testing.T) {
	srv := pmi.NewServer(2, "bip-death")
	var conns [2]net.Conn
	var childEnd *os.File
	for rank := range 2 {
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		srvFile := os.NewFile(uintptr(fds[0]), "pmi-server")
		sc, err := net.FileConn(srvFile)
		srvFile.Close()
		if err != nil {
			t.Fatal(err)
		}
		go srv.Serve(rank, sc)
		peerFile := os.NewFile(uintptr(fds[1]), "pmi-client")
		if rank == 1 {
			childEnd = peerFile
			continue
		}
		if conns[rank], err = net.FileConn(peerFile); err != nil {
			t.Fatal(err)
		}
		peerFile.Close()
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "BIP_CHILD=1", "PMI_FD=3", "PMI_RANK=1", "PMI_SIZE=2")
	cmd.ExtraFiles = []*os.File{childEnd}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	childEnd.Close()
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	client, err := pmi.NewClient(conns[0], 0, 2)
	if err != nil {
		t.Fatal(err)
	}
	d := new(Device)
	if err := d.Init(adi.Config{Rank: 0, Size: 2, KVS: client}); err != nil {
		t.Fatal(err)
	}
	defer d.Finalize()
	hello := make([]byte, 4)
	ready := &adi.Request{Op: adi.OpRecv, Peer: 1, Tag: 1, Buf: adi.Bytes(hello)}
	recv := &adi.Request{Op: adi.OpRecv, Peer: 1, Tag: 2, Buf: adi.Bytes(make([]byte, 10))}
	long := &adi.Request{Op: adi.OpSend, Peer: 1, Tag: 3, Buf: adi.Bytes(make([]byte, 1<<20))}
	for _, r := range []*adi.Request{ready, recv} {
		if err := d.Irecv(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Isend(long); err != nil {
		t.Fatal(err)
	}
	wait := func(limit time.Duration, reqs ...*adi.Request) bool {
		end := time.Now().Add(limit)
		for time.Now().Before(end) {
			seq := d.Seq()
			if _, err := d.Progress(); err != nil {
				t.Fatal(err)
			}
			all := true
			for _, r := range reqs {
				all = all && r.Done()
			}
			if all {
				return true
			}
			d.Sleep(seq, 20*time.Millisecond)
		}
		return false
	}
	if !wait(30*time.Second, ready) || string(hello) != "here" {
		t.Fatalf("rank 1 did not say hello: done %v, %q", ready.Done(), hello)
	}
	if recv.Done() || long.Done() {
		t.Fatal("requests completed with rank 1 alive and idle")
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait() // reap it: a zombie still looks alive
	start := time.Now()
	if !wait(10*time.Second, recv, long) {
		t.Fatalf("requests still pending 10s after rank 1 died: receive %v, send %v", recv.Done(), long.Done())
	}
	for _, r := range []*adi.Request{recv, long} {
		if !errors.Is(r.Status.Err, adi.ErrOther) {
			t.Errorf("request failed with %v, want ErrOther", r.Status.Err)
		}
	}
	t.Logf("failed %v after the peer died", time.Since(start))
	if err := d.Isend(&adi.Request{Op: adi.OpSend, Peer: 1, Buf: adi.Bytes(nil)}); !errors.Is(err, adi.ErrOther) {
		t.Errorf("send to a dead peer: %v, want ErrOther", err)
	}
}

// TestConformanceVariants runs the p2p conformance checks that exercise
// protocol corners at np=4 under mpirun -async-progress (the core's
// progress goroutine calls Progress concurrently with the program's own
// calls and Sleep) and with tiny queues and chunks (credits run out, every
// long message goes through staging, BIP's bound is 2).
func TestConformanceVariants(t *testing.T) {
	if testing.Short() {
		t.Skip("the conformance suite runs the device's main matrix")
	}
	bins := testbuild.Programs(t, "../../cmd/mpirun", "../../conformance/p2p")
	mpirun, prog := bins["mpirun"], bins["p2p"]
	checks := []string{"order", "anysource", "anytag", "truncate", "zero", "self", "ssend", "bsend", "rsend",
		"probe", "cancel", "persistent", "waitany", "alltoall", "many-pending", "anysource-race"}
	for _, opts := range [][]string{
		{"-async-progress"},
		{"-device-opt", "queue=4", "-device-opt", "short=256", "-device-opt", "cma=off", "-device-opt", "chunk=1024", "-device-opt", "maxlong=2"},
	} {
		for _, check := range checks {
			args := append(append([]string{"-np", "4", "-device", "bip", "-timeout", "60s"}, opts...), prog, check)
			out, err := exec.Command(mpirun, args...).CombinedOutput()
			if err != nil || !strings.Contains(string(out), "PASS "+check) || strings.Contains(string(out), "FAIL") {
				t.Errorf("mpirun %v: %v\n%s", args, err, out)
			}
		}
	}
}

// TestStandalone runs the standalone BIP API checks (testdata/bipprog)
// through mpirun, with the default options and with tiny queues, chunks
// instead of remote write and maxlong=3; and MPI over BIP at its protocol
// thresholds, MPI-BIP's credit check and the overlap check.
func TestStandalone(t *testing.T) {
	bins := testbuild.Programs(t, "../../cmd/mpirun", "./testdata/bipprog", "./testdata/creditprog", "./testdata/thresholdprog", "./testdata/overlapprog")
	small := []string{"-device-opt", "cma=off", "-device-opt", "maxlong=3", "-device-opt", "queue=4", "-device-opt", "short=256", "-device-opt", "chunk=4096"}
	for _, np := range []string{"1", "2", "3"} {
		for _, check := range []string{"short", "long", "bound"} {
			for _, opts := range [][]string{nil, small} {
				args := append(append([]string{"-np", np, "-timeout", "60s"}, opts...), bins["bipprog"], check)
				out, err := exec.Command(bins["mpirun"], args...).CombinedOutput()
				if err != nil || !strings.Contains(string(out), "PASS "+check) {
					t.Errorf("mpirun %v: %v\n%s", args, err, out)
				}
			}
		}
	}
	// MPI over BIP at every protocol threshold ±1 byte (testdata/thresholdprog),
	// at np=3 (a pair and a rank talking to itself).
	for _, opts := range [][]string{nil, {"-async-progress"},
		{"-device-opt", "cma=off", "-device-opt", "short=256", "-device-opt", "chunk=1024", "-device-opt", "maxlong=2", "-device-opt", "queue=4"}} {
		args := append(append([]string{"-np", "3", "-device", "bip", "-timeout", "90s"}, opts...), bins["thresholdprog"])
		out, err := exec.Command(bins["mpirun"], args...).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "PASS thresholds") {
			t.Errorf("mpirun %v: %v\n%s", args, err, out)
		}
	}
	// The seed's point (testdata/overlapprog): a long receive cannot
	// complete while both sides compute without MPI calls; it does with
	// Iprobe calls in the computation or with the progress goroutine.
	for _, mode := range []string{"plain", "iprobe", "async"} {
		args := []string{"-np", "2", "-device", "bip", "-timeout", "60s"}
		if mode == "async" {
			args = append(args, "-async-progress")
		}
		gate := filepath.Join(t.TempDir(), "gate")
		if err := syscall.Mkfifo(gate, 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, bins["overlapprog"], mode, gate)
		out, err := exec.Command(bins["mpirun"], args...).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "PASS overlap "+mode) {
			t.Errorf("mpirun %v: %v\n%s", args, err, out)
		}
	}
	// MPI-BIP's credits: a flood of small sends waits for credit, and the
	// receiver returns credits explicitly (testdata/creditprog).
	for _, q := range []string{"queue=4", "queue=32"} {
		args := []string{"-np", "2", "-device", "bip", "-device-opt", q, "-timeout", "60s", bins["creditprog"]}
		out, err := exec.Command(bins["mpirun"], args...).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "PASS credits") {
			t.Errorf("mpirun %v: %v\n%s", args, err, out)
		}
	}
}

func TestOptions(t *testing.T) {
	o, err := ParseOptions(map[string]string{"short": "100", "queue": "8", "maxlong": "2", "cma": "off"})
	if err != nil || o.Short != 128 || o.Queue != 8 || o.MaxLong != 2 || o.CMA || o.Chunk != DefaultOptions.Chunk {
		t.Fatalf("ParseOptions: %+v %v", o, err)
	}
	for _, bad := range []map[string]string{{"short": "10"}, {"queue": "2"}, {"maxlong": "0"}, {"cma": "yes"}, {"eager": "1"}, {"chunk": "x"}} {
		if _, err := ParseOptions(bad); err == nil {
			t.Errorf("ParseOptions(%v) accepted", bad)
		}
	}
}

// TestDeviceMaxLong checks that the MPI device pipelines its rendezvous
// (several long receives posted per peer) unless maxlong is given, while
// BIP's API keeps BIP's bound of 1.
func TestDeviceMaxLong(t *testing.T) {
	o, err := deviceOptions(map[string]string{})
	if err != nil || o.MaxLong != mpiMaxLong || mpiMaxLong < 2 {
		t.Errorf("device default: maxlong %d, %v; want %d (at least 2)", o.MaxLong, err, mpiMaxLong)
	}
	if o, err := deviceOptions(map[string]string{"maxlong": "1"}); err != nil || o.MaxLong != 1 {
		t.Errorf("maxlong=1: %d, %v", o.MaxLong, err)
	}
	if o, err := ParseOptions(map[string]string{}); err != nil || o.MaxLong != 1 {
		t.Errorf("BIP API default: maxlong %d, %v; want 1", o.MaxLong, err)
	}
}

// TestDeviceQueue checks that the MPI device's credits cover a window of
// 64 eager messages unless queue is given, while BIP's API keeps 32.
func TestDeviceQueue(t *testing.T) {
	o, err := deviceOptions(map[string]string{})
	if err != nil || o.Queue-reserved < 64 {
		t.Errorf("device default: queue %d, %v; want credits (queue − %d) of at least 64", o.Queue, err, reserved)
	}
	if o, err := deviceOptions(map[string]string{"queue": "8"}); err != nil || o.Queue != 8 {
		t.Errorf("queue=8: %d, %v", o.Queue, err)
	}
	if o, err := ParseOptions(map[string]string{}); err != nil || o.Queue != 32 {
		t.Errorf("BIP API default: queue %d, %v; want 32", o.Queue, err)
	}
}
