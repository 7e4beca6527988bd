// Package loopback is an ADI device whose ranks live in one process: a
// send copies the message into the destination rank's matching engine (or
// straight into its posted receive) under one lock per job. It has no
// shared memory, processes, protocols or options, so code above the ADI
// can be tested fast and deterministically with aditest.Start(t,
// loopback.New, n, nil).
//
// It is not registered with adi.Register: it exists for tests only and
// is not a device a job can pick.
package loopback

import (
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/adimpi/adimpi/adi"
	"github.com/adimpi/adimpi/adi/devkit/recv"
	"github.com/adimpi/adimpi/adi/match"
)

// New returns a fresh, uninitialised loopback device (an adi.Factory).
func New() adi.Device { return new(Device) }

// The device offers no optional capability: adi.Device only.
var _ adi.Device = (*Device)(nil)

// A world is one job: the devices of its ranks, and the lock under which
// any of them touches another's state.
type world struct {
	mu   sync.Mutex
	devs []*Device
	left int // ranks not finalised yet
}

var (
	worldsMu  sync.Mutex
	worlds    = map[string]*world{}
	worldSeq  atomic.Uint64
	worldKey  = "loopback-world"
	errClosed = adi.Errorf(adi.ErrOther, "loopback", "device not initialised or finalised")
)

// Device is one rank of a loopback job.
type Device struct {
	w    *world
	rank int
	name string // the world's name, for Finalize

	// Guarded by w.mu.
	eng  match.Engine
	done []completion // requests of this rank completed by another rank, for Progress to report

	seq  atomic.Uint32
	wake chan struct{}
	sent atomic.Int64
}

type completion struct {
	r  *adi.Request
	st adi.Status
}

// unexp is what a message that arrived before its receive keeps: the
// synchronous send waiting for the match, if it is one.
type unexp struct {
	from *Device
	sync *adi.Request
}

// Init joins the job's world, which rank 0 creates and names in the KVS.
func (d *Device) Init(cfg adi.Config) error {
	for k, v := range cfg.Options {
		return fmt.Errorf("loopback: unknown option %s=%s (the device has no options)", k, v)
	}
	d.rank, d.wake = cfg.Rank, make(chan struct{}, 1)
	if cfg.Rank == 0 {
		d.name = fmt.Sprintf("%d-%d", os.Getpid(), worldSeq.Add(1))
		worldsMu.Lock()
		worlds[d.name] = &world{devs: make([]*Device, cfg.Size), left: cfg.Size}
		worldsMu.Unlock()
		if err := cfg.KVS.Put(worldKey, d.name); err != nil {
			return err
		}
	}
	if err := cfg.KVS.Barrier(); err != nil {
		return err
	}
	if cfg.Rank != 0 {
		var err error
		if d.name, err = cfg.KVS.Get(worldKey); err != nil {
			return err
		}
	}
	worldsMu.Lock()
	d.w = worlds[d.name]
	worldsMu.Unlock()
	if d.w == nil || len(d.w.devs) != cfg.Size {
		return fmt.Errorf("loopback: rank %d: no world %q of %d ranks in this process (the ranks of a loopback job must share one process)", cfg.Rank, d.name, cfg.Size)
	}
	d.w.mu.Lock()
	d.w.devs[d.rank] = d
	d.w.mu.Unlock()
	return cfg.KVS.Barrier() // every rank is in the world before any sends
}

// Finalize leaves the world; the last rank to leave removes it.
func (d *Device) Finalize() error {
	if d.w == nil {
		return errClosed
	}
	d.w.mu.Lock()
	d.w.devs[d.rank] = nil
	d.w.left--
	last := d.w.left == 0
	d.w.mu.Unlock()
	if last {
		worldsMu.Lock()
		delete(worlds, d.name)
		worldsMu.Unlock()
	}
	d.w = nil
	return nil
}

// Isend delivers the message at once: into the destination's earliest
// matching posted receive, else into its unexpected queue as a copy. A
// standard send is complete on return; a synchronous one once matched.
func (d *Device) Isend(r *adi.Request) error {
	w := d.w
	w.mu.Lock()
	dest := w.devs[r.Peer]
	if dest == nil {
		w.mu.Unlock()
		return adi.Errorf(adi.ErrOther, "send", "rank %d has left the loopback job", r.Peer)
	}
	env := adi.Envelope{Context: r.Context, Source: d.rank, Tag: r.Tag}
	size := r.Buf.Size()
	data := make([]byte, size)
	r.Buf.CopyOut(0, data)
	matched := false
	if q := dest.eng.Arrive(env); q != nil {
		dest.done = append(dest.done, completion{q, deliver(q, env, data, r.Buf.Type.Signature())})
		matched = true
	} else {
		u := &unexp{from: d}
		if r.Mode == adi.ModeSync {
			u.sync = r
		}
		dest.eng.AddUnexpected(&match.Message{Env: env, Size: size, Data: data, Sig: r.Buf.Type.Signature(), Handle: u})
	}
	w.mu.Unlock()
	d.sent.Add(1)
	dest.ring()
	if matched || r.Mode != adi.ModeSync {
		r.Complete(adi.Status{Bytes: size})
	}
	return nil
}

// deliver writes data, a message with envelope env, into receive q and
// returns q's status.
func deliver(q *adi.Request, env adi.Envelope, data []byte, sig uint32) adi.Status {
	if st, bad := recv.Mismatch(q, env, len(data), sig); bad {
		return st
	}
	n := min(len(data), q.Buf.Size())
	q.Buf.CopyIn(0, data[:n])
	return recv.Status(q, env.Source, env.Tag, len(data), n)
}

// Irecv takes the earliest matching unexpected message, or joins the
// posted queue.
func (d *Device) Irecv(r *adi.Request) error {
	w := d.w
	w.mu.Lock()
	m := d.eng.Post(r)
	var sender *Device
	if m != nil {
		if u := m.Handle.(*unexp); u.sync != nil {
			sender = u.from
			sender.done = append(sender.done, completion{u.sync, adi.Status{Bytes: m.Size}})
		}
	}
	w.mu.Unlock()
	if m != nil {
		r.Complete(deliver(r, m.Env, m.Data, m.Sig))
	}
	if sender != nil {
		sender.ring()
	}
	return nil
}

// Iprobe looks at the unexpected queue.
func (d *Device) Iprobe(ctx uint32, src, tag int) (adi.Status, bool, error) {
	d.w.mu.Lock()
	defer d.w.mu.Unlock()
	st, ok := d.eng.ProbeStatus(ctx, src, tag)
	return st, ok, nil
}

// CancelRecv withdraws r if no message has matched it.
func (d *Device) CancelRecv(r *adi.Request) bool {
	d.w.mu.Lock()
	defer d.w.mu.Unlock()
	return d.eng.Withdraw(r)
}

// Progress completes the requests of this rank that other ranks matched.
func (d *Device) Progress() (bool, error) {
	if d.w == nil {
		return false, errClosed
	}
	d.w.mu.Lock()
	done := d.done
	d.done = nil
	d.w.mu.Unlock()
	for _, c := range done {
		c.r.Complete(c.st)
	}
	return len(done) > 0, nil
}

// ring tells the rank that something arrived.
func (d *Device) ring() {
	d.seq.Add(1)
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// Seq changes whenever something arrives for this rank.
func (d *Device) Seq() uint32 { return d.seq.Load() }

// Sleep waits until Seq moves from seq, Wake is called, or t passes.
func (d *Device) Sleep(seq uint32, t time.Duration) {
	if d.seq.Load() != seq {
		return
	}
	tm := time.NewTimer(t)
	defer tm.Stop()
	select {
	case <-d.wake:
	case <-tm.C:
	}
}

// Wake makes Sleep return.
func (d *Device) Wake() { d.ring() }

// Counters reports the matching queues and the messages sent.
func (d *Device) Counters() map[string]int64 {
	d.w.mu.Lock()
	defer d.w.mu.Unlock()
	return map[string]int64{
		"posted_receives":     int64(d.eng.Posted()),
		"unexpected_messages": int64(d.eng.Unexpected()),
		"messages_sent":       d.sent.Load(),
	}
}
