package fm

import (
	"encoding/binary"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/adimpi/adimpi/internal/hostid"
	"github.com/adimpi/adimpi/internal/wire"
)

// This file is the endpoint's network half: FM to a peer on another host
// (Config.Hosts), over the job's wire endpoint (internal/wire), keeping
// FM's own protocol. The sender's region for such a peer is a private
// mirror of the receiver's: SendPiece, SendShort and flush fill its packets
// exactly as they fill a shared one, and where a shared region would have
// its flag stored and its doorbell rung, the packets handed over since the
// last ring travel as one frame (each packet's header and payload, no
// padding). The receiver's endpoint copies them into its region for that
// sender at the same place, and Extract then runs their handlers as for a
// packet a local sender stored. Credits are FM's: a sender still spends one
// per packet and stops when it has none; the receiver returns them
// piggybacked on its own packets, or explicitly as a credit frame where a
// local receiver would add to the sender's mailbox word. Frames of other
// kinds belong to the layer above (SetNet), which defines them as it
// defines the bulk regions.

// Frame kinds: the first byte of a frame's head. Kinds from NetKindMin on
// are the layer above's (SetNet).
const (
	fPackets = 1 // body: packets (header + payload each)
	fCredits = 2 // head [8:16]: credits returned explicitly

	// NetKindMin is the least frame kind a layer above may use.
	NetKindMin = 16
)

// netDrain bounds how long Release waits for queued frames to leave.
const netDrain = 10 * time.Second

// NetHooks is what a layer above handles of the wire (SetNet): its own
// frames (head[0] ≥ NetKindMin), the release of a body it sent by reference,
// and, optionally, where a large body of its frames should be read to.
type NetHooks struct {
	Frame func(src int, head, body []byte)
	Sent  func(tok any)
	Place func(src int, head []byte, n int) []byte
}

// netSide is the endpoint as the wire's handler.
type netSide struct{ e *Endpoint }

var (
	_ wire.Handler = netSide{}
	_ wire.Placer  = netSide{}
)

// setupNet opens the wire when some rank runs on another host and
// publishes this host's name; it runs before New's barrier.
func (e *Endpoint) setupNet(cfg Config, name string) error {
	if cfg.Hosts == nil {
		return nil
	}
	if len(cfg.Hosts) != e.size {
		return fmt.Errorf("fm: %d host numbers for %d ranks", len(cfg.Hosts), e.size)
	}
	var err error
	e.net, err = wire.Setup(wire.Job{Rank: e.rank, Size: e.size, Hosts: cfg.Hosts, KVS: cfg.KVS, Prefix: name, Handler: netSide{e}})
	if err != nil || e.net == nil {
		return err
	}
	e.hosts = cfg.Hosts
	return cfg.KVS.Put(fmt.Sprintf("%s-host-%d", name, e.rank), hostid.Name())
}

// netPeer makes p a peer reached over the wire: a private region mirrors
// its receive region for this process, and nothing of its memory is mapped.
func (e *Endpoint) netPeer(p *peer, kvs interface{ Get(string) (string, error) }, name string) error {
	host, err := kvs.Get(fmt.Sprintf("%s-host-%d", name, p.rank))
	if err != nil {
		return fmt.Errorf("fm: host of rank %d: %v", p.rank, err)
	}
	p.net, p.host = true, host
	p.seg, p.remote = nil, false
	p.out = make([]byte, e.packet*e.slots)
	var words [2]uint32 // nobody sleeps on them: frames wake the receiver
	p.doorbell, p.sleepers = &words[0], &words[1]
	p.mailbox = new(uint64)
	p.bulkOut, p.bulkIn = nil, nil
	return nil
}

// hostsFromKVS finds every rank's host for a standalone endpoint (Open):
// each publishes its host's identity, and equal identities share a host.
func hostsFromKVS(kvs interface {
	Put(key, value string) error
	Barrier() error
	Get(key string) (string, error)
}, name string, rank, size int) ([]int, error) {
	id, err := hostid.Self()
	if err != nil {
		return nil, err
	}
	if err := kvs.Put(fmt.Sprintf("%s-hostid-%d", name, rank), string(id)); err != nil {
		return nil, err
	}
	if err := kvs.Barrier(); err != nil {
		return nil, err
	}
	ids := make([]hostid.ID, size)
	for r := range ids {
		v, err := kvs.Get(fmt.Sprintf("%s-hostid-%d", name, r))
		if err != nil {
			return nil, fmt.Errorf("fm: host of rank %d: %v", r, err)
		}
		ids[r] = hostid.ID(v)
	}
	return hostid.Map(ids), nil
}

// SetNet registers the layer above's handling of the wire (see NetHooks).
func (e *Endpoint) SetNet(h NetHooks) { e.hooks = h }

// allRemote reports whether every other rank runs on another host: no
// process but this one rings its doorbell, and a waiter sleeps in the wire
// (wire.DirectSleeper).
func (e *Endpoint) allRemote() bool {
	for _, p := range e.peers {
		if p.rank != e.rank && !p.net {
			return false
		}
	}
	return true
}

// Remote reports whether rank runs on another host (reached over the wire).
func (e *Endpoint) Remote(rank int) bool { return e.peers[rank].net }

// Host is rank's host name, for a peer on another host ("" otherwise).
func (e *Endpoint) Host(rank int) string { return e.peers[rank].host }

// SendFrame sends a frame of the layer above (head[0] ≥ NetKindMin) to a
// peer on another host; see wire.Endpoint.Send for head, body and tok. A
// failure makes the peer lost.
func (e *Endpoint) SendFrame(dest int, head, body []byte, tok any) (bool, error) {
	p := e.peers[dest]
	if p.lost != nil {
		return false, e.unreachable(p)
	}
	now, err := e.net.Send(dest, head, body, tok)
	if err != nil {
		e.lose(p, err)
		return false, e.unreachable(p)
	}
	return now, nil
}

// sendNet sends p the packets flushed to it since the last frame: the
// span of its mirror region that holds them (one frame, two where the ring
// wraps), cut after the last packet's payload. The frame references the
// region: a slot is reused only once its credit is back, that is once p has
// read it, by when the wire has long finished with it.
func (e *Endpoint) sendNet(p *peer) {
	for p.netSent < p.flushed && p.lost == nil {
		first := int(p.netSent % uint64(e.slots))
		k := min(p.flushed-p.netSent, uint64(e.slots-first))
		last := p.out[(first+int(k)-1)*e.packet:]
		body := p.out[first*e.packet : (first+int(k)-1)*e.packet+HeaderSize+int(pLen.Get(last))]
		head := [8]byte{fPackets}
		binary.LittleEndian.PutUint32(head[4:], uint32(first))
		now, err := e.net.Send(p.rank, head[:], body, p)
		if err != nil {
			e.lose(p, err)
			break
		}
		if !now {
			p.queued++
		} else if p.queued == 0 {
			p.ready = true
		}
		p.netSent += k
	}
	p.netSent = p.flushed
}

// Unsent reports whether frames to rank (a peer on another host) still wait
// for the kernel to take them: until then they need this process's
// Extract, so that a send whose data they carry is not complete yet.
func (e *Endpoint) Unsent(rank int) bool { return e.peers[rank].queued > 0 }

// returnNet returns owed credits to p in a credit frame. A peer that has
// left takes no more credits, so a failure here is not a loss.
func (e *Endpoint) returnNet(p *peer, n uint32) {
	var head [16]byte
	head[0] = fCredits
	binary.LittleEndian.PutUint64(head[8:], uint64(n))
	_, _ = e.net.Send(p.rank, head[:], nil, nil)
}

// pollNet reads what the wire brought: packets into their regions (for
// Extract to handle), credits into the mailboxes, the layer above's frames
// to its hooks. Called by Extract, never from inside itself.
func (e *Endpoint) pollNet() error {
	if e.net == nil || e.polling {
		return nil
	}
	e.polling = true
	e.net.Poll()
	e.polling = false
	err := e.netErr
	e.netErr = nil
	return err
}

// Frame takes a frame from peer (wire.Handler).
func (n netSide) Frame(src int, head, body []byte) {
	e := n.e
	if len(head) == 0 || src < 0 || src >= e.size || !e.peers[src].net {
		e.fail(fmt.Errorf("fm: a malformed frame from rank %d", src))
		return
	}
	p := e.peers[src]
	switch k := head[0]; {
	case k == fPackets:
		e.arrive(p, head, body)
	case k == fCredits && len(head) >= 16:
		atomic.AddUint64(p.mailbox, binary.LittleEndian.Uint64(head[8:]))
		e.netMoved = true
	case k >= NetKindMin && e.hooks.Frame != nil:
		e.hooks.Frame(src, head, body)
	default:
		e.fail(fmt.Errorf("fm: a frame of kind %d from rank %d", k, src))
	}
}

// arrive copies a span of p's mirror region, starting at slot first, into
// p's region in this process, where the next Extract handles its packets. A
// packet that finds its slot still taken means that p sent without a
// credit: a protocol error.
func (e *Endpoint) arrive(p *peer, head, body []byte) {
	if len(head) < 8 {
		e.fail(fmt.Errorf("fm: a malformed packets frame from rank %d", p.rank))
		return
	}
	first := int(binary.LittleEndian.Uint32(head[4:]))
	if first*e.packet != p.arriveAt || len(body) > len(p.in)-p.arriveAt {
		e.fail(fmt.Errorf("fm: packets from rank %d out of sequence (slot %d, expected %d)", p.rank, first, p.arriveAt/e.packet))
		return
	}
	for off := 0; off < len(body); off += e.packet {
		b := body[off:]
		if len(b) < HeaderSize || HeaderSize+int(pLen.Get(b)) > min(e.packet, len(b)) {
			e.fail(fmt.Errorf("fm: a malformed packet from rank %d", p.rank))
			return
		}
		n := HeaderSize + int(pLen.Get(b))
		h := p.in[p.arriveAt:][:e.packet]
		if pFlags.Load(h) != 0 {
			e.fail(fmt.Errorf("fm: rank %d sent a packet without a credit", p.rank))
			return
		}
		copy(h[4:n], b[4:n])
		pFlags.Store(h, pFlags.Get(b))
		if p.arriveAt += e.packet; p.arriveAt == len(p.in) {
			p.arriveAt = 0
		}
	}
}

// Sent passes the release of a referenced body to the layer above
// (wire.Handler).
func (n netSide) Sent(tok any) {
	if p, ok := tok.(*peer); ok {
		if p.queued--; p.queued == 0 {
			p.ready = true
		}
		n.e.netMoved = true
		return
	}
	if n.e.hooks.Sent != nil {
		n.e.hooks.Sent(tok)
	}
}

// Place asks the layer above where a large body goes (wire.Placer).
func (n netSide) Place(src int, head []byte, k int) []byte {
	if len(head) == 0 || head[0] < NetKindMin || n.e.hooks.Place == nil {
		return nil
	}
	return n.e.hooks.Place(src, head, k)
}

// Lost records that the connection to peer broke (wire.Handler).
func (n netSide) Lost(peer int, err error) {
	if peer >= 0 && peer < n.e.size {
		n.e.lose(n.e.peers[peer], err)
	}
}

// lose marks p unreachable; CheckPeers reports it once.
func (e *Endpoint) lose(p *peer, err error) {
	if p.lost == nil {
		p.lost = err
		e.lostNew = append(e.lostNew, p.rank)
		e.netMoved = true
	}
}

// fail keeps the first protocol error a frame met, for Extract.
func (e *Endpoint) fail(err error) {
	if e.netErr == nil {
		e.netErr = err
	}
}

// NetMoved reports (and clears) whether the wire moved something other
// than packets since the last call: credits came back, or a peer was lost.
func (e *Endpoint) NetMoved() bool {
	m := e.netMoved
	e.netMoved = false
	return m
}

// unreachable is the error of an operation towards a peer on another host
// whose connection broke.
func (e *Endpoint) unreachable(p *peer) error {
	return fmt.Errorf("fm: rank %d on host %s is unreachable: %v", p.rank, p.host, strings.TrimPrefix(fmt.Sprint(p.lost), "wire: "))
}

// closeNet lets queued frames leave (up to netDrain), then closes the wire.
func (e *Endpoint) closeNet() error {
	if e.net == nil {
		return nil
	}
	if e.sleeper != nil {
		e.sleeper.Stop()
		e.sleeper = nil
	}
	if e.direct != nil {
		e.direct.Stop()
		e.direct = nil
	}
	deadline := time.Now().Add(netDrain)
	for e.net.Pending() > 0 && time.Now().Before(deadline) {
		e.net.Poll()
		e.net.Wait(time.Millisecond)
	}
	err := e.net.Close()
	e.net = nil
	return err
}
