package wire

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/adimpi/adimpi/internal/reliable"
	"github.com/adimpi/adimpi/internal/xdpprog"
	"github.com/adimpi/adimpi/internal/xsk"
)

// The XDP wire: frames between ranks on different hosts travel as Ethernet
// frames through an AF_XDP socket (package xsk) that an XDP program
// (package xdpprog) feeds, made reliable by package reliable. It sits
// beside the TCP wire in the same Endpoint, so a device sees one API: Send
// picks, per peer, the XDP wire when both ends have it and TCP otherwise;
// Poll, Pending, Wait and Close serve both.
//
// One rank per host, the lowest, takes the XDP wire: an AF_XDP socket
// binds one queue of an interface and the simulated cluster's veth links
// have one, and an interface carries one XDP program. The host's other
// ranks reach remote ranks over TCP (their same-host peers over shared
// memory, as always).

// Environment variables of the XDP wire, set by the launcher (mpirun -wire).
const (
	// EnvWire chooses the wire between hosts: "tcp" (the default) or "xdp".
	EnvWire = "ADIMPI_WIRE"
	// EnvXDPTimeout is how long a peer may leave frames unacknowledged on
	// the XDP wire before it is reported lost (a Go duration; default
	// xdpDeadAfter).
	EnvXDPTimeout = "ADIMPI_XDP_TIMEOUT"
	// EnvXDPTag chooses what each frame's tag covers on the XDP wire:
	// "header" (the default: the header, as the TCP wire authenticates its
	// connection and not each byte) or "frame" (the payload too).
	EnvXDPTag = "ADIMPI_XDP_TAG"
	// EnvXDPMode chooses where the XDP program runs: "generic" (the
	// default: on the kernel's socket buffer, which every interface
	// offers) or "native" (in the driver, where it supports XDP; on veth
	// it runs in the receiving interface's NAPI poll and was slower on
	// the simulated cluster, see docs/xdp.md).
	EnvXDPMode = "ADIMPI_XDP_MODE"
	// EnvWireStats, when set, makes a rank with an XDP wire print its
	// counters (XDPCounters) to standard error when it closes.
	EnvWireStats = "ADIMPI_WIRE_STATS"
)

// xdpDeadAfter is the default of EnvXDPTimeout. A peer acknowledges only
// when it polls, so this also bounds how long a rank may compute without
// entering MPI while another waits for its acknowledgement.
const xdpDeadAfter = 30 * time.Second

// xdpWire is an endpoint's XDP half.
type xdpWire struct {
	prog *xdpprog.Program
	sock *xsk.Socket
	tr   *reliable.Transport
	macs map[int]net.HardwareAddr // peers reached over XDP
	// way is, by rank, how frames reach the peer once asked (reaches):
	// wayXDP or wayTCP; a slice, as it is read at every Send.
	way  []uint8
	hw   net.HardwareAddr
	rank int
	logf func(format string, args ...any)
	kvs  KVS
	pfx  string

	// watch puts the socket in the endpoint's epoll set while a waiter
	// sleeps there.
	watch *watch

	// The device's goroutine holds mu while it polls or sends; the keeper
	// goroutine takes it to Tick the transport while the device does not
	// poll (see keep).
	mu     sync.Mutex
	inPoll bool // the device's goroutine holds mu in poll
	// unpolled is set by the keeper at each look and cleared by the
	// device's next poll: still set at the next look, the device has not
	// polled meanwhile. A poll only reads it, but once a look: an atomic
	// store is a locked instruction, and polls come every few hundred
	// nanoseconds while a rank waits.
	unpolled atomic.Bool
	stop     chan struct{}
	done     chan struct{}
}

// keepEvery is how often the keeper looks whether the device polls.
const keepEvery = 10 * time.Millisecond

// keep runs while the endpoint is open. A user-level transport only
// acknowledges and retransmits when someone polls it, and a rank may sit
// outside the device for long (computing, or blocked in the PMI barrier of
// MPI_Finalize while a peer still waits for a frame from it). When the
// device has not polled for keepEvery, the keeper does the transport's
// work (Tick), keeps what it would deliver for the device's next Poll and
// wakes the device's waiter if something came. It never runs beside the
// device's own Poll or Send.
func (x *xdpWire) keep(wake func()) {
	defer close(x.done)
	tk := time.NewTicker(keepEvery)
	defer tk.Stop()
	for {
		select {
		case <-x.stop:
			return
		case <-tk.C:
		}
		// The device polled since the last tick: it does the work.
		if !x.unpolled.Swap(true) {
			continue
		}
		if !x.mu.TryLock() {
			continue
		}
		x.tr.Tick()
		deferred := x.tr.Deferred()
		x.mu.Unlock()
		if deferred {
			wake()
		}
	}
}

// poll is the device's Poll of the transport.
func (x *xdpWire) poll() bool {
	x.mu.Lock()
	x.inPoll = true
	if x.unpolled.Load() {
		x.unpolled.Store(false)
	}
	busy := x.tr.Poll()
	x.inPoll = false
	x.mu.Unlock()
	return busy
}

// send is the device's Send over the transport; inside poll (a Handler
// that sends) the lock is held already.
func (x *xdpWire) send(peer int, head, body []byte, tok any) (bool, error) {
	if !x.inPoll {
		x.mu.Lock()
		defer x.mu.Unlock()
	}
	return x.tr.Send(peer, head, body, tok)
}

// sendNow is the device's SendNow over the transport.
func (x *xdpWire) sendNow(peer int, head, body []byte) (bool, error) {
	if !x.inPoll {
		x.mu.Lock()
		defer x.mu.Unlock()
	}
	return x.tr.SendNow(peer, head, body)
}

// ChunkSize is the size, at most want, of the pieces in which a device
// should send a large transfer to peer in messages with a head of head
// bytes: on the XDP wire, pieces that fill their Ethernet frames exactly
// (reliable.Transport.FillSize), so that only the transfer's last piece
// ends in a short frame; on the TCP wire, a byte stream, want itself.
func (e *Endpoint) ChunkSize(peer, head, want int) int {
	if e.x != nil && e.x.reaches(peer) {
		return e.x.tr.FillSize(head, want)
	}
	return want
}

func (x *xdpWire) pending() int {
	if !x.inPoll {
		x.mu.Lock()
		defer x.mu.Unlock()
	}
	return x.tr.Pending()
}

func xdpKey(prefix string, rank int) string { return prefix + "-xdp-" + strconv.Itoa(rank) }

// openXDP gives e an XDP half when the job asked for the XDP wire and this
// rank is its host's lowest, and publishes how peers reach it (its MAC
// address, or "tcp"). A host where the XDP wire cannot be had (no
// privilege, no AF_XDP, an interface with a program of its own) falls back
// to TCP and says so once.
func (e *Endpoint) openXDP(j Job, job uint64, secret []byte, addr netip.Addr) error {
	if os.Getenv(EnvWire) != "xdp" {
		return nil
	}
	how := "tcp"
	if hostLeader(j.Hosts, j.Rank) {
		x, err := newXDP(j, job, secret, addr)
		if err != nil {
			e.cfg.Logf("wire: rank %d: the XDP wire is not available, using TCP: %v", j.Rank, err)
		} else {
			// The socket joins the endpoint's epoll set only while a
			// waiter sleeps (xdp_watch.go).
			x.watch = &watch{ep: e.ep, fd: x.sock.FD()}
			x.rank, x.logf = j.Rank, e.cfg.Logf
			x.stop, x.done = make(chan struct{}), make(chan struct{})
			x.unpolled.Store(true) // until the device's first poll
			go x.keep(e.Wake)
			e.x = x
			how = x.mac().String()
		}
	}
	if err := j.KVS.Put(xdpKey(j.Prefix, j.Rank), how); err != nil {
		return fmt.Errorf("wire: publishing the XDP address: %v", err)
	}
	return nil
}

// hostLeader reports whether rank is the lowest rank of its host.
func hostLeader(hosts []int, rank int) bool {
	for r, h := range hosts[:rank] {
		if h == hosts[rank] && r < rank {
			return false
		}
	}
	return true
}

func newXDP(j Job, job uint64, secret []byte, addr netip.Addr) (*xdpWire, error) {
	ifc, err := interfaceOf(addr)
	if err != nil {
		return nil, err
	}
	dead := xdpDeadAfter
	if v := os.Getenv(EnvXDPTimeout); v != "" {
		if dead, err = time.ParseDuration(v); err != nil || dead <= 0 {
			return nil, fmt.Errorf("%s=%q: want a positive duration", EnvXDPTimeout, v)
		}
	}
	var generic bool
	switch v := os.Getenv(EnvXDPMode); v {
	case "", "generic":
		generic = true
	case "native":
	default:
		return nil, fmt.Errorf("%s=%q: want generic or native", EnvXDPMode, v)
	}
	var whole bool
	switch v := os.Getenv(EnvXDPTag); v {
	case "", "header":
	case "frame":
		whole = true
	default:
		return nil, fmt.Errorf("%s=%q: want header or frame", EnvXDPTag, v)
	}
	x := &xdpWire{macs: map[int]net.HardwareAddr{}, way: make([]uint8, j.Size), hw: ifc.HardwareAddr, kvs: j.KVS, pfx: j.Prefix}
	if x.prog, err = xdpprog.Attach(ifc.Index, 1, job, generic); err != nil {
		return nil, err
	}
	mtu := xdpMTU(ifc.MTU)
	run, runs, window := xdpSizes(mtu)
	if x.sock, err = xsk.Open(xsk.Config{Ifindex: ifc.Index, Queue: 0, Frames: xdpFrames, FrameSize: 4096, Multi: mtu > xdpPiece,
		LendRun: run, LendRuns: runs}); err != nil {
		x.close()
		return nil, err
	}
	if err := x.prog.Steer(0, x.sock.FD()); err != nil {
		x.close()
		return nil, err
	}
	link, err := impaired(&xskLink{s: x.sock}, j.Rank)
	if err != nil {
		x.close()
		return nil, err
	}
	x.tr, err = reliable.New(reliable.Config{
		Rank: j.Rank, Size: j.Size, Job: job, Secret: secret, MAC: ifc.HardwareAddr,
		Resolve: func(peer int) (net.HardwareAddr, error) {
			if m := x.macs[peer]; m != nil {
				return m, nil
			}
			return nil, fmt.Errorf("rank %d has no XDP wire", peer)
		},
		Handler: j.Handler, Link: link,
		MTU: mtu, PlaceMin: PlaceMin, DeadAfter: dead, TagPayload: whole,
		RecvWindow: window,
	})
	if err != nil {
		x.close()
		return nil, err
	}
	return x, nil
}

// xdpSizes are the UMEM's lent runs for frames of mtu bytes (each run a
// frame's worth of UMEM frames, how many) and the window this rank
// grants its peers. Most of the send half is lent, to cut large messages
// straight into (reliable.Lender). The window is what the receive half
// holds, in frames of the MTU each in pieces of a UMEM frame less the
// kernel's headroom, and no more than the lent runs: the peers run the
// same sizes, and a sender granted more frames than it has runs copies
// the frames beyond them the slow way, round after round while the
// window stays full.
func xdpSizes(mtu int) (run, runs, window int) {
	run = (mtu + 4095) / 4096
	runs = (xdpFrames/2 - xdpFrames/16) / run
	window = min(xdpFrames/2/((mtu+xdpPiece-1)/xdpPiece), runs)
	return run, runs, window
}

// xdpMTU is the largest frame the XDP wire sends on an interface of MTU
// mtu, Ethernet header included: the interface's frame (a jumbo frame where
// the links carry them; one larger than a UMEM frame goes in pieces), at
// most xdpMaxFrame.
func xdpMTU(mtu int) int { return min(mtu+14, xdpMaxFrame) }

// xdpFrames is the number of 4 KiB UMEM frames (half receive, half send),
// and xdpPiece what the kernel puts in one received (4 KiB less its
// XDP_PACKET_HEADROOM).
const (
	xdpFrames = 4096
	xdpPiece  = 4096 - 256
)

// xdpMaxFrame bounds a frame: sixteen 4 KiB pieces, within the kernel's
// limit of pieces per frame on the send side (MAX_SKB_FRAGS, 17).
const xdpMaxFrame = 16 * 4096

// interfaceOf finds the interface that has addr.
func interfaceOf(addr netip.Addr) (*net.Interface, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, err
	}
	for i := range ifs {
		as, _ := ifs[i].Addrs()
		for _, a := range as {
			if ipn, ok := a.(*net.IPNet); ok {
				if ip, ok := netip.AddrFromSlice(ipn.IP.To4()); ok && ip == addr {
					if len(ifs[i].HardwareAddr) != 6 {
						return nil, fmt.Errorf("interface %s of %s is not Ethernet", ifs[i].Name, addr)
					}
					return &ifs[i], nil
				}
			}
		}
	}
	return nil, fmt.Errorf("no interface has the address %s", addr)
}

func (x *xdpWire) mac() net.HardwareAddr { return x.hw }

// How frames reach a peer (xdpWire.way).
const (
	wayUnknown = iota
	wayXDP
	wayTCP
)

// reaches reports whether frames to peer go over the XDP wire: the peer
// published a MAC address. It asks the key-value space once per peer.
func (x *xdpWire) reaches(peer int) bool {
	if w := x.way[peer]; w != wayUnknown {
		return w == wayXDP
	}
	x.way[peer] = wayTCP
	v, err := x.kvs.Get(xdpKey(x.pfx, peer))
	if err == nil {
		if m, err := net.ParseMAC(v); err == nil && len(m) == 6 {
			x.macs[peer] = m
			x.way[peer] = wayXDP
		}
	}
	return x.way[peer] == wayXDP
}

func (x *xdpWire) close() {
	if x.stop != nil {
		close(x.stop)
		<-x.done
		x.stop = nil
	}
	if x.tr != nil {
		x.tr.Close()
		if os.Getenv(EnvWireStats) != "" {
			m := x.counterMap()
			names := make([]string, 0, len(m))
			for k := range m {
				names = append(names, k)
			}
			sort.Strings(names)
			var b strings.Builder
			for _, k := range names {
				fmt.Fprintf(&b, " %s=%d", k, m[k])
			}
			x.logf("wire: rank %d: xdp%s", x.rank, b.String())
		}
	}
	if x.prog != nil {
		x.prog.Close()
	}
	if x.sock != nil {
		x.sock.Close()
	}
}

// waitFor shortens a wait to the XDP wire's next timer. A delayed
// acknowledgement due in less than a millisecond ends the wait at once:
// epoll counts in milliseconds, and sleeping one would hold the
// acknowledgement twenty times as long as meant. The other timers (a
// probe, a retransmission, hundreds of microseconds or more away, and
// pending whenever a frame is unacknowledged) keep the rounding, as a
// waiter spinning on them would take the CPU its peer needs.
func (x *xdpWire) waitFor(d time.Duration) time.Duration {
	if dl := x.tr.Deadline(); !dl.IsZero() {
		d = max(min(d, time.Until(dl)), 0)
	}
	if a := x.tr.AckDue(); !a.IsZero() && time.Until(a) < time.Millisecond {
		d = 0
	}
	return d
}

// counters adds the XDP wire's totals to c.
func (x *xdpWire) counters(c *Counters) {
	r := x.transportCounters()
	c.FramesIn += r.FramesIn
	c.FramesOut += r.FramesOut
	c.BytesIn += r.BytesIn
	c.BytesOut += r.BytesOut
	c.Queued += r.Queued
	c.Placed += r.Placed
}

// transportCounters reads the transport's totals, which the keeper may be
// updating.
func (x *xdpWire) transportCounters() reliable.Counters {
	if !x.inPoll {
		x.mu.Lock()
		defer x.mu.Unlock()
	}
	return x.tr.Counters()
}

// XDPCounters are the XDP wire's own totals and the kernel's counters of
// its socket (XDP_STATISTICS), by name, for a device's Counters; nil when
// the endpoint has no XDP wire.
func (e *Endpoint) XDPCounters() map[string]int64 {
	if e == nil || e.x == nil {
		return nil
	}
	return e.x.counterMap()
}

func (x *xdpWire) counterMap() map[string]int64 {
	r := x.transportCounters()
	m := map[string]int64{
		"xdp_packets_in": r.PacketsIn, "xdp_packets_out": r.PacketsOut, "xdp_acks_out": r.AcksOut,
		"xdp_retransmits": r.Retransmits, "xdp_timeouts": r.Timeouts, "xdp_duplicates": r.Duplicates,
		"xdp_forged": r.Forged, "xdp_stray": r.Stray, "xdp_keepalives": r.KeepProbes,
		"xdp_messages_in": r.FramesIn, "xdp_messages_out": r.FramesOut, "xdp_lent": r.Lent, "xdp_tails": r.Tails,
		"xdp_kicks": x.sock.Kicks, "xdp_rekicks": x.sock.Rekicks,
	}
	if st, err := x.sock.Stats(); err == nil {
		m["xdp_rx_dropped"] = int64(st.Rx_dropped)
		m["xdp_rx_ring_full"] = int64(st.Rx_ring_full)
		m["xdp_fill_ring_empty"] = int64(st.Rx_fill_ring_empty_descs)
		m["xdp_rx_invalid"] = int64(st.Rx_invalid_descs)
		m["xdp_tx_invalid"] = int64(st.Tx_invalid_descs)
	}
	return m
}

// XDP reports whether the endpoint carries frames over the XDP wire.
func (e *Endpoint) XDP() bool { return e != nil && e.x != nil }

// xskLink is an AF_XDP socket as the reliable transport's link.
type xskLink struct{ s *xsk.Socket }

func (l *xskLink) Send(f []byte) bool { return l.s.SendFrame(f) }

// Flush kicks the kernel until the TX ring is empty: in copy mode each
// kick sends at most the kernel's per-call budget.
func (l *xskLink) Flush() error {
	for range 64 {
		if l.s.TXQueued() == 0 {
			break
		}
		if err := l.s.Kick(); err != nil {
			return err
		}
	}
	l.s.Completed(l.s.FreeTX)
	return nil
}

func (l *xskLink) Receive(budget int, got func([][]byte)) int { return l.s.ReceivePieces(budget, got) }

// The socket lends runs of its UMEM to build large frames in (reliable.Lender).
func (l *xskLink) Lend() (int, []byte, bool) { return l.s.Lend() }
func (l *xskLink) SendLent(id, n int) bool   { return l.s.SendLent(id, n) }
func (l *xskLink) LentBusy(id int) bool      { return l.s.LentBusy(id) }
func (l *xskLink) Return(id int)             { l.s.Return(id) }
