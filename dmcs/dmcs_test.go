package dmcs_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/adimpi/adimpi/adi"
	"github.com/adimpi/adimpi/dmcs"
	"github.com/adimpi/adimpi/internal/testbuild"
	"github.com/adimpi/adimpi/mpi"
)

// The unit tests and benchmarks run in one process, an MPI singleton that
// sends its requests to itself; the multi-process tests run
// testdata/dmcsprog through the real mpirun on every device.

var d *dmcs.DMCS

func TestMain(m *testing.M) {
	for _, k := range []string{"PMI_FD", "PMI_PORT", "PMI_RANK", "PMI_SIZE"} {
		os.Unsetenv(k)
	}
	if err := mpi.Init(); err != nil {
		panic(err)
	}
	var err error
	if d, err = dmcs.Init(dmcs.Options{}); err != nil {
		panic(err)
	}
	code := m.Run()
	if err := d.Close(); err != nil {
		panic(err)
	}
	if err := mpi.Finalize(); err != nil {
		panic(err)
	}
	os.Exit(code)
}

// TestSelf: every operation against this process itself.
func TestSelf(t *testing.T) {
	var sum uint64
	h := d.Register(func(_ *dmcs.DMCS, src int, args []uint64, payload []byte) {
		for _, a := range args {
			sum += a
		}
		sum += uint64(len(payload))
	})
	for n := 0; n <= dmcs.MaxArgs; n++ {
		args := make([]uint64, n)
		for i := range args {
			args[i] = uint64(i + 1)
		}
		if err := d.RSR(0, h, args...); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.RSRPayload(0, h, make([]byte, 5000)); err != nil { // in the ring
		t.Fatal(err)
	}
	if err := d.RSRPayload(0, h, make([]byte, 20000)); err != nil { // a separate message: waits for the handler
		t.Fatal(err)
	}
	if err := d.RSR(0, h, 1, 2, 3, 4, 5); err == nil {
		t.Fatal("RSR with 5 arguments succeeded")
	}
	if _, err := d.Poll(); err != nil {
		t.Fatal(err)
	}
	if want := uint64(1 + 3 + 6 + 10 + 5000 + 20000); sum != want {
		t.Fatalf("handlers saw %d, want %d", sum, want)
	}
	p, err := d.Malloc(0, 4096)
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 4096)
	for i := range data {
		data[i] = byte(i)
	}
	if err := d.Put(0, p, data); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 100)
	if err := d.Get(0, p.Add(1000), got); err != nil {
		t.Fatal(err)
	}
	if got[0] != byte(1000%256) || got[99] != byte(1099%256) {
		t.Fatalf("Get read %d..%d", got[0], got[99])
	}
	word := binary.LittleEndian.AppendUint64(nil, 7)
	if err := d.PutOp(0, p, word, dmcs.SumInt64); err != nil {
		t.Fatal(err)
	}
	b, _ := d.Bytes(p, 8)
	if v := binary.LittleEndian.Uint64(b); v != binary.LittleEndian.Uint64(data[:8])+7 {
		t.Fatalf("PutOp left %#x", v)
	}
	if err := d.Get(0, p.Add(4090), got); err == nil {
		t.Fatal("Get beyond the block succeeded")
	}
	if err := d.Free(0, p); err != nil {
		t.Fatal(err)
	}
	if err := d.Free(0, p); err == nil || !strings.Contains(err.Error(), "is not a block Malloc gave") {
		t.Fatalf("second Free: %v", err)
	}
	if err := d.Put(0, p, data[:8]); err == nil {
		t.Fatal("Put into freed memory succeeded")
	}
}

// TestOverflow sends this process more requests than its ring holds
// before it polls: the rest wait in the overflow queue, and every one runs,
// in order, with its payload.
func TestOverflow(t *testing.T) {
	const n = 300
	next := 0
	var bad error
	h := d.Register(func(_ *dmcs.DMCS, _ int, args []uint64, payload []byte) {
		if int(args[0]) != next || len(payload) != 4000 || payload[0] != byte(next) || payload[3999] != byte(next*7) {
			bad = fmt.Errorf("request %d: got number %d, %d bytes", next, args[0], len(payload))
		}
		next++
	})
	p := make([]byte, 4000)
	for i := 0; i < n; i++ {
		p[0], p[3999] = byte(i), byte(i*7)
		if err := d.RSRPayload(0, h, p, uint64(i)); err != nil {
			t.Fatal(err)
		}
	}
	for next < n {
		k, err := d.Poll()
		if err != nil {
			t.Fatal(err)
		}
		if k == 0 && next < n {
			t.Fatalf("Poll found nothing after %d of %d requests", next, n)
		}
	}
	if bad != nil {
		t.Fatal(bad)
	}
}

// TestHandlerMustNotBlockThread: with a poll thread, a synchronous call
// inside a handler is refused ("handlers must not block") — whether the
// handler runs on the poll thread or on a goroutine that took the poll
// over while it waited — rather than waiting for itself forever.
func TestHandlerMustNotBlockThread(t *testing.T) {
	dt, err := dmcs.Init(dmcs.Options{PollThread: true})
	if err != nil {
		t.Fatal(err)
	}
	cell := dt.Expose(make([]byte, 8))
	errs := make(chan error, 4)
	h := dt.Register(func(d *dmcs.DMCS, _ int, _ []uint64, _ []byte) {
		errs <- d.Get(0, cell, make([]byte, 8))
	})
	// On the poll thread: nobody waits, the poll thread runs it.
	if err := dt.RSR(0, h); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errs:
		if err == nil || !strings.Contains(err.Error(), "must not block") {
			t.Fatalf("Get in a handler on the poll thread: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Get in a handler on the poll thread hung")
	}
	// On a waiter: RSRPayloadAsync's acknowledgement is waited for by
	// this goroutine, which may serve the request itself.
	var c dmcs.Counter
	done := make(chan error, 1)
	go func() {
		if err := dt.RSRPayloadAsync(0, h, nil, &c); err != nil {
			done <- err
			return
		}
		done <- dt.WaitCounter(&c, 1)
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("WaitCounter with a handler that calls Get hung")
	}
	if err := <-errs; err == nil || !strings.Contains(err.Error(), "must not block") {
		t.Fatalf("Get in a handler on a waiter: %v", err)
	}
	if err := dt.Close(); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkRSR0 is the cost of one asynchronous RSR without arguments,
// sent to this process (polled every 32 calls).
func BenchmarkRSR0(b *testing.B) {
	h := d.Register(func(*dmcs.DMCS, int, []uint64, []byte) {})
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := d.RSR(0, h); err != nil {
			b.Fatal(err)
		}
		if i%32 == 31 {
			d.Poll()
		}
	}
	d.Poll()
}

// BenchmarkRSR0Call is the caller's side of BenchmarkRSR0 alone: the
// time of the RSR calls, the polls that serve them left out of the timing.
func BenchmarkRSR0Call(b *testing.B) {
	h := d.Register(func(*dmcs.DMCS, int, []uint64, []byte) {})
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := d.RSR(0, h); err != nil {
			b.Fatal(err)
		}
		if i%256 == 255 {
			b.StopTimer()
			d.Poll()
			b.StartTimer()
		}
	}
	b.StopTimer()
	d.Poll()
}

// BenchmarkIsendCall is plain MPI's part of BenchmarkRSR0Call: an Isend of
// a request header's 64 bytes to this process, receives left out.
func BenchmarkIsendCall(b *testing.B) {
	w := mpi.World()
	buf := make([]byte, 64)
	rb := make([]byte, 64)
	reqs := make([]*mpi.Request, 0, 256)
	drain := func() {
		for range reqs {
			mpi.Recv(w, rb, 0, 1)
		}
		mpi.Waitall(reqs)
		reqs = reqs[:0]
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		q, err := mpi.Isend(w, buf, 0, 1)
		if err != nil {
			b.Fatal(err)
		}
		reqs = append(reqs, q)
		if len(reqs) == 256 {
			b.StopTimer()
			drain()
			b.StartTimer()
		}
	}
	b.StopTimer()
	drain()
}

// BenchmarkIsendSelf is plain MPI's part of BenchmarkRSR0: an Isend of a
// request header's 64 bytes to this process and its receive.
func BenchmarkIsendSelf(b *testing.B) {
	w := mpi.World()
	buf := make([]byte, 64)
	rb := make([]byte, 64)
	reqs := make([]*mpi.Request, 0, 64)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		q, err := mpi.Isend(w, buf, 0, 1)
		if err != nil {
			b.Fatal(err)
		}
		reqs = append(reqs, q)
		if len(reqs) == 32 {
			for range reqs {
				if _, err := mpi.Recv(w, rb, 0, 1); err != nil {
					b.Fatal(err)
				}
			}
			mpi.Waitall(reqs)
			reqs = reqs[:0]
		}
	}
	for range reqs {
		mpi.Recv(w, rb, 0, 1)
	}
	mpi.Waitall(reqs)
}

// runProg runs dmcsprog through mpirun and returns its output.
func runProg(t *testing.T, bins map[string]string, dev string, np int, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	argv := append([]string{"-device", dev, "-np", fmt.Sprint(np), bins["dmcsprog"]}, args...)
	cmd := exec.CommandContext(ctx, bins["mpirun"], argv...)
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("mpirun %v hung:\n%s", argv, out)
	}
	if err != nil {
		var ee *exec.ExitError
		errors.As(err, &ee)
		t.Fatalf("mpirun %v: %v\n%s", argv, err, out)
	}
	return string(out)
}

// wantAll fails t unless out has the line "rank R: <what>" for every rank.
func wantAll(t *testing.T, out string, np int, what string) {
	t.Helper()
	for r := 0; r < np; r++ {
		if !strings.Contains(out, fmt.Sprintf("rank %d: %s", r, what)) {
			t.Fatalf("no %q from rank %d:\n%s", what, r, out)
		}
	}
}

// TestJobs runs, on every device, with explicit polling and with the poll
// thread, over shared memory and MPI messages, with and without a heap
// window: an RSR storm (0–4 arguments, payloads inline and separate) from
// 4 ranks to all, a distributed counter (PutOp, RSR, Get), and a linked
// list malloc'd on the next rank (Malloc, Put, Get, Free).
func TestJobs(t *testing.T) {
	bins := testbuild.Programs(t, "../cmd/mpirun", "./testdata/dmcsprog")
	for _, dev := range adi.Devices() {
		for _, mode := range []string{"poll", "thread", "poll-p2p", "thread-p2p", "poll-heap", "thread-heap", "poll-heap-p2p"} {
			t.Run(dev+"/"+mode, func(t *testing.T) {
				wantAll(t, runProg(t, bins, dev, 4, "storm", mode, "64"), 4, "storm of 256 RSRs ok")
				wantAll(t, runProg(t, bins, dev, 3, "counter", mode, "200"), 3, "counter 600 ok")
				wantAll(t, runProg(t, bins, dev, 3, "list", mode, "20"), 3, "list of 20 nodes ok")
			})
		}
	}
}

// TestStorm16 is the storm from 16 ranks (netvm, poll thread and polling).
func TestStorm16(t *testing.T) {
	bins := testbuild.Programs(t, "../cmd/mpirun", "./testdata/dmcsprog")
	for _, mode := range []string{"poll", "thread"} {
		wantAll(t, runProg(t, bins, "netvm", 16, "storm", mode, "16"), 16, "storm of 256 RSRs ok")
	}
}

// TestApp runs the hash-table application (an RSR per item to the key's
// owner, and its local twin), whose tables must hold every item, and the
// histogram application (remote accumulates into bins spread over the
// ranks) with Options.Timing: the histogram must hold every item, and
// Times must have accounted some of DMCS's own time.
func TestApp(t *testing.T) {
	bins := testbuild.Programs(t, "../cmd/mpirun", "./testdata/dmcsprog")
	for _, v := range []string{"rsr", "local"} {
		for _, mode := range []string{"poll", "thread"} {
			out := runProg(t, bins, "netvm", 3, "app", mode, "3000", "200", v)
			if !strings.Contains(out, "hashapp "+v+": 3000 items x 3 ranks, W=200: ") || !strings.Contains(out, ", CPU ") {
				t.Fatalf("hash app %s %s:\n%s", v, mode, out)
			}
		}
	}
	out := runProg(t, bins, "netvm", 3, "app", "poll", "3000", "200")
	if !strings.Contains(out, "app: 3000 items x 3 ranks in") || strings.Contains(out, "DMCS own 0s") {
		t.Fatalf("app:\n%s", out)
	}
}
