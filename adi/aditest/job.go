package aditest

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/adimpi/adimpi/adi"
)

// Timeout bounds every wait of the suite: a request that does not complete
// in time fails the test, naming the rank and the request, instead of
// hanging it.
var Timeout = 30 * time.Second

// Job is the ranks of one device living in this process: Devs[i] is rank
// i's device, initialised. Each device is driven by one goroutine at a time
// (the core's lock is that rule's origin).
type Job struct {
	Devs   []adi.Device
	t      testing.TB
	done   atomic.Int32 // ranks whose function returned (Run)
	failed atomic.Bool  // a rank's function failed: the others stop waiting
}

// Start makes size devices with f and initialises them together with opts,
// each in its own goroutine, wired up through an in-memory key-value space.
// The job is finalised when the test ends.
func Start(t testing.TB, f adi.Factory, size int, opts map[string]string) *Job {
	t.Helper()
	j := &Job{Devs: make([]adi.Device, size), t: t}
	kvs := newKVS(size)
	errs := make([]error, size)
	var wg sync.WaitGroup
	for r := range size {
		j.Devs[r] = f()
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = j.Devs[r].Init(adi.Config{Rank: r, Size: size, KVS: kvs, Options: opts})
			if errs[r] != nil {
				kvs.fail(fmt.Errorf("rank %d failed: %w", r, errs[r]))
			}
		}()
	}
	if !waitGroup(&wg, Timeout) {
		t.Fatalf("aditest: Init of %d ranks did not return within %v", size, Timeout)
	}
	for r, err := range errs {
		if err != nil {
			t.Fatalf("aditest: rank %d: Init: %v", r, err)
		}
	}
	t.Cleanup(j.finalize)
	return j
}

func (j *Job) finalize() {
	var wg sync.WaitGroup
	for r, d := range j.Devs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := d.Finalize(); err != nil {
				j.t.Errorf("aditest: rank %d: Finalize: %v", r, err)
			}
		}()
	}
	if !waitGroup(&wg, Timeout) {
		j.t.Errorf("aditest: Finalize did not return within %v", Timeout)
	}
}

func waitGroup(wg *sync.WaitGroup, d time.Duration) bool {
	ch := make(chan struct{})
	go func() { wg.Wait(); close(ch) }()
	select {
	case <-ch:
		return true
	case <-time.After(d):
		return false
	}
}

// Rank is one rank of a Job inside Run: its number and device, and helpers
// that start and wait for requests on that device.
type Rank struct {
	ID  int
	Dev adi.Device
	job *Job
}

// Run calls fn for every rank at once, each in its own goroutine, and
// returns when all have returned. A rank whose fn has returned keeps
// progressing its device until every rank is done, since its peers may
// still need it (credits, acknowledgements). Errors fail the test, naming
// the rank.
func (j *Job) Run(fn func(r *Rank) error) {
	j.t.Helper()
	j.done.Store(0)
	j.failed.Store(false)
	errs := make([]error, len(j.Devs))
	var wg sync.WaitGroup
	for id, d := range j.Devs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := &Rank{ID: id, Dev: d, job: j}
			if errs[id] = fn(r); errs[id] != nil {
				j.failed.Store(true)
			}
			j.done.Add(1)
			r.drain()
		}()
	}
	if !waitGroup(&wg, 2*Timeout) {
		j.t.Fatalf("aditest: ranks still running after %v", 2*Timeout)
	}
	for id, err := range errs {
		if err != nil && !errors.Is(err, errAbandoned) {
			j.t.Errorf("rank %d: %v", id, err)
		}
	}
}

// drain progresses the device until every rank's function has returned.
func (r *Rank) drain() {
	end := time.Now().Add(Timeout)
	for int(r.job.done.Load()) < len(r.job.Devs) && time.Now().Before(end) {
		seq := r.Dev.Seq()
		if did, err := r.Dev.Progress(); err != nil || !did {
			r.Dev.Sleep(seq, time.Millisecond)
		}
	}
}

// errAbandoned is what a rank's wait returns once another rank failed.
var errAbandoned = errors.New("aditest: another rank failed")

// Send starts a send of buf to world rank dest.
func (r *Rank) Send(mode adi.Mode, ctx uint32, dest, tag int, buf adi.Buffer) (*adi.Request, error) {
	q := &adi.Request{Op: adi.OpSend, Mode: mode, Context: ctx, Peer: dest, Tag: tag, Buf: buf}
	if err := r.Dev.Isend(q); err != nil {
		return nil, fmt.Errorf("Isend to %d tag %d: %w", dest, tag, err)
	}
	return q, nil
}

// Recv posts a receive from world rank src (or adi.AnySource) into buf.
func (r *Rank) Recv(ctx uint32, src, tag int, buf adi.Buffer) (*adi.Request, error) {
	q := &adi.Request{Op: adi.OpRecv, Context: ctx, Peer: src, Tag: tag, Buf: buf}
	if err := r.Dev.Irecv(q); err != nil {
		return nil, fmt.Errorf("Irecv from %d tag %d: %w", src, tag, err)
	}
	return q, nil
}

// Wait progresses the device until every request is done, or Timeout.
func (r *Rank) Wait(reqs ...*adi.Request) error {
	return r.Until(func() bool {
		for _, q := range reqs {
			if !q.Done() {
				return false
			}
		}
		return true
	}, func() string {
		s := ""
		for i, q := range reqs {
			if !q.Done() {
				s += fmt.Sprintf(" #%d(op %d peer %d tag %d)", i, q.Op, q.Peer, q.Tag)
			}
		}
		return "requests not complete:" + s
	})
}

// Until progresses the device until cond holds, or fails after Timeout
// with what() describing what was awaited.
func (r *Rank) Until(cond func() bool, what func() string) error {
	end := time.Now().Add(Timeout)
	for spin := 0; ; spin++ {
		seq := r.Dev.Seq()
		did, err := r.Dev.Progress()
		if err != nil {
			return fmt.Errorf("Progress: %w", err)
		}
		if cond() {
			return nil
		}
		if r.job != nil && r.job.failed.Load() {
			return errAbandoned
		}
		if time.Now().After(end) {
			return fmt.Errorf("after %v: %s", Timeout, what())
		}
		if !did && spin > 64 {
			r.Dev.Sleep(seq, time.Millisecond)
		}
	}
}

// Barrier returns once every rank has called it, progressing the device
// meanwhile (a peer may need this rank's progress to reach the barrier).
func (r *Rank) Barrier(b *Barrier) error {
	gen := b.arrive()
	return r.Until(func() bool { return b.passed(gen) }, func() string { return "a barrier" })
}

// Barrier is a barrier between the goroutines of a Run, outside the
// device: a check uses it to order steps of different ranks.
type Barrier struct {
	mu      sync.Mutex
	size    int
	arrived int
	gen     int
}

// NewBarrier returns a barrier for the job's ranks.
func (j *Job) NewBarrier() *Barrier { return &Barrier{size: len(j.Devs)} }

func (b *Barrier) arrive() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	gen := b.gen
	if b.arrived++; b.arrived == b.size {
		b.arrived, b.gen = 0, b.gen+1
	}
	return gen
}

func (b *Barrier) passed(gen int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.gen != gen
}
