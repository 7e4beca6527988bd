package netvm

import (
	"bytes"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/adimpi/adimpi/adi"
	"github.com/adimpi/adimpi/datatype"
	"github.com/adimpi/adimpi/internal/testkvs"
	"github.com/adimpi/adimpi/internal/wire"
)

// twoHosts starts two devices in this process that take each other for
// ranks on other hosts (adi.Config.Hosts), so that they talk over the wire
// on loopback.
func twoHosts(t *testing.T, opts map[string]string) [2]*Device {
	t.Helper()
	t.Setenv(wire.EnvAddr, "127.0.0.1")
	t.Setenv(wire.EnvSecret, "00112233445566778899aabbccddeeff")
	k := testkvs.New(2)
	var ds [2]*Device
	var errs [2]error
	var wg sync.WaitGroup
	for r := range ds {
		ds[r] = new(Device)
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = ds[r].Init(adi.Config{Rank: r, Size: 2, KVS: k, Options: opts, Hosts: []int{0, 1}})
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: Init: %v", r, err)
		}
		d := ds[r]
		t.Cleanup(func() { d.Finalize() })
	}
	if ds[0].peers[1].net == nil || ds[1].peers[0].net == nil {
		t.Fatal("the devices did not take each other for ranks on another host")
	}
	return ds
}

// progressUntil drives both devices until done reports true.
func progressUntil(t *testing.T, ds [2]*Device, what string, done func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !done() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		for _, d := range ds {
			if _, err := d.Progress(); err != nil {
				t.Fatalf("rank %d: Progress: %v", d.rank, err)
			}
		}
	}
}

// TestSendCompletesWhenSent: a send to a peer on another host is not
// complete while its frame waits in the endpoint (here, behind the
// connection's handshake), since a rank whose sends are complete may stop
// polling (as in MPI_Finalize's key-value barrier) and the frame would
// never leave. It completes once the frame is out, and arrives.
func TestSendCompletesWhenSent(t *testing.T) {
	ds := twoHosts(t, nil)
	recv := &adi.Request{Op: adi.OpRecv, Context: 1, Peer: 0, Tag: 5, Buf: adi.Bytes(make([]byte, 3))}
	if err := ds[1].Irecv(recv); err != nil {
		t.Fatal(err)
	}
	send := &adi.Request{Op: adi.OpSend, Context: 1, Peer: 1, Tag: 5, Buf: adi.Bytes([]byte("abc"))}
	if err := ds[0].Isend(send); err != nil {
		t.Fatal(err)
	}
	if send.Done() {
		t.Fatal("the send completed while its frame waited for the connection's handshake")
	}
	progressUntil(t, ds, "the send and the receive", func() bool { return send.Done() && recv.Done() })
	if err := recv.Status.Err; err != nil || string(recv.Buf.Mem) != "abc" {
		t.Fatalf("received %q, %v", recv.Buf.Mem, err)
	}
}

// TestRendezvousAcrossHosts: large messages, into a contiguous buffer (read
// straight into it by the endpoint) and into a non-contiguous one
// (unpacked), under both protocols, arrive intact.
func TestRendezvousAcrossHosts(t *testing.T) {
	for _, eager := range []string{"16384", "0"} {
		t.Run("eager="+eager, func(t *testing.T) {
			ds := twoHosts(t, map[string]string{"eager": eager})
			const n = 3<<20 + 12345
			data := make([]byte, n)
			for i := range data {
				data[i] = byte(i*7 + i>>13)
			}
			got := make([]byte, n)
			recv := &adi.Request{Op: adi.OpRecv, Context: 1, Peer: 0, Tag: 1, Buf: adi.Bytes(got)}
			send := &adi.Request{Op: adi.OpSend, Context: 1, Peer: 1, Tag: 1, Buf: adi.Bytes(data)}
			if err := ds[1].Irecv(recv); err != nil {
				t.Fatal(err)
			}
			if err := ds[0].Isend(send); err != nil {
				t.Fatal(err)
			}
			progressUntil(t, ds, "the message", func() bool { return send.Done() && recv.Done() })
			if recv.Status.Err != nil || !bytes.Equal(got, data) {
				t.Fatalf("contiguous receive: %v, intact %v", recv.Status.Err, bytes.Equal(got, data))
			}
			if c := ds[1].ep.Counters(); c.Placed == 0 {
				t.Fatalf("no chunk was read straight into the receive buffer: %+v", c)
			}
			// The same bytes into every other KiB of a buffer twice as large.
			ty, err := datatype.Vector(n/1024, 1024, 2048, datatype.Byte)
			if err != nil {
				t.Fatal(err)
			}
			if err := ty.Commit(); err != nil {
				t.Fatal(err)
			}
			strided := make([]byte, 2*n)
			recv = &adi.Request{Op: adi.OpRecv, Context: 1, Peer: 0, Tag: 2, Buf: adi.Buffer{Mem: strided, Count: 1, Type: ty}}
			m := n / 1024 * 1024
			send = &adi.Request{Op: adi.OpSend, Context: 1, Peer: 1, Tag: 2, Buf: adi.Bytes(data[:m])}
			if err := ds[1].Irecv(recv); err != nil {
				t.Fatal(err)
			}
			if err := ds[0].Isend(send); err != nil {
				t.Fatal(err)
			}
			progressUntil(t, ds, "the strided message", func() bool { return send.Done() && recv.Done() })
			if recv.Status.Err != nil {
				t.Fatal(recv.Status.Err)
			}
			for b := 0; b < m/1024; b++ {
				if !bytes.Equal(strided[b*2048:b*2048+1024], data[b*1024:(b+1)*1024]) {
					t.Fatalf("strided receive: block %d differs", b)
				}
			}
		})
	}
}

// TestLostHostFailsItsRequests: once the connection to a peer on another
// host breaks (wire.Handler's Lost), and the loss is liveness.Interval old,
// Progress fails the receive that waited on the peer and ends the job with
// the same error, naming the rank, its host and the cause, once; later
// operations towards the peer fail at once, naming its host.
func TestLostHostFailsItsRequests(t *testing.T) {
	ds := twoHosts(t, nil)
	d := ds[1]
	recv := &adi.Request{Op: adi.OpRecv, Context: 1, Peer: 0, Tag: 5, Buf: adi.Bytes(make([]byte, 3))}
	if err := d.Irecv(recv); err != nil {
		t.Fatal(err)
	}
	d.Lost(0, errors.New("connection reset by the test"))
	var ended error
	for deadline := time.Now().Add(30 * time.Second); ended == nil; {
		if time.Now().After(deadline) {
			t.Fatal("the lost peer was never reported")
		}
		_, ended = d.Progress()
	}
	for _, want := range []string{"rank 0 on host", "unreachable", "connection reset by the test"} {
		if !strings.Contains(ended.Error(), want) {
			t.Errorf("Progress: %v, does not say %q", ended, want)
		}
	}
	if !recv.Done() || recv.Status.Err != ended {
		t.Errorf("the pending receive: done %v, error %v; want %v", recv.Done(), recv.Status.Err, ended)
	}
	if _, err := d.Progress(); err != nil {
		t.Errorf("the loss was reported twice: %v", err)
	}
	send := &adi.Request{Op: adi.OpSend, Context: 1, Peer: 0, Tag: 5, Buf: adi.Bytes([]byte("abc"))}
	if err := d.Isend(send); err == nil || !strings.Contains(err.Error(), "rank 0 (on host") {
		t.Errorf("Isend to the lost peer: %v, want an error naming its host", err)
	}
	if d.SendShort(1, 0, 5, 0, []byte("x")) {
		t.Error("SendShort to the lost peer succeeded")
	}
}
