package fm

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/adimpi/adimpi/adi"
	"github.com/adimpi/adimpi/datatype"
	"github.com/adimpi/adimpi/internal/pmi"

	"github.com/adimpi/adimpi/internal/testbuild"
)

// memKVS is a one-process key-value space.
type memKVS map[string]string

func (m memKVS) Put(k, v string) error { m[k] = v; return nil }
func (m memKVS) Barrier() error        { return nil }
func (m memKVS) Get(k string) (string, error) {
	v, ok := m[k]
	if !ok {
		return "", errors.New("no key " + k)
	}
	return v, nil
}

func single(t *testing.T, packet, slots int) *Endpoint {
	t.Helper()
	e, err := New(Config{Rank: 0, Size: 1, KVS: memKVS{}, Packet: packet, Slots: slots})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Release() })
	return e
}

// TestPacketBoundaries sends messages to itself around every packet
// boundary and longer than the whole region (so credits must come back
// while the message is being sent), in pieces of several sizes, and checks
// the number of packets each takes and the bytes the handler gets.
func TestPacketBoundaries(t *testing.T) {
	e := single(t, 128, 4)
	pl := e.Payload()
	var got []byte
	calls, ended := 0, false
	e.SetHandler(3, func(e *Endpoint, s *Stream) {
		calls++
		b := make([]byte, s.Avail())
		e.Receive(s, b)
		got = append(got, b...)
		ended = s.Last()
	})
	for _, n := range []int{0, 1, pl - 1, pl, pl + 1, 2 * pl, 4*pl + 1, 50 * pl} {
		for _, piece := range []int{1, 7, pl, 1000} {
			got, calls, ended = nil, 0, false
			msg := make([]byte, n)
			for i := range msg {
				msg[i] = byte(i*7 + n)
			}
			sent := e.Stats.PacketsSent
			s, err := e.BeginMessage(0, n, 3)
			if err != nil {
				t.Fatal(err)
			}
			for off := 0; off < n; off += piece {
				if err := e.SendPiece(s, msg[off:min(off+piece, n)]); err != nil {
					t.Fatal(err)
				}
			}
			if err := e.EndMessage(s); err != nil {
				t.Fatal(err)
			}
			if err := e.Poll(func() bool { return ended }); err != nil {
				t.Fatal(err)
			}
			wantPk := max(1, (n+pl-1)/pl)
			if calls != wantPk || int(e.Stats.PacketsSent-sent) != wantPk {
				t.Errorf("n=%d piece=%d: %d handler calls, %d packets, want %d", n, piece, calls, e.Stats.PacketsSent-sent, wantPk)
			}
			if !bytes.Equal(got, msg) {
				t.Errorf("n=%d piece=%d: the handler got different bytes", n, piece)
			}
		}
	}
	if e.Credits(0) < 0 || e.Credits(0) > 4 {
		t.Errorf("credits = %d after the run, want 0..4", e.Credits(0))
	}
}

// TestInterleavedStreams checks that handlers of two streams run in packet
// arrival order, each keeping its own place in Ctx.
func TestInterleavedStreams(t *testing.T) {
	e := single(t, 256, 8)
	pl := e.Payload()
	var order []string
	e.SetHandler(1, func(e *Endpoint, s *Stream) {
		name, _ := s.Ctx.(string)
		if name == "" {
			var b [1]byte
			e.Receive(s, b[:])
			name = string(b[:])
			s.Ctx = name
		}
		e.Skip(s, s.Avail())
		order = append(order, fmt.Sprintf("%s%d", name, s.Taken()))
	})
	a, _ := e.BeginMessage(0, 2*pl, 1)
	b, _ := e.BeginMessage(0, pl, 1)
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(e.SendPiece(a, append([]byte("A"), make([]byte, pl-1)...))) // A's first packet, full
	must(e.SendPiece(b, append([]byte("B"), make([]byte, pl-1)...))) // all of B
	must(e.EndMessage(b))
	must(e.SendPiece(a, make([]byte, pl)))
	must(e.EndMessage(a))
	if _, err := e.Extract(); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("[A%d B%d A%d]", pl, pl, 2*pl)
	if fmt.Sprint(order) != want {
		t.Errorf("handler calls %v, want %s", order, want)
	}
}

func TestMisuse(t *testing.T) {
	e := single(t, 0, 0)
	if e.Packet() != DefaultPacket || e.Slots() != DefaultSlots {
		t.Errorf("defaults: packet %d slots %d", e.Packet(), e.Slots())
	}
	s, _ := e.BeginMessage(0, 4, 1)
	if err := e.SendPiece(s, make([]byte, 5)); err == nil {
		t.Error("SendPiece past the length succeeded")
	}
	if err := e.EndMessage(s); err == nil {
		t.Error("EndMessage of a short message succeeded")
	}
	if _, err := e.BeginMessage(1, 4, 1); err == nil {
		t.Error("BeginMessage to rank 1 of 1 succeeded")
	}
	if _, err := e.BeginMessageMulti(nil, 4, 1); err == nil {
		t.Error("BeginMessageMulti to nobody succeeded")
	}
	if _, err := New(Config{Size: 1, KVS: memKVS{}, Packet: 100}); err == nil {
		t.Error("packet=100 accepted")
	}
}

// TestDeviceSelf drives the adi device on one rank: eager and rendezvous
// messages to itself, a strided receive, truncation and a type mismatch;
// rendezvous data by remote writes (contiguous and scattered) and, with
// remote=0, by packets.
func TestDeviceSelf(t *testing.T) {
	for _, c := range []struct{ remote, bulk, path string }{
		{"1", "64", "remote"}, {"0", "64", "bulk"}, {"0", "0", "packets"},
		{"1", "64", "nowrite"}, // buffers offered, but process_vm_writev is not permitted
	} {
		t.Run(c.path, func(t *testing.T) { testDeviceSelf(t, c.remote, c.bulk, c.path) })
	}
}

func testDeviceSelf(t *testing.T, remote, bulk, path string) {
	d := new(Device)
	if err := d.Init(adi.Config{Rank: 0, Size: 1, KVS: memKVS{}, Options: map[string]string{"rndv": "1000", "packet": "256", "slots": "4", "remote": remote, "minblock": "8", "bulk": bulk, "bslots": "3"}}); err != nil {
		t.Fatal(err)
	}
	defer d.Finalize()
	if path == "nowrite" {
		d.e.peers[0].remote = false
		path = "bulk"
	}
	wait := func(rs ...*adi.Request) {
		for i := 0; ; i++ {
			if _, err := d.Progress(); err != nil {
				t.Fatal(err)
			}
			done := true
			for _, r := range rs {
				done = done && r.Done()
			}
			if done {
				return
			}
			if i > 1e6 {
				t.Fatal("requests did not complete")
			}
		}
	}
	vec, _ := datatype.Vector(100, 8, 20, datatype.Byte)
	vec.Commit()
	for _, n := range []int{0, 5, 800, 999, 1000, 1001, 5000} {
		for _, mode := range []adi.Mode{adi.ModeStandard, adi.ModeSync} {
			msg := make([]byte, n)
			for i := range msg {
				msg[i] = byte(i + n)
			}
			got := make([]byte, n)
			s := &adi.Request{Op: adi.OpSend, Mode: mode, Context: 4, Peer: 0, Tag: n, Buf: adi.Bytes(msg)}
			r := &adi.Request{Op: adi.OpRecv, Context: 4, Peer: adi.AnySource, Tag: n, Buf: adi.Bytes(got)}
			if n%2 == 0 { // receive posted first, or after the send
				d.Irecv(r)
				d.Isend(s)
			} else {
				d.Isend(s)
				d.Progress()
				d.Irecv(r)
			}
			wait(s, r)
			if r.Status.Err != nil || r.Status.Bytes != n || !bytes.Equal(got, msg) {
				t.Errorf("n=%d mode=%d: status %+v, data equal %v", n, mode, r.Status, bytes.Equal(got, msg))
			}
		}
	}
	// Strided receive of 800 packed bytes, then a truncated one, eager
	// (standard mode) and by rendezvous (synchronous mode).
	msg := make([]byte, 900)
	for i := range msg {
		msg[i] = byte(i)
	}
	for _, n := range []int{800, 900, -800, -900} {
		mode := adi.ModeStandard
		if n < 0 {
			n, mode = -n, adi.ModeSync
		}
		mem := make([]byte, vec.Span(1)+10)
		s := &adi.Request{Op: adi.OpSend, Mode: mode, Context: 4, Peer: 0, Tag: 1, Buf: adi.Bytes(msg[:n])}
		r := &adi.Request{Op: adi.OpRecv, Context: 4, Peer: 0, Tag: 1, Buf: adi.Buffer{Mem: mem, Count: 1, Type: vec}}
		d.Irecv(r)
		d.Isend(s)
		wait(s, r)
		if n == 900 && !errors.Is(r.Status.Err, adi.ErrTruncate) {
			t.Errorf("900 bytes into 800: %v, want ErrTruncate", r.Status.Err)
		}
		if n == 800 && r.Status.Err != nil {
			t.Errorf("800 bytes into 800: %v", r.Status.Err)
		}
		for i, b := range mem {
			want := byte(0)
			if i%20 < 8 && i < vec.Span(1) {
				want = byte(i/20*8 + i%20)
			}
			if b != want {
				t.Fatalf("n=%d: byte %d of the strided buffer is %d, want %d", n, i, b, want)
			}
		}
	}
	// Type mismatch: int32 sent, float64 received.
	i32 := make([]byte, 64)
	s := &adi.Request{Op: adi.OpSend, Context: 4, Peer: 0, Tag: 2, Buf: adi.Buffer{Mem: i32, Count: 16, Type: datatype.Int32}}
	r := &adi.Request{Op: adi.OpRecv, Context: 4, Peer: 0, Tag: 2, Buf: adi.Buffer{Mem: make([]byte, 64), Count: 8, Type: datatype.Float64}}
	d.Isend(s)
	d.Irecv(r)
	wait(s, r)
	if !errors.Is(r.Status.Err, adi.ErrType) {
		t.Errorf("mismatched types: %v, want ErrType", r.Status.Err)
	}
	c := d.Counters()
	for _, k := range []string{"posted_receives", "unexpected_messages", "rendezvous_sends", "rendezvous_receives", "backlog"} {
		if c[k] != 0 {
			t.Errorf("counter %s = %d, want 0", k, c[k])
		}
	}
	for k, p := range map[string]string{"remote_writes": "remote", "remote_scatters": "remote", "bulk_messages": "bulk"} {
		if (c[k] > 0) != (p == path) {
			t.Errorf("%s: counter %s = %d", path, k, c[k])
		}
	}
}

// TestMultiProcess runs the standalone API (flood through tiny regions,
// multidestination streams), the device's IsendMulti, and the example
// program through mpirun.
func TestMultiProcess(t *testing.T) {
	bins := testbuild.Programs(t, "../../cmd/mpirun", "./testdata/fmprog", "./example")
	for _, c := range []struct {
		np   int
		args []string
		want string
	}{
		{1, []string{bins["fmprog"], "flood"}, "ok flood np=1"},
		{2, []string{bins["fmprog"], "flood"}, "ok flood np=2"},
		{5, []string{bins["fmprog"], "flood"}, "ok flood np=5"},
		{2, []string{bins["fmprog"], "multi"}, "ok multi np=2"},
		{4, []string{bins["fmprog"], "multi"}, "ok multi np=4"},
		{3, []string{bins["fmprog"], "rndv", "bulk"}, "ok rndv bulk np=3"},
		{3, []string{bins["fmprog"], "rndv", "remote"}, "ok rndv remote np=3"},
		{2, []string{bins["fmprog"], "rndv", "packets"}, "ok rndv packets np=2"},
		{4, []string{bins["example"]}, "every array of 10000 values arrived intact"},
	} {
		args := append([]string{"-np", fmt.Sprint(c.np), "-timeout", "120s"}, c.args...)
		out, err := exec.Command(bins["mpirun"], args...).CombinedOutput()
		if err != nil || !strings.Contains(string(out), c.want) {
			t.Errorf("mpirun %v: %v, want output containing %q:\n%s", args, err, c.want, out)
		}
	}
}

// TestDeviceClaimWhileArriving posts receives for eager messages that
// started arriving unexpected and are still coming in (the region holds 4
// packets of a 40-packet message): the receive gets the whole message,
// truncated or refused for a type mismatch as MPI says.
func TestDeviceClaimWhileArriving(t *testing.T) {
	d := new(Device)
	if err := d.Init(adi.Config{Rank: 0, Size: 1, KVS: memKVS{}, Options: map[string]string{"rndv": "100000", "packet": "256", "slots": "4"}}); err != nil {
		t.Fatal(err)
	}
	defer d.Finalize()
	n := 40 * d.e.Payload()
	msg := make([]byte, n)
	for i := range msg {
		msg[i] = byte(i * 3)
	}
	for _, c := range []struct {
		capacity int
		typ      *datatype.Type
		want     error
	}{{n, datatype.Byte, nil}, {n / 2, datatype.Byte, adi.ErrTruncate}, {n / 8, datatype.Float64, adi.ErrType}} {
		s := &adi.Request{Op: adi.OpSend, Context: 4, Peer: 0, Tag: 9, Buf: adi.Buffer{Mem: msg, Count: n / 8, Type: datatype.Int64}}
		if err := d.Isend(s); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 3; i++ {
			d.Progress()
		}
		if s.Done() || d.Counters()["unexpected_messages"] != 1 {
			t.Fatalf("the message should be half way: send done %v, counters %v", s.Done(), d.Counters())
		}
		got := make([]byte, c.capacity)
		r := &adi.Request{Op: adi.OpRecv, Context: 4, Peer: 0, Tag: 9, Buf: adi.Buffer{Mem: got, Count: c.capacity / c.typ.Size(), Type: c.typ}}
		if err := d.Irecv(r); err != nil {
			t.Fatal(err)
		}
		for i := 0; !(s.Done() && r.Done()); i++ {
			if _, err := d.Progress(); err != nil || i > 1e6 {
				t.Fatalf("progress: %v after %d passes", err, i)
			}
		}
		if !errors.Is(r.Status.Err, c.want) && !(c.want == nil && r.Status.Err == nil) {
			t.Errorf("capacity %d %s: status %+v, want %v", c.capacity, c.typ, r.Status, c.want)
		}
		wantData := msg[:c.capacity]
		if c.want == adi.ErrType {
			wantData = make([]byte, c.capacity)
		}
		if !bytes.Equal(got, wantData) {
			t.Errorf("capacity %d %s: wrong data", c.capacity, c.typ)
		}
		if cnt := d.Counters(); cnt["unexpected_messages"] != 0 || cnt["backlog"] != 0 || len(d.unexp) != 0 {
			t.Errorf("left over: %v, %d partial messages", cnt, len(d.unexp))
		}
	}
}

// TestMultiDie starts 4 ranks of fmprog multidie under an in-test PMI
// server (mpirun would stop the job as soon as one rank exits): the last
// rank exits right after wire-up, rank 0's multidestination send of 1 MiB
// (ten regions' worth) still reaches ranks 1 and 2 and completes with
// ErrOther.
func TestMultiDie(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "fmprog")
	if b, err := exec.Command("go", "build", "-o", bin, "./testdata/fmprog").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	const np = 4
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	srv := pmi.NewServer(np, "fmtest")
	go srv.ServeListener(l)
	var cmds []*exec.Cmd
	var outs []*bytes.Buffer
	for i := 0; i < np; i++ {
		cmd := exec.Command(bin, "multidie")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		cmd.Env = append(os.Environ(), pmi.EnvPort+"="+l.Addr().String(), fmt.Sprintf("%s=%d", pmi.EnvID, i))
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds, outs = append(cmds, cmd), append(outs, &out)
	}
	// Reap every rank as soon as it exits (as mpirun does): a zombie
	// still counts as alive.
	errs := make([]chan error, np)
	for i, cmd := range cmds {
		errs[i] = make(chan error, 1)
		go func() { errs[i] <- cmd.Wait() }()
	}
	for i := range cmds {
		err := <-errs[i]
		if err != nil || (i < np-1 && !strings.Contains(outs[i].String(), fmt.Sprintf("ok multidie rank %d", i))) {
			t.Errorf("rank %d: %v\n%s", i, err, outs[i])
		}
	}
}

// TestSendShort checks the one-packet send: the handler sees an ordinary
// one-packet stream holding both pieces; it refuses, sending nothing, a
// message longer than a packet's payload, a send with no credit left, and
// a send while a stream to the same destination holds a half-filled
// packet; and the packets it refused are not lost to the credit count.
func TestSendShort(t *testing.T) {
	e := single(t, 128, 4)
	pl := e.Payload()
	var got [][]byte
	e.SetHandler(2, func(e *Endpoint, s *Stream) {
		if !s.Last() || s.Taken() != 0 || s.Len() != s.Avail() {
			t.Errorf("short message arrived as a stream of %d bytes, %d in this packet, last=%v", s.Len(), s.Avail(), s.Last())
		}
		b := make([]byte, s.Avail())
		e.Receive(s, b)
		got = append(got, b)
	})
	if !e.SendShort(0, 2, []byte("head:"), []byte("body")) {
		t.Fatal("SendShort refused a small message with credits available")
	}
	if !e.SendShort(0, 2, nil, nil) {
		t.Fatal("SendShort refused an empty message")
	}
	if e.SendShort(0, 2, make([]byte, pl-3), make([]byte, 4)) {
		t.Fatalf("SendShort took %d bytes, more than the %d-byte payload", pl+1, pl)
	}
	if !e.SendShort(0, 2, make([]byte, pl-4), make([]byte, 4)) {
		t.Fatal("SendShort refused a message of exactly one payload")
	}
	if err := e.Poll(func() bool { return len(got) == 3 }); err != nil {
		t.Fatal(err)
	}
	if string(got[0]) != "head:body" || len(got[1]) != 0 || len(got[2]) != pl {
		t.Fatalf("handler got %q, %d and %d bytes", got[0], len(got[1]), len(got[2]))
	}
	// Fill the region without extracting: the fifth send finds no credit.
	got = nil
	for i := 0; i < e.Slots(); i++ {
		if !e.SendShort(0, 2, []byte{byte(i)}, nil) {
			t.Fatalf("send %d of %d refused with credits left", i, e.Slots())
		}
	}
	if e.SendShort(0, 2, []byte{9}, nil) {
		t.Fatal("SendShort sent with no credit left")
	}
	if err := e.Poll(func() bool { return len(got) == e.Slots() }); err != nil {
		t.Fatal(err)
	}
	for i, b := range got {
		if len(b) != 1 || b[0] != byte(i) {
			t.Fatalf("message %d arrived as %v", i, b)
		}
	}
	// A stream half way through a packet to the same destination.
	s, err := e.BeginMessage(0, 10, 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.SendPiece(s, make([]byte, 5)); err != nil {
		t.Fatal(err)
	}
	if e.SendShort(0, 2, []byte{1}, nil) {
		t.Fatal("SendShort cut into a half-filled packet of another stream")
	}
	if err := e.SendPiece(s, make([]byte, 5)); err != nil {
		t.Fatal(err)
	}
	if err := e.EndMessage(s); err != nil {
		t.Fatal(err)
	}
	if !e.SendShort(0, 2, []byte{1}, nil) {
		t.Fatal("SendShort refused after the stream ended")
	}
}

// TestDeviceSendShort checks MPI's short send over FM (adi.ShortSender) and
// the handler's one-packet path: it refuses what does not fit one packet or
// has no credit, never overtakes a message queued before it, and the
// receiver gets every message whole and in order, expected or not, with
// truncation reported.
func TestDeviceSendShort(t *testing.T) {
	d := new(Device)
	if err := d.Init(adi.Config{Rank: 0, Size: 1, KVS: memKVS{}, Options: map[string]string{"packet": "256", "slots": "4"}}); err != nil {
		t.Fatal(err)
	}
	defer d.Finalize()
	sig := datatype.Byte.Signature()
	room := d.e.Payload() - mpiHeader
	if d.SendShort(4, 0, 0, sig, make([]byte, room+1)) {
		t.Fatalf("SendShort took %d bytes, more than one packet's %d", room+1, room)
	}
	msg := func(tag int) []byte { return []byte{byte(tag), byte(tag + 1), byte(tag + 2)} }
	tag := 0
	for ; d.SendShort(4, 0, tag, sig, msg(tag)); tag++ {
		if tag > d.e.Slots() {
			t.Fatal("SendShort kept sending without credits")
		}
	}
	if tag != d.e.Slots() {
		t.Fatalf("SendShort sent %d messages with %d credits", tag, d.e.Slots())
	}
	// The core's fallback queues the refused message; a short send after
	// it must wait behind it.
	queued := &adi.Request{Op: adi.OpSend, Context: 4, Peer: 0, Tag: tag, Buf: adi.Bytes(msg(tag))}
	if err := d.Isend(queued); err != nil {
		t.Fatal(err)
	}
	// Extract alone takes the packets in (as unexpected messages) and
	// returns their credits, but leaves the queue as it is.
	if _, err := d.e.Extract(); err != nil {
		t.Fatal(err)
	}
	if d.e.Credits(0) == 0 {
		t.Fatal("no credit came back after the region was extracted")
	}
	if d.SendShort(4, 0, tag+1, sig, msg(tag+1)) {
		t.Fatal("SendShort overtook a message queued before it")
	}
	recv := func(want int) {
		t.Helper()
		got := make([]byte, 8)
		r := &adi.Request{Op: adi.OpRecv, Context: 4, Peer: 0, Tag: adi.AnyTag, Buf: adi.Bytes(got)}
		if err := d.Irecv(r); err != nil {
			t.Fatal(err)
		}
		for i := 0; !r.Done(); i++ {
			if _, err := d.Progress(); err != nil || i > 1e6 {
				t.Fatalf("message %d: progress %v after %d polls", want, err, i)
			}
		}
		if r.Status.Err != nil || r.Status.Tag != want || r.Status.Bytes != 3 || !bytes.Equal(got[:3], msg(want)) {
			t.Fatalf("receive %d: status %+v, data %v", want, r.Status, got[:3])
		}
	}
	for want := 0; want <= tag; want++ {
		recv(want)
	}
	if !queued.Done() {
		t.Fatal("the queued send did not complete")
	}
	if !d.SendShort(4, 0, tag+1, sig, msg(tag+1)) {
		t.Fatal("SendShort refused with the queue drained and credits back")
	}
	recv(tag + 1)
	// A one-packet message into a shorter buffer: the first bytes, and
	// ErrTruncate.
	if !d.SendShort(4, 0, 9, sig, []byte("0123456789")) {
		t.Fatal("SendShort refused a small message with credits back")
	}
	got := make([]byte, 4)
	r := &adi.Request{Op: adi.OpRecv, Context: 4, Peer: 0, Tag: 9, Buf: adi.Bytes(got)}
	d.Irecv(r)
	for i := 0; !r.Done(); i++ {
		if _, err := d.Progress(); err != nil || i > 1e6 {
			t.Fatalf("truncated receive: progress %v after %d polls", err, i)
		}
	}
	if !errors.Is(r.Status.Err, adi.ErrTruncate) || r.Status.Bytes != 4 || string(got) != "0123" {
		t.Fatalf("10 bytes into 4: status %+v, data %q", r.Status, got)
	}
}
