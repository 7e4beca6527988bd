package aditest

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/adimpi/adimpi/adi"
	"github.com/adimpi/adimpi/adi/aditest/loopback"
)

// recorder is a testing.TB that records failures instead of failing the
// test, so that the suite's checks can be run against broken devices.
type recorder struct {
	testing.TB
	mu      sync.Mutex
	failed  bool
	skipped bool
	msgs    []string
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failed = true
	r.msgs = append(r.msgs, fmt.Sprintf(format, args...))
}

func (r *recorder) Error(args ...any) { r.Errorf("%s", fmt.Sprint(args...)) }

func (r *recorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	runtime.Goexit()
}

func (r *recorder) Fatal(args ...any) { r.Fatalf("%s", fmt.Sprint(args...)) }

func (r *recorder) Skipf(format string, args ...any) {
	r.mu.Lock()
	r.skipped = true
	r.mu.Unlock()
	runtime.Goexit()
}

func (r *recorder) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed
}

func (r *recorder) Logf(string, ...any) {}

// runCheck runs check against the device f makes and returns what it
// recorded.
func runCheck(t *testing.T, check func(testing.TB, Config), f adi.Factory) *recorder {
	rec := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		check(rec, Config{Name: "broken", New: f, Ranks: 3, Sizes: DefaultSizes, InProcess: true})
	}()
	<-done
	return rec
}

// broken is a loopback device with one fault.
type broken struct {
	adi.Device
	fault string
}

func (b *broken) Irecv(r *adi.Request) error {
	switch b.fault {
	case "no-truncate":
		r.OnDone = func(r *adi.Request) { r.Status.Err = nil }
	case "wrong-source":
		r.OnDone = func(r *adi.Request) { r.Status.Source++ }
	case "overrun":
		r.OnDone = func(r *adi.Request) {
			if n := len(r.Buf.Mem); n > 0 && r.Status.Bytes < r.Buf.Size()+1 && r.Status.Err != nil {
				*(*byte)(unsafe.Add(unsafe.Pointer(&r.Buf.Mem[0]), n)) = 0
			}
		}
	}
	return b.Device.Irecv(r)
}

func (b *broken) CancelRecv(r *adi.Request) bool {
	if b.fault == "fake-cancel" {
		r.Complete(adi.Status{Cancelled: true})
		return true // but the receive stays posted
	}
	return b.Device.CancelRecv(r)
}

func (b *broken) Iprobe(ctx uint32, src, tag int) (adi.Status, bool, error) {
	st, ok, err := b.Device.Iprobe(ctx, src, tag)
	if b.fault == "probe-size" && ok {
		st.Bytes++
	}
	return st, ok, err
}

func (b *broken) Isend(r *adi.Request) error {
	if b.fault == "sync-early" && r.Mode == adi.ModeSync {
		r.Mode = adi.ModeStandard
	}
	return b.Device.Isend(r)
}

func faulty(fault string) adi.Factory {
	return func() adi.Device { return &broken{Device: loopback.New(), fault: fault} }
}

// Each check passes on the loopback device and fails on a device with the
// fault it is there to catch.
func TestChecksCatchFaults(t *testing.T) {
	old := Timeout
	Timeout = 3 * time.Second
	defer func() { Timeout = old }()
	for _, c := range []struct {
		name  string
		check func(testing.TB, Config)
		fault string
		want  string // in the recorded failure
	}{
		{"Truncate", truncate, "no-truncate", "want ErrTruncate"},
		{"Truncate", truncate, "overrun", "past the receive buffer"},
		{"AnySourceAnyTag", anySourceAnyTag, "wrong-source", "wildcard receive"},
		{"Order", order, "wrong-source", "status"},
		{"Cancel", cancel, "fake-cancel", "requests not complete"},
		{"Iprobe", iprobe, "probe-size", "Iprobe(any, any)"},
		{"Sync", syncMode, "sync-early", "completed before any receive was posted"},
	} {
		t.Run(c.name+"/"+c.fault, func(t *testing.T) {
			if rec := runCheck(t, c.check, loopback.New); rec.failed || rec.skipped {
				t.Fatalf("the check fails on the loopback device: %q", rec.msgs)
			}
			rec := runCheck(t, c.check, faulty(c.fault))
			if !rec.failed {
				t.Fatalf("the check passed a device with fault %s", c.fault)
			}
			if !strings.Contains(strings.Join(rec.msgs, "\n"), c.want) {
				t.Errorf("the failure does not say %q: %q", c.want, rec.msgs)
			}
		})
	}
}
