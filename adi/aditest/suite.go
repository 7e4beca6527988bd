package aditest

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/adimpi/adimpi/adi"
	"github.com/adimpi/adimpi/datatype"
)

// Config says which device the suite checks and how.
type Config struct {
	// Name is the device's registered name (adi.Register).
	Name string
	// New makes a device; nil takes the factory registered under Name.
	New adi.Factory
	// Options are passed to every rank's Init (-device-opt pairs).
	Options map[string]string
	// Ranks is the size of the in-process jobs (at least 2; default 3).
	Ranks int
	// Sizes are the message sizes the checks send; they should cross
	// every protocol switch of the device. Default: 0 to 1 MiB.
	Sizes []int
	// InProcess says that the device's ranks can only live in one process
	// (a loopback device): the dead-peer check, which needs a second
	// process, is skipped.
	InProcess bool
	// NoTypeCheck says, with the reason, that the device does not compare
	// the sender's and the receiver's type signatures: the type-mismatch
	// check is skipped, saying why.
	NoTypeCheck string
}

// DefaultSizes cross the eager/rendezvous thresholds of the devices.
var DefaultSizes = []int{0, 1, 7, 64, 1000, 4095, 4097, 16384, 16385, 70000, 300000, 1<<20 + 3}

func (c *Config) fill(t testing.TB) {
	if c.New == nil {
		f, ok := adi.Lookup(c.Name)
		if !ok {
			t.Fatalf("aditest: no device registered as %q (registered: %v)", c.Name, adi.Devices())
		}
		c.New = f
	}
	if c.Ranks == 0 {
		c.Ranks = 3
	}
	if c.Ranks < 2 {
		t.Fatalf("aditest: Ranks = %d, want at least 2", c.Ranks)
	}
	if c.Sizes == nil {
		c.Sizes = DefaultSizes
	}
}

// Run runs the contract suite against the device c describes, each check
// as a subtest.
func Run(t *testing.T, c Config) {
	if isPeer() {
		// This process is the second rank of a dead-peer check.
		t.Run("DeadPeer", func(t *testing.T) { c.fill(t); deadPeer(t, c) })
		return
	}
	c.fill(t)
	for _, check := range []struct {
		name string
		fn   func(testing.TB, Config)
	}{
		{"Order", order},
		{"AnySourceAnyTag", anySourceAnyTag},
		{"Truncate", truncate},
		{"TypeMismatch", typeMismatch},
		{"Cancel", cancel},
		{"ZeroBytes", zeroBytes},
		{"Self", self},
		{"Sync", syncMode},
		{"Iprobe", iprobe},
		{"NonContiguous", nonContiguous},
		{"UnknownOption", unknownOption},
		{"OptionHelp", optionHelp},
		{"ShortSender", shortSender},
		{"Multisender", multisender},
		{"Board", board},
		{"DeadPeer", deadPeer},
	} {
		t.Run(check.name, func(t *testing.T) { check.fn(t, c) })
	}
}

// pattern is message k's data: n bytes that differ between messages.
func pattern(k, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(k*31 + i*7 + 1)
	}
	return b
}

// guarded is a receive buffer of n bytes followed by guard bytes, all
// 0xEE: a device must not write past n.
func guarded(n int) (buf, whole []byte) {
	whole = bytes.Repeat([]byte{0xEE}, n+64)
	return whole[:n:n], whole
}

func untouched(b []byte) bool {
	for _, x := range b {
		if x != 0xEE {
			return false
		}
	}
	return true
}

// checkQuiet fails t if a device of j still holds a posted receive or an
// unexpected message once a check is over (for devices that count them).
func checkQuiet(t testing.TB, j *Job) {
	t.Helper()
	if t.Failed() {
		return // a failed check may leave anything behind
	}
	for r, d := range j.Devs {
		c := d.Counters()
		for _, k := range []string{"posted_receives", "unexpected_messages"} {
			if n, ok := c[k]; ok && n != 0 {
				t.Errorf("rank %d: %s = %d after the check", r, k, n)
			}
		}
	}
}

func expect(got, want []byte, what string) error {
	if !bytes.Equal(got, want) {
		i := 0
		for i < len(got) && i < len(want) && got[i] == want[i] {
			i++
		}
		return fmt.Errorf("%s: %d bytes received, %d expected, first difference at byte %d", what, len(got), len(want), i)
	}
	return nil
}

func recvOK(q *adi.Request, src, tag, n int) error {
	st := q.Status
	if st.Err != nil {
		return fmt.Errorf("receive from %d tag %d: %w", src, tag, st.Err)
	}
	if st.Source != src || st.Tag != tag || st.Bytes != n || st.Cancelled {
		return fmt.Errorf("receive status %+v, want source %d tag %d bytes %d", st, src, tag, n)
	}
	return nil
}

// order: messages from one source in one context are received in the order
// they were sent, whatever their sizes (eager and rendezvous mixed), whether
// they arrive before their receives or after; tags select among them.
func order(t testing.TB, c Config) {
	j := Start(t, c.New, 2, c.Options)
	b := j.NewBarrier()
	const ctx = 3
	j.Run(func(r *Rank) error {
		switch r.ID {
		case 0:
			var sends []*adi.Request
			for phase, tag := range []int{5, 6} {
				if phase == 1 {
					if err := r.Barrier(b); err != nil { // rank 1's receives are posted
						return err
					}
				}
				for k, n := range c.Sizes {
					q, err := r.Send(adi.ModeStandard, ctx, 1, tag, adi.Bytes(pattern(k, n)))
					if err != nil {
						return err
					}
					sends = append(sends, q)
				}
				if phase == 0 {
					if err := r.Barrier(b); err != nil { // tag 5 is sent before rank 1 receives it
						return err
					}
				}
			}
			// Tag selection: tag 2 is received before tag 1, sent after it.
			q1, err := r.Send(adi.ModeStandard, ctx, 1, 1, adi.Bytes(pattern(100, 10)))
			if err != nil {
				return err
			}
			q2, err := r.Send(adi.ModeStandard, ctx, 1, 2, adi.Bytes(pattern(101, 20)))
			if err != nil {
				return err
			}
			return r.Wait(append(sends, q1, q2)...)
		default:
			if err := r.Barrier(b); err != nil {
				return err
			}
			for k, n := range c.Sizes {
				buf := make([]byte, n)
				q, err := r.Recv(ctx, 0, 5, adi.Bytes(buf))
				if err != nil {
					return err
				}
				if err := r.Wait(q); err != nil {
					return err
				}
				if err := recvOK(q, 0, 5, n); err != nil {
					return fmt.Errorf("message %d of tag 5: %w", k, err)
				}
				if err := expect(buf, pattern(k, n), fmt.Sprintf("message %d of tag 5 (received after its arrival)", k)); err != nil {
					return err
				}
			}
			var recvs []*adi.Request
			bufs := make([][]byte, len(c.Sizes))
			for k, n := range c.Sizes {
				bufs[k] = make([]byte, n)
				q, err := r.Recv(ctx, 0, 6, adi.Bytes(bufs[k]))
				if err != nil {
					return err
				}
				recvs = append(recvs, q)
			}
			if err := r.Barrier(b); err != nil {
				return err
			}
			if err := r.Wait(recvs...); err != nil {
				return err
			}
			for k, n := range c.Sizes {
				if err := recvOK(recvs[k], 0, 6, n); err != nil {
					return fmt.Errorf("message %d of tag 6: %w", k, err)
				}
				if err := expect(bufs[k], pattern(k, n), fmt.Sprintf("message %d of tag 6 (receive posted first)", k)); err != nil {
					return err
				}
			}
			b2, b1 := make([]byte, 20), make([]byte, 10)
			q2, err := r.Recv(ctx, 0, 2, adi.Bytes(b2))
			if err != nil {
				return err
			}
			if err := r.Wait(q2); err != nil {
				return err
			}
			q1, err := r.Recv(ctx, 0, 1, adi.Bytes(b1))
			if err != nil {
				return err
			}
			if err := r.Wait(q1); err != nil {
				return err
			}
			if err := errors.Join(recvOK(q2, 0, 2, 20), recvOK(q1, 0, 1, 10)); err != nil {
				return err
			}
			return errors.Join(expect(b2, pattern(101, 20), "tag 2"), expect(b1, pattern(100, 10), "tag 1"))
		}
	})
	checkQuiet(t, j)
}

// anySourceAnyTag: wildcard receives take every peer's messages, report
// the true source and tag, and keep each source's order.
func anySourceAnyTag(t testing.TB, c Config) {
	j := Start(t, c.New, c.Ranks, c.Options)
	const ctx, perPeer = 4, 3
	big := c.Sizes[len(c.Sizes)-1]
	size := func(k int) int { return []int{5, big, 100}[k] }
	j.Run(func(r *Rank) error {
		if r.ID != 0 {
			var sends []*adi.Request
			for k := range perPeer {
				q, err := r.Send(adi.ModeStandard, ctx, 0, 10*r.ID+k, adi.Bytes(pattern(r.ID*perPeer+k, size(k))))
				if err != nil {
					return err
				}
				sends = append(sends, q)
			}
			return r.Wait(sends...)
		}
		next := make([]int, len(j.Devs)) // the next message expected from each peer
		for range (len(j.Devs) - 1) * perPeer {
			buf := make([]byte, big)
			src, tag := adi.AnySource, adi.AnyTag
			q, err := r.Recv(ctx, src, tag, adi.Bytes(buf))
			if err != nil {
				return err
			}
			if err := r.Wait(q); err != nil {
				return err
			}
			st := q.Status
			if st.Err != nil {
				return fmt.Errorf("wildcard receive: %w", st.Err)
			}
			p := st.Source
			if p <= 0 || p >= len(j.Devs) {
				return fmt.Errorf("wildcard receive: source %d", p)
			}
			k := next[p]
			next[p]++
			if k >= perPeer || st.Tag != 10*p+k || st.Bytes != size(k) {
				return fmt.Errorf("wildcard receive: status %+v, want tag %d and %d bytes (message %d of rank %d)", st, 10*p+k, size(k), k, p)
			}
			if err := expect(buf[:st.Bytes], pattern(p*perPeer+k, size(k)), fmt.Sprintf("message %d of rank %d", k, p)); err != nil {
				return err
			}
		}
		return nil
	})
	checkQuiet(t, j)
}

// truncate: a message longer than the receive buffer fills the buffer,
// writes nothing past it, and completes the receive with ErrTruncate; the
// send completes without error. Both with the receive posted first and
// with the message arriving first.
func truncate(t testing.TB, c Config) {
	j := Start(t, c.New, 2, c.Options)
	b := j.NewBarrier()
	const ctx = 5
	var sizes []int
	for _, n := range c.Sizes {
		if n >= 2 {
			sizes = append(sizes, n)
		}
	}
	j.Run(func(r *Rank) error {
		for k, n := range sizes {
			for _, postFirst := range []bool{true, false} {
				tag := 2*k + map[bool]int{true: 0, false: 1}[postFirst]
				if r.ID == 0 {
					if postFirst {
						if err := r.Barrier(b); err != nil {
							return err
						}
					}
					q, err := r.Send(adi.ModeStandard, ctx, 1, tag, adi.Bytes(pattern(k, n)))
					if err != nil {
						return err
					}
					if !postFirst {
						if err := r.Barrier(b); err != nil {
							return err
						}
					}
					if err := r.Wait(q); err != nil {
						return err
					}
					if q.Status.Err != nil {
						return fmt.Errorf("send of %d bytes into a shorter receive: %w", n, q.Status.Err)
					}
					continue
				}
				buf, whole := guarded(n / 2)
				var q *adi.Request
				var err error
				if postFirst {
					if q, err = r.Recv(ctx, 0, tag, adi.Bytes(buf)); err != nil {
						return err
					}
				}
				if err := r.Barrier(b); err != nil {
					return err
				}
				if !postFirst {
					if q, err = r.Recv(ctx, 0, tag, adi.Bytes(buf)); err != nil {
						return err
					}
				}
				if err := r.Wait(q); err != nil {
					return err
				}
				what := fmt.Sprintf("%d bytes into %d (receive posted first: %v)", n, n/2, postFirst)
				if !errors.Is(q.Status.Err, adi.ErrTruncate) || q.Status.Bytes != n/2 || q.Status.Source != 0 || q.Status.Tag != tag {
					return fmt.Errorf("%s: status %+v, want ErrTruncate and %d bytes", what, q.Status, n/2)
				}
				if err := expect(buf, pattern(k, n)[:n/2], what); err != nil {
					return err
				}
				if !untouched(whole[n/2:]) {
					return fmt.Errorf("%s: bytes written past the receive buffer", what)
				}
			}
		}
		return nil
	})
	checkQuiet(t, j)
}

// typeMismatch: a message sent as one basic type and received as another
// fails the receive with ErrType and writes nothing; the send completes.
func typeMismatch(t testing.TB, c Config) {
	if c.NoTypeCheck != "" {
		t.Skipf("SKIP: %s does not check type signatures: %s", c.Name, c.NoTypeCheck)
	}
	j := Start(t, c.New, 2, c.Options)
	b := j.NewBarrier()
	const ctx = 6
	sizes := []int{64, c.Sizes[len(c.Sizes)-1] &^ 7}
	j.Run(func(r *Rank) error {
		for k, n := range sizes {
			if r.ID == 0 {
				q, err := r.Send(adi.ModeStandard, ctx, 1, k, adi.Buffer{Mem: pattern(k, n), Count: n / 4, Type: datatype.Int32})
				if err != nil {
					return err
				}
				if err := r.Wait(q); err != nil {
					return err
				}
				if err := r.Barrier(b); err != nil {
					return err
				}
				continue
			}
			buf, whole := guarded(n)
			q, err := r.Recv(ctx, 0, k, adi.Buffer{Mem: buf, Count: n / 8, Type: datatype.Float64})
			if err != nil {
				return err
			}
			if err := r.Wait(q); err != nil {
				return err
			}
			if !errors.Is(q.Status.Err, adi.ErrType) {
				return fmt.Errorf("int32 message of %d bytes received as float64: status %+v, want ErrType", n, q.Status)
			}
			if !untouched(whole) {
				return fmt.Errorf("int32 message of %d bytes received as float64: the buffer was written", n)
			}
			if err := r.Barrier(b); err != nil {
				return err
			}
		}
		return nil
	})
	checkQuiet(t, j)
}

// cancel: a posted receive withdrawn before any message matches it
// completes as cancelled, untouched, and the message it would have matched
// goes to the next receive.
func cancel(t testing.TB, c Config) {
	j := Start(t, c.New, 2, c.Options)
	b := j.NewBarrier()
	const ctx, tag = 7, 9
	j.Run(func(r *Rank) error {
		if r.ID == 0 {
			if err := r.Barrier(b); err != nil {
				return err
			}
			q, err := r.Send(adi.ModeStandard, ctx, 1, tag, adi.Bytes(pattern(1, 40)))
			if err != nil {
				return err
			}
			return r.Wait(q)
		}
		buf, whole := guarded(40)
		q, err := r.Recv(ctx, 0, tag, adi.Bytes(buf))
		if err != nil {
			return err
		}
		if !r.Dev.CancelRecv(q) {
			return errors.New("CancelRecv of a receive no message matched reported false")
		}
		if err := r.Wait(q); err != nil { // it may complete at once or in Progress
			return fmt.Errorf("cancelled receive: %w", err)
		}
		if !q.Status.Cancelled || q.Status.Err != nil {
			return fmt.Errorf("cancelled receive: done %v, status %+v", q.Done(), q.Status)
		}
		if err := r.Barrier(b); err != nil {
			return err
		}
		buf2 := make([]byte, 40)
		q2, err := r.Recv(ctx, 0, tag, adi.Bytes(buf2))
		if err != nil {
			return err
		}
		if err := r.Wait(q2); err != nil {
			return err
		}
		if err := recvOK(q2, 0, tag, 40); err != nil {
			return err
		}
		if !untouched(whole) {
			return errors.New("the cancelled receive's buffer was written")
		}
		return expect(buf2, pattern(1, 40), "the message after the cancel")
	})
	checkQuiet(t, j)
}

// zeroBytes: empty messages, in every mode, into empty and non-empty
// buffers, complete with 0 bytes and write nothing.
func zeroBytes(t testing.TB, c Config) {
	j := Start(t, c.New, 2, c.Options)
	const ctx = 8
	modes := []adi.Mode{adi.ModeStandard, adi.ModeSync, adi.ModeStandard, adi.ModeSync}
	j.Run(func(r *Rank) error {
		for k, mode := range modes {
			if r.ID == 0 {
				q, err := r.Send(mode, ctx, 1, k, adi.Bytes(nil))
				if err != nil {
					return err
				}
				if err := r.Wait(q); err != nil {
					return err
				}
				if q.Status.Err != nil {
					return fmt.Errorf("empty send, mode %d: %w", mode, q.Status.Err)
				}
				continue
			}
			buf, whole := guarded(16 * (k % 2))
			q, err := r.Recv(ctx, 0, k, adi.Bytes(buf))
			if err != nil {
				return err
			}
			if err := r.Wait(q); err != nil {
				return err
			}
			if err := recvOK(q, 0, k, 0); err != nil {
				return fmt.Errorf("empty message %d: %w", k, err)
			}
			if !untouched(whole) {
				return fmt.Errorf("empty message %d wrote into the buffer", k)
			}
		}
		return nil
	})
	checkQuiet(t, j)
}

// self: a rank sends to itself, every size and mode, with the send started
// before the receive and after it.
func self(t testing.TB, c Config) {
	j := Start(t, c.New, 2, c.Options)
	const ctx = 9
	j.Run(func(r *Rank) error {
		for k, n := range c.Sizes {
			for _, mode := range []adi.Mode{adi.ModeStandard, adi.ModeSync} {
				for _, sendFirst := range []bool{true, false} {
					tag := 4*k + int(mode)*2
					if sendFirst {
						tag++
					}
					buf := make([]byte, n)
					var s, q *adi.Request
					var err error
					if sendFirst {
						if s, err = r.Send(mode, ctx, r.ID, tag, adi.Bytes(pattern(k, n))); err != nil {
							return err
						}
					}
					if q, err = r.Recv(ctx, r.ID, tag, adi.Bytes(buf)); err != nil {
						return err
					}
					if !sendFirst {
						if s, err = r.Send(mode, ctx, r.ID, tag, adi.Bytes(pattern(k, n))); err != nil {
							return err
						}
					}
					if err := r.Wait(s, q); err != nil {
						return err
					}
					what := fmt.Sprintf("%d bytes to itself, mode %d, send first %v", n, mode, sendFirst)
					if s.Status.Err != nil {
						return fmt.Errorf("%s: send: %w", what, s.Status.Err)
					}
					if err := recvOK(q, r.ID, tag, n); err != nil {
						return fmt.Errorf("%s: %w", what, err)
					}
					if err := expect(buf, pattern(k, n), what); err != nil {
						return err
					}
				}
			}
		}
		return nil
	})
	checkQuiet(t, j)
}

// syncMode: a synchronous send does not complete while no receive matches
// it, however long both sides progress, and completes once one does.
func syncMode(t testing.TB, c Config) {
	j := Start(t, c.New, 2, c.Options)
	b := j.NewBarrier()
	const ctx, tag = 10, 1
	j.Run(func(r *Rank) error {
		if r.ID == 0 {
			q, err := r.Send(adi.ModeSync, ctx, 1, tag, adi.Bytes(pattern(0, 8)))
			if err != nil {
				return err
			}
			polls := 0
			if err := r.Until(func() bool { polls++; return polls > 200 || q.Done() }, func() string { return "polls" }); err != nil {
				return err
			}
			if q.Done() {
				return errors.New("a synchronous send completed before any receive was posted")
			}
			if err := r.Barrier(b); err != nil {
				return err
			}
			return r.Wait(q)
		}
		if err := r.Barrier(b); err != nil {
			return err
		}
		buf := make([]byte, 8)
		q, err := r.Recv(ctx, 0, tag, adi.Bytes(buf))
		if err != nil {
			return err
		}
		if err := r.Wait(q); err != nil {
			return err
		}
		return errors.Join(recvOK(q, 0, tag, 8), expect(buf, pattern(0, 8), "synchronous message"))
	})
	checkQuiet(t, j)
}

// iprobe: Iprobe sees nothing before a message is sent, then reports its
// envelope and size (with and without wildcards) without receiving it.
func iprobe(t testing.TB, c Config) {
	j := Start(t, c.New, 2, c.Options)
	b := j.NewBarrier()
	const ctx = 11
	var unsupported atomic.Value // the error of a device that refuses Iprobe
	j.Run(func(r *Rank) error {
		for k, n := range c.Sizes {
			tag := 100 + k
			if r.ID == 0 {
				if err := r.Barrier(b); err != nil {
					return err
				}
				if unsupported.Load() != nil {
					return nil
				}
				q, err := r.Send(adi.ModeStandard, ctx, 1, tag, adi.Bytes(pattern(k, n)))
				if err != nil {
					return err
				}
				if err := r.Wait(q); err != nil {
					return err
				}
				if err := r.Barrier(b); err != nil {
					return err
				}
				continue
			}
			_, ok, err := r.Dev.Iprobe(ctx, 0, tag)
			if errors.Is(err, adi.ErrNotSupported) {
				unsupported.Store(err)
				return r.Barrier(b)
			}
			if ok || err != nil {
				return fmt.Errorf("Iprobe before the send: found %v, error %v", ok, err)
			}
			if err := r.Barrier(b); err != nil {
				return err
			}
			var st adi.Status
			var perr error
			found := func() bool {
				var ok bool
				st, ok, perr = r.Dev.Iprobe(ctx, adi.AnySource, adi.AnyTag)
				return ok || perr != nil
			}
			if err := r.Until(found, func() string { return fmt.Sprintf("Iprobe to see message %d", k) }); err != nil {
				return err
			}
			if perr != nil || st.Source != 0 || st.Tag != tag || st.Bytes != n {
				return fmt.Errorf("Iprobe(any, any) of message %d: %+v, %v; want source 0 tag %d bytes %d", k, st, perr, tag, n)
			}
			if st2, ok, err := r.Dev.Iprobe(ctx, 0, tag); !ok || err != nil || st2.Bytes != n {
				return fmt.Errorf("Iprobe(0, %d) of message %d: %+v, %v, %v", tag, k, st2, ok, err)
			}
			if _, ok, _ := r.Dev.Iprobe(ctx+1, 0, tag); ok {
				return fmt.Errorf("Iprobe in another context found message %d", k)
			}
			buf := make([]byte, n)
			q, err := r.Recv(ctx, 0, tag, adi.Bytes(buf))
			if err != nil {
				return err
			}
			if err := r.Wait(q); err != nil {
				return err
			}
			if err := errors.Join(recvOK(q, 0, tag, n), expect(buf, pattern(k, n), "probed message")); err != nil {
				return err
			}
			if _, ok, _ := r.Dev.Iprobe(ctx, adi.AnySource, adi.AnyTag); ok {
				return fmt.Errorf("Iprobe still finds message %d after it was received", k)
			}
			if err := r.Barrier(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err := unsupported.Load(); err != nil {
		t.Skipf("SKIP: %s refuses Iprobe: %v", c.Name, err)
	}
	checkQuiet(t, j)
}

// nonContiguous: a strided send buffer arrives packed in a contiguous
// receive, and a contiguous message lands in a strided receive, leaving
// the gaps untouched; small and large.
func nonContiguous(t testing.TB, c Config) {
	j := Start(t, c.New, 2, c.Options)
	const ctx = 12
	const blk, stride = 3, 5
	j.Run(func(r *Rank) error {
		for k, count := range []int{4, 60000} {
			vec, err := datatype.Vector(count, blk, stride, datatype.Byte)
			if err != nil {
				return err
			}
			if err := vec.Commit(); err != nil {
				return err
			}
			n := count * blk
			span := (count-1)*stride + blk
			packed := pattern(k, n)
			if r.ID == 0 {
				strided := make([]byte, span)
				for i := range count {
					copy(strided[i*stride:i*stride+blk], packed[i*blk:])
				}
				s1, err := r.Send(adi.ModeStandard, ctx, 1, 2*k, adi.Buffer{Mem: strided, Count: 1, Type: vec})
				if err != nil {
					return err
				}
				s2, err := r.Send(adi.ModeStandard, ctx, 1, 2*k+1, adi.Bytes(packed))
				if err != nil {
					return err
				}
				if err := r.Wait(s1, s2); err != nil {
					return err
				}
				continue
			}
			flat := make([]byte, n)
			q1, err := r.Recv(ctx, 0, 2*k, adi.Bytes(flat))
			if err != nil {
				return err
			}
			into, whole := guarded(span)
			q2, err := r.Recv(ctx, 0, 2*k+1, adi.Buffer{Mem: into, Count: 1, Type: vec})
			if err != nil {
				return err
			}
			if err := r.Wait(q1, q2); err != nil {
				return err
			}
			if err := errors.Join(recvOK(q1, 0, 2*k, n), recvOK(q2, 0, 2*k+1, n)); err != nil {
				return err
			}
			if err := expect(flat, packed, fmt.Sprintf("strided send of %d bytes", n)); err != nil {
				return err
			}
			for i := range count {
				if !bytes.Equal(into[i*stride:i*stride+blk], packed[i*blk:i*blk+blk]) {
					return fmt.Errorf("strided receive of %d bytes: block %d wrong", n, i)
				}
				if i < count-1 && !untouched(into[i*stride+blk:(i+1)*stride]) {
					return fmt.Errorf("strided receive of %d bytes: gap after block %d written", n, i)
				}
			}
			if !untouched(whole[span:]) {
				return fmt.Errorf("strided receive of %d bytes: written past the buffer", n)
			}
		}
		return nil
	})
	checkQuiet(t, j)
}

// unknownOption: Init refuses an option it does not know, naming it.
func unknownOption(t testing.TB, c Config) {
	opts := map[string]string{"aditest-no-such-option": "1"}
	for k, v := range c.Options {
		opts[k] = v
	}
	d := c.New()
	err := d.Init(adi.Config{Rank: 0, Size: 1, KVS: newKVS(1), Options: opts})
	if err == nil {
		d.Finalize()
		t.Fatal("Init accepted the option aditest-no-such-option=1")
	}
	if !strings.Contains(err.Error(), "aditest-no-such-option") {
		t.Errorf("Init's error does not name the unknown option: %v", err)
	}
	t.Logf("Init: %v", err)
}

// optionHelp: every key the device's OptionHelp lists, with the default it
// shows, is accepted by Init (the help and the parser are one table).
func optionHelp(t testing.TB, c Config) {
	h, ok := c.New().(adi.OptionHelper)
	if !ok {
		t.Skipf("%s does not offer adi.OptionHelper", c.Name)
	}
	lines := strings.Split(strings.TrimRight(h.OptionHelp(), "\n"), "\n")
	if len(lines) == 0 || lines[0] == "" {
		t.Fatal("OptionHelp is empty")
	}
	for _, line := range lines {
		field := strings.Fields(line)
		if len(field) == 0 {
			t.Errorf("OptionHelp: blank line")
			continue
		}
		key, def, ok := strings.Cut(field[0], "=")
		if !ok {
			t.Errorf("OptionHelp line %q does not start with key=default", line)
			continue
		}
		d := c.New()
		if err := d.Init(adi.Config{Rank: 0, Size: 1, KVS: newKVS(1), Options: map[string]string{key: def}}); err != nil {
			t.Errorf("Init refuses %s=%s, which OptionHelp shows as the default: %v", key, def, err)
			continue
		}
		if err := d.Finalize(); err != nil {
			t.Errorf("Finalize after %s=%s: %v", key, def, err)
		}
	}
}

// shortSender: SendShort refuses (sending nothing) what it cannot send at
// once, such as a message far over any eager size, and a message it
// accepts arrives like any other.
func shortSender(t testing.TB, c Config) {
	if _, ok := c.New().(adi.ShortSender); !ok {
		t.Skipf("%s does not offer adi.ShortSender", c.Name)
	}
	j := Start(t, c.New, 2, c.Options)
	b := j.NewBarrier()
	const ctx = 13
	sig := datatype.Byte.Signature()
	var accepted atomic.Bool
	j.Run(func(r *Rank) error {
		if r.ID == 0 {
			ss := r.Dev.(adi.ShortSender)
			if ss.SendShort(ctx, 1, 1, sig, make([]byte, 8<<20)) {
				return errors.New("SendShort accepted 8 MiB")
			}
			// It may refuse a small message too (no credit, or never: the
			// core then sends it as usual); the receiver cannot tell.
			polls := 0
			if err := r.Until(func() bool {
				if ss.SendShort(ctx, 1, 2, sig, pattern(2, 8)) {
					accepted.Store(true)
					return true
				}
				polls++
				return polls > 200
			}, func() string { return "SendShort" }); err != nil {
				return err
			}
			if !accepted.Load() {
				q, err := r.Send(adi.ModeStandard, ctx, 1, 2, adi.Bytes(pattern(2, 8)))
				if err != nil {
					return err
				}
				if err := r.Wait(q); err != nil {
					return err
				}
			}
			return r.Barrier(b)
		}
		buf := make([]byte, 8)
		q, err := r.Recv(ctx, 0, 2, adi.Bytes(buf))
		if err != nil {
			return err
		}
		if err := r.Wait(q); err != nil {
			return err
		}
		if err := errors.Join(recvOK(q, 0, 2, 8), expect(buf, pattern(2, 8), "short message")); err != nil {
			return err
		}
		if err := r.Barrier(b); err != nil {
			return err
		}
		if _, ok, _ := r.Dev.Iprobe(ctx, adi.AnySource, 1); ok {
			return errors.New("the message SendShort refused arrived")
		}
		return nil
	})
	if !accepted.Load() {
		t.Logf("%s refused every SendShort of 8 bytes (allowed: the core then starts a request)", c.Name)
	}
	checkQuiet(t, j)
}

// multisender: IsendMulti delivers one buffer to every destination as an
// ordinary message from the sender.
func multisender(t testing.TB, c Config) {
	if _, ok := c.New().(adi.Multisender); !ok {
		t.Skipf("%s does not offer adi.Multisender", c.Name)
	}
	j := Start(t, c.New, c.Ranks, c.Options)
	const ctx = 14
	sizes := []int{0, 10, c.Sizes[len(c.Sizes)-1]}
	j.Run(func(r *Rank) error {
		for k, n := range sizes {
			if r.ID == 0 {
				var dests []int
				for p := 1; p < len(j.Devs); p++ {
					dests = append(dests, p)
				}
				q := &adi.Request{Op: adi.OpSend, Context: ctx, Tag: k, Buf: adi.Bytes(pattern(k, n))}
				if err := r.Dev.(adi.Multisender).IsendMulti(q, dests); err != nil {
					return err
				}
				if err := r.Wait(q); err != nil {
					return err
				}
				if q.Status.Err != nil {
					return fmt.Errorf("IsendMulti of %d bytes: %w", n, q.Status.Err)
				}
				continue
			}
			buf := make([]byte, n)
			q, err := r.Recv(ctx, 0, k, adi.Bytes(buf))
			if err != nil {
				return err
			}
			if err := r.Wait(q); err != nil {
				return err
			}
			if err := errors.Join(recvOK(q, 0, k, n), expect(buf, pattern(k, n), "multidestination message")); err != nil {
				return err
			}
		}
		return nil
	})
	checkQuiet(t, j)
}

// board: what a rank writes in its board slot and posts, every rank reads
// in that slot once it sees the post.
func board(t testing.TB, c Config) {
	if _, ok := c.New().(adi.Board); !ok {
		t.Skipf("%s does not offer adi.Board", c.Name)
	}
	j := Start(t, c.New, c.Ranks, c.Options)
	j.Run(func(r *Rank) error {
		bd := r.Dev.(adi.Board)
		for k := uint64(1); k <= 4; k++ {
			slot := bd.BoardSlot(r.ID, int(k%2))
			if len(slot) < 8 || bd.BoardSlotSize() < 8 {
				return fmt.Errorf("board slot of %d bytes", len(slot))
			}
			copy(slot, pattern(r.ID+int(k), 8))
			bd.BoardWaiting(true)
			bd.BoardPost(k, false)
			for p := range j.Devs {
				var perr error
				if err := r.Until(func() bool {
					ok, err := bd.BoardPosted(p, k)
					perr = err
					return ok || err != nil
				}, func() string { return fmt.Sprintf("rank %d to post round %d", p, k) }); err != nil {
					return err
				}
				if perr != nil {
					return fmt.Errorf("BoardPosted(%d, %d): %w", p, k, perr)
				}
				if err := expect(bd.BoardSlot(p, int(k%2))[:8], pattern(p+int(k), 8), fmt.Sprintf("rank %d's slot in round %d", p, k)); err != nil {
					return err
				}
			}
			bd.BoardWaiting(false)
		}
		return nil
	})
}
