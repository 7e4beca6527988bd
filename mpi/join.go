package mpi

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/adimpi/adimpi/adi"
	"github.com/adimpi/adimpi/internal/wire"
	"github.com/adimpi/adimpi/mpi/internal/interjob"
)

// Communicators that span jobs. The devices wire up a fixed world at Init;
// a process of another job (a spawned child, a job met through
// MPI_Comm_connect or MPI_Comm_join) has no place in their segments,
// rings or boards. The core therefore numbers such processes after its own
// world (world size, size+1, ...) and sends every message of a
// communicator that has any of them — its point-to-point and its
// collective context — through the inter-job channel (mpi/internal/interjob),
// on every device alike. A communicator of one job's processes keeps its
// device, so nothing changes for a program that never connects.
//
// joinDev sits between the core and the device from Init on and routes by
// context id; until the first communicator across jobs exists, its routing
// costs one atomic load.

// joinDev is the device the core talks to: the job's device, and the
// inter-job channel for the contexts of communicators across jobs.
type joinDev struct {
	adi.Device
	r    *runtime
	net  *interjob.Net                    // opened at the first exchange across jobs (under r.mu)
	ctxs atomic.Pointer[[ctxWords]uint64] // contexts routed to net; nil: none
	mu   sync.Mutex                       // serialises route's updates of ctxs
}

const ctxWords = 2 * ctxPairs / 64

// wrapJoin puts a joinDev in front of dev, keeping the capabilities the
// core looks for (adi.Board, adi.Multisender) and routing a ShortSender's
// sends. Board collectives run on MPI_COMM_WORLD only and multidestination
// sends never on a communicator across jobs (collhier.go treats it as
// spanning hosts), so both go to dev unchanged.
func wrapJoin(r *runtime, dev adi.Device, short adi.ShortSender) (adi.Device, adi.ShortSender, *joinDev) {
	r.raw, r.rawShort = dev, short
	j := &joinDev{Device: dev, r: r}
	if short != nil {
		short = joinShort{j, short}
	}
	b, isBoard := dev.(adi.Board)
	m, isMulti := dev.(adi.Multisender)
	switch {
	case isBoard && isMulti:
		return struct {
			*joinDev
			adi.Board
			adi.Multisender
		}{j, b, m}, short, j
	case isBoard:
		return struct {
			*joinDev
			adi.Board
		}{j, b}, short, j
	case isMulti:
		return struct {
			*joinDev
			adi.Multisender
		}{j, m}, short, j
	}
	return j, short, j
}

// hot is the device to call, under r.mu, on the per-message paths: the
// job's device itself while no communicator spans jobs (no inter-job
// channel, no routed context), when the joinDev in front of it would only
// pass the call on, at the cost of two more calls, one of them through an
// interface, per message and per poll.
func (r *runtime) hot() adi.Device {
	if j := r.join; r.raw != nil && j.net == nil && j.ctxs.Load() == nil {
		return r.raw
	}
	return r.dev
}

// hotShort is hot for r.short.
func (r *runtime) hotShort() adi.ShortSender {
	if j := r.join; r.rawShort != nil && j.net == nil && j.ctxs.Load() == nil {
		return r.rawShort
	}
	return r.short
}

// routed reports whether context ctx belongs to a communicator across jobs.
func (j *joinDev) routed(ctx uint32) bool {
	s := j.ctxs.Load()
	return s != nil && int(ctx/64) < ctxWords && s[ctx/64]&(1<<(ctx%64)) != 0
}

// route adds (on) or removes the pair of contexts starting at ctx. A
// routed context is read without any lock: the set is replaced, never
// changed in place.
func (j *joinDev) route(ctx uint32, on bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	var s [ctxWords]uint64
	if old := j.ctxs.Load(); old != nil {
		s = *old
	}
	for _, x := range []uint32{ctx, ctx + 1} {
		if on {
			s[x/64] |= 1 << (x % 64)
		} else {
			s[x/64] &^= 1 << (x % 64)
		}
	}
	j.ctxs.Store(&s)
}

// Isend routes a send by its context.
func (j *joinDev) Isend(r *adi.Request) error {
	if j.routed(r.Context) {
		return j.net.Isend(r)
	}
	return j.Device.Isend(r)
}

// Irecv routes a receive by its context.
func (j *joinDev) Irecv(r *adi.Request) error {
	if j.routed(r.Context) {
		return j.net.Irecv(r)
	}
	return j.Device.Irecv(r)
}

// Iprobe routes a probe by its context.
func (j *joinDev) Iprobe(ctx uint32, src, tag int) (adi.Status, bool, error) {
	if j.routed(ctx) {
		return j.net.Iprobe(ctx, src, tag)
	}
	return j.Device.Iprobe(ctx, src, tag)
}

// CancelRecv routes a cancel by the receive's context.
func (j *joinDev) CancelRecv(r *adi.Request) bool {
	if j.routed(r.Context) {
		return j.net.CancelRecv(r)
	}
	return j.Device.CancelRecv(r)
}

// Progress advances the device and, once open, the inter-job channel.
func (j *joinDev) Progress() (bool, error) {
	did, err := j.Device.Progress()
	if j.net != nil && j.net.Progress() {
		did = true
	}
	return did, err
}

// Counters adds the inter-job channel's counters to the device's.
func (j *joinDev) Counters() map[string]int64 {
	m := j.Device.Counters()
	if j.net == nil {
		return m
	}
	if m == nil {
		m = map[string]int64{}
	}
	for k, v := range j.net.Counters() {
		m[k] = v
	}
	return m
}

// Finalize closes the inter-job channel, then the device.
func (j *joinDev) Finalize() error {
	if j.net != nil {
		j.net.Close()
		j.net = nil
		j.ctxs.Store(nil)
	}
	return j.Device.Finalize()
}

// joinShort is the device's immediate small send, declined for contexts
// across jobs (the core then starts a request, which joinDev routes).
type joinShort struct {
	j *joinDev
	s adi.ShortSender
}

func (s joinShort) SendShort(ctx uint32, peer, tag int, sig uint32, data []byte) bool {
	if s.j.routed(ctx) {
		return false
	}
	return s.s.SendShort(ctx, peer, tag, sig, data)
}

// jobID names this job among all jobs that may meet: the launcher's
// key-value space name, with a digest of the job's secret where there is
// one (two launchers on two hosts may pick the same name).
func (r *runtime) jobID() string {
	id := r.pmi.KVSName()
	if sec, err := wire.SecretFromEnv(); err == nil && sec != nil {
		sum := sha256.Sum256(sec)
		id += "." + hex.EncodeToString(sum[:6])
	}
	return id
}

// joinNet returns this process's inter-job channel, opening it the first
// time.
func (r *runtime) joinNet(op string) (*interjob.Net, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.join.net != nil {
		return r.join.net, nil
	}
	ip, err := wire.HostAddr()
	if err != nil {
		return nil, errorf(ErrOther, op, "%v", err)
	}
	n, err := interjob.Open(interjob.Identity{Job: r.jobID(), Rank: r.rank}, r.size, ip, r.join.Device.Wake)
	if err != nil {
		return nil, errorf(ErrOther, op, "%v", err)
	}
	r.join.net = n
	return n, nil
}

// noteComm marks c as spanning jobs, and routes its contexts, when any of
// its processes (or of an intercommunicator's local group) belongs to
// another job.
func noteComm(c *Comm) {
	r := live.Load()
	if r == nil || r.join == nil {
		return
	}
	across := func(w []int) bool {
		return slices.ContainsFunc(w, func(x int) bool { return x >= r.size })
	}
	if !across(c.world) && !across(c.lworld) {
		return
	}
	c.joined = true
	r.join.route(c.ctx, true)
}

// forgetComm stops routing a freed communicator's contexts.
func forgetComm(r *runtime, c *Comm) {
	if !c.joined || r.join == nil {
		return
	}
	r.join.route(c.ctx, false)
}
