package fm

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/adimpi/adimpi/adi"
	"github.com/adimpi/adimpi/adi/aditest"
	"github.com/adimpi/adimpi/internal/testkvs"
	"github.com/adimpi/adimpi/internal/wire"
)

// onHosts is the fm device with its ranks placed on pretend hosts, rank r
// on host r%2, so that in the suite's 3-rank jobs ranks 0 and 2 share
// memory and rank 1 is reached over the wire (on loopback): every check
// then runs over both paths, and the dead peer, on another host, is found
// by its broken connection.
type onHosts struct{ *Device }

func (d onHosts) Init(cfg adi.Config) error {
	cfg.Hosts = make([]int, cfg.Size)
	for r := range cfg.Hosts {
		cfg.Hosts[r] = r % 2
	}
	return d.Device.Init(cfg)
}

func crossHostConfig(t *testing.T, opts map[string]string) aditest.Config {
	t.Setenv(wire.EnvAddr, "127.0.0.1")
	return aditest.Config{Name: "fm", New: func() adi.Device { return onHosts{new(Device)} }, Options: opts}
}

// TestADICrossHost runs the ADI contract suite with a rank on another host,
// with the default options (bulk lane frames) and with small packets and
// few credits, the bulk lane off and remote=1 (kWrite frames the receiving
// side writes).
func TestADICrossHost(t *testing.T) {
	aditest.Run(t, crossHostConfig(t, nil))
}

func TestADICrossHostRemoteNoBulk(t *testing.T) {
	aditest.Run(t, crossHostConfig(t, map[string]string{"packet": "256", "slots": "4", "bulk": "0", "remote": "1", "minblock": "8"}))
}

func TestADICrossHostRemote(t *testing.T) {
	aditest.Run(t, crossHostConfig(t, map[string]string{"remote": "1", "minblock": "0", "bslots": "2"}))
}

// endpointsOn wires up one endpoint per entry of hosts (rank r on host
// hosts[r]) in this process, peers on other hosts over loopback.
func endpointsOn(t *testing.T, hosts []int, packet, slots int) []*Endpoint {
	t.Helper()
	t.Setenv(wire.EnvAddr, "127.0.0.1")
	t.Setenv(wire.EnvSecret, strings.Repeat("ab", 32))
	kvs := testkvs.New(len(hosts))
	es := make([]*Endpoint, len(hosts))
	errs := make([]error, len(hosts))
	var wg sync.WaitGroup
	for r := range hosts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			es[r], errs[r] = New(Config{Rank: r, Size: len(hosts), KVS: kvs, Packet: packet, Slots: slots, Name: "fmx", Hosts: hosts})
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	t.Cleanup(func() {
		for _, e := range es {
			e.Release()
		}
	})
	return es
}

// TestCreditsAcrossHosts floods a peer on another host through FM's own
// API with 4 credits: the sender must wait for credits (the receiver's
// region never holds more than its 4 packets: a packet without a credit is
// a protocol error there), the receiver, with no traffic back, returns them
// in credit frames, and every byte arrives in order.
func TestCreditsAcrossHosts(t *testing.T) {
	es := endpointsOn(t, []int{0, 1}, 256, 4)
	const msgs, size = 50, 1000
	var got bytes.Buffer
	done := 0
	es[1].SetHandler(2, func(e *Endpoint, s *Stream) {
		buf := make([]byte, s.Avail())
		e.Receive(s, buf)
		got.Write(buf)
		if s.Last() {
			done++
		}
	})
	recvErr := make(chan error, 1)
	go func() { recvErr <- es[1].Poll(func() bool { return done == msgs }) }()
	var want bytes.Buffer
	for i := 0; i < msgs; i++ {
		msg := bytes.Repeat([]byte{byte(i)}, size)
		want.Write(msg)
		s, err := es[0].BeginMessage(1, size, 2)
		if err != nil {
			t.Fatal(err)
		}
		if err := es[0].SendPiece(s, msg[:300]); err != nil {
			t.Fatal(err)
		}
		if err := es[0].SendPiece(s, msg[300:]); err != nil {
			t.Fatal(err)
		}
		if err := es[0].EndMessage(s); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-recvErr; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), want.Bytes()) {
		t.Fatalf("received %d bytes, not the %d sent in order", got.Len(), want.Len())
	}
	if es[0].Stats.CreditWaits == 0 {
		t.Error("the sender never waited for credits: it did not obey them")
	}
	if es[1].Stats.ExplicitReturns == 0 {
		t.Error("the receiver returned no credit frame")
	}
	if c := es[0].net.Counters(); c.FramesOut == 0 {
		t.Errorf("no frame went out: %+v", c)
	}
}

// TestMultiAcrossHosts sends a multidestination stream to a peer on this
// host and one on another: both get the message.
func TestMultiAcrossHosts(t *testing.T) {
	es := endpointsOn(t, []int{0, 1, 0}, 0, 0)
	msg := bytes.Repeat([]byte("multi"), 1000)
	got := make([][]byte, 3)
	for r := 1; r < 3; r++ {
		es[r].SetHandler(3, func(e *Endpoint, s *Stream) {
			buf := make([]byte, s.Avail())
			e.Receive(s, buf)
			got[r] = append(got[r], buf...)
		})
	}
	errs := make(chan error, 2)
	for r := 1; r < 3; r++ {
		go func() { errs <- es[r].Poll(func() bool { return len(got[r]) == len(msg) }) }()
	}
	s, err := es[0].BeginMessageMulti([]int{1, 2}, len(msg), 3)
	if err != nil {
		t.Fatal(err)
	}
	if err := es[0].SendPiece(s, msg); err != nil {
		t.Fatal(err)
	}
	if err := es[0].EndMessage(s); err != nil {
		t.Fatal(err)
	}
	before := es[0].net.Counters().FramesOut
	for r := 1; r < 3; r++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for r := 1; r < 3; r++ {
		if !bytes.Equal(got[r], msg) {
			t.Errorf("rank %d got %d bytes, not the message", r, len(got[r]))
		}
	}
	if before == 0 || !es[0].Remote(1) || es[0].Remote(2) {
		t.Errorf("frames out %d, remote(1) %v, remote(2) %v: want frames to rank 1 only", before, es[0].Remote(1), es[0].Remote(2))
	}
}

// TestPingPongAcrossHosts bounces messages of several sizes between two
// ranks on different hosts through FM's own API, as cmd/fmbench does.
func TestPingPongAcrossHosts(t *testing.T) {
	es := endpointsOn(t, []int{0, 1}, 0, 0)
	arrived := make([]int, 2)
	for r := range es {
		es[r].SetHandler(2, func(e *Endpoint, s *Stream) {
			e.Skip(s, s.Avail())
			if s.Last() {
				arrived[r]++
			}
		})
	}
	errs := make(chan error, 2)
	for r := range es {
		go func() {
			e, peer := es[r], 1-r
			for _, n := range []int{0, 8, 1513, 4096, 65536} {
				buf := make([]byte, n)
				for i := 0; i < 100; i++ {
					if r == 1 {
						want := arrived[r] + 1
						if err := e.Poll(func() bool { return arrived[r] >= want }, peer); err != nil {
							errs <- err
							return
						}
					}
					s, err := e.BeginMessage(peer, n, 2)
					if err == nil {
						err = e.SendPiece(s, buf)
					}
					if err == nil {
						err = e.EndMessage(s)
					}
					if err != nil {
						errs <- err
						return
					}
					if r == 0 {
						want := arrived[r] + 1
						if err := e.Poll(func() bool { return arrived[r] >= want }, peer); err != nil {
							errs <- err
							return
						}
					}
				}
			}
			errs <- nil
		}()
	}
	for range es {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// TestSleepWakeAcrossHosts is a ping-pong of 8-byte messages between
// endpoints on two hosts in which each waiter goes to sleep at once: every
// message must wake its receiver, never leave it to sleep until its
// timeout, and, as neither has a peer on its own host, the wire must wake
// the sleeping thread itself (wire.DirectSleeper: the endpoint counts the
// sleep as Woken) rather than through a goroutine that rings the doorbell
// (counted as Relayed), a wake-up chain that costs two more thread
// wake-ups per message. A round trip that waits for a timer shows up as a
// Sleep that returns with neither count moved.
func TestSleepWakeAcrossHosts(t *testing.T) {
	es := endpointsOn(t, []int{0, 1}, 0, 0)
	const rounds = 200
	arrived := make([]int, 2)
	for r := range es {
		es[r].SetHandler(2, func(e *Endpoint, s *Stream) {
			e.Skip(s, s.Avail())
			if s.Last() {
				arrived[r]++
			}
		})
	}
	// wait extracts until want messages arrived, sleeping between passes
	// with a timeout no round trip needs; a Sleep that returns with the
	// doorbell unmoved waited for that timeout.
	wait := func(r, want int) error {
		e := es[r]
		for {
			seq := e.Seq()
			if _, err := e.Extract(); err != nil {
				return err
			}
			if arrived[r] >= want {
				return nil
			}
			before := e.net.Counters()
			t0 := time.Now()
			e.Sleep(seq, time.Second)
			slept := time.Since(t0)
			after := e.net.Counters()
			if after.Relayed != before.Relayed {
				return fmt.Errorf("rank %d: a receive was woken through a relay goroutine, not by the wire (message %d)", r, want)
			}
			// A Sleep may also return early with nothing moved (a signal
			// interrupts the wait: Go preempts threads with SIGURG); only
			// one that lasted its timeout missed a wake-up.
			if e.Seq() == seq && after.Woken == before.Woken && slept >= time.Second/2 {
				return fmt.Errorf("rank %d: a receive slept until its 1 s timeout (message %d)", r, want)
			}
		}
	}
	errs := make(chan error, 2)
	for r := range es {
		go func() {
			e, peer := es[r], 1-r
			buf := make([]byte, 8)
			for i := 1; i <= rounds; i++ {
				if r == 1 {
					if err := wait(r, i); err != nil {
						errs <- err
						return
					}
				}
				if !e.SendShort(peer, 2, buf, nil) {
					// Until its connection is up, a message goes
					// as a stream (the device's fallback too).
					s, err := e.BeginMessage(peer, len(buf), 2)
					if err == nil {
						err = e.SendPiece(s, buf)
					}
					if err == nil {
						err = e.EndMessage(s)
					}
					if err != nil {
						errs <- err
						return
					}
				}
				if r == 0 {
					if err := wait(r, i); err != nil {
						errs <- err
						return
					}
				}
			}
			errs <- nil
		}()
	}
	// Both goroutines end (a partner gone makes the other's wait time
	// out) before the endpoints are closed under them.
	var failed []error
	for range es {
		if err := <-errs; err != nil {
			failed = append(failed, err)
		}
	}
	if len(failed) > 0 {
		t.Fatal(errors.Join(failed...))
	}
}
