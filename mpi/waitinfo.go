package mpi

import (
	"fmt"
	"os"
	"os/signal"
	goruntime "runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/adimpi/adimpi/adi"
)

// Wait reports: when a job hangs, mpirun -timeout sends every rank
// waitReportSignal, and the rank prints one line to stderr saying where
// it waits: the MPI call, the peer, tag and communicator of the request it
// waits for, and for how long. A wait is recorded only once it has spun
// for its while and goes to sleep on the device (runtime.wait), so the
// polling path of a wait pays nothing; a sleep costs a futex wake-up
// anyway, which dwarfs recording it.

// waitReportSignal asks a rank for its wait report.
const waitReportSignal = syscall.SIGUSR2

// waitReportPrefix starts every wait report line (mpirun recognises them).
const waitReportPrefix = "adimpi: rank "

// waitRecord is one goroutine's wait that went to sleep.
type waitRecord struct {
	since int64 // nanotime at which the wait began
	req   bool  // the wait is for one point-to-point request (the fields below)
	recv  bool
	peer  int // communicator rank, or AnySource
	tag   int
	comm  string
	pcs   [32]uintptr // the waiter's stack, for the MPI call's name
	npc   int
	prev  *waitRecord
	next  *waitRecord
}

// waits holds the sleeping waits of the process.
var waits struct {
	mu   sync.Mutex
	head *waitRecord // doubly linked list of sleeping waits
	free *waitRecord // released records, linked by next
}

// beginWait records that a wait started at since (nanotime) is going to
// sleep; ar and c, if not nil, are the request it waits for and its
// communicator. The caller passes the record to endWait when the wait ends.
func beginWait(since int64, ar *adi.Request, c *Comm) *waitRecord {
	waits.mu.Lock()
	w := waits.free
	if w != nil {
		waits.free = w.next
	} else {
		w = new(waitRecord)
	}
	*w = waitRecord{since: since}
	if ar != nil && c != nil {
		w.req, w.recv, w.tag, w.comm = true, ar.Op == adi.OpRecv, ar.Tag, c.Name()
		w.peer = c.commRank(ar.Peer)
	}
	w.npc = goruntime.Callers(3, w.pcs[:])
	w.next = waits.head
	if waits.head != nil {
		waits.head.prev = w
	}
	waits.head = w
	waits.mu.Unlock()
	return w
}

// endWait removes a record of beginWait.
func endWait(w *waitRecord) {
	waits.mu.Lock()
	if w.prev != nil {
		w.prev.next = w.next
	} else {
		waits.head = w.next
	}
	if w.next != nil {
		w.next.prev = w.prev
	}
	*w = waitRecord{next: waits.free}
	waits.free = w
	waits.mu.Unlock()
}

var (
	waitReportsOnce sync.Once
	initDone        atomic.Bool // Init has returned successfully
)

// startWaitReports installs the handler of waitReportSignal, once per
// process; rank is the process's rank in MPI_COMM_WORLD.
func startWaitReports(rank int) {
	waitReportsOnce.Do(func() {
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, waitReportSignal)
		go func() {
			for range ch {
				os.Stderr.WriteString(waitReport(rank, nanotime()))
			}
		}()
	})
}

// waitReport is the report line of the process at time now (nanotime).
func waitReport(rank int, now int64) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s%d: ", waitReportPrefix, rank)
	waits.mu.Lock()
	n := 0
	for w := waits.head; w != nil; w = w.next {
		if n > 0 {
			b.WriteString("; and ")
		}
		n++
		fmt.Fprintf(&b, "waiting %v in %s", time.Duration(now-w.since).Round(time.Millisecond), callName(w.pcs[:w.npc]))
		if w.req {
			b.WriteString(": ")
			if w.recv {
				b.WriteString("receive from ")
			} else {
				b.WriteString("send to ")
			}
			switch w.peer {
			case adi.AnySource:
				b.WriteString("any source")
			default:
				fmt.Fprintf(&b, "rank %d", w.peer)
			}
			if w.tag == adi.AnyTag {
				b.WriteString(", any tag")
			} else {
				fmt.Fprintf(&b, ", tag %d", w.tag)
			}
			fmt.Fprintf(&b, ", on %s", w.comm)
		}
	}
	waits.mu.Unlock()
	switch {
	case n > 0:
	case !initDone.Load():
		b.WriteString("in MPI_Init, wiring up with the other ranks (all of them must call MPI_Init)")
	case live.Load() == nil:
		b.WriteString("MPI_Finalize has returned")
	default:
		b.WriteString("not waiting in an MPI call (computing, or blocked outside MPI)")
	}
	b.WriteByte('\n')
	return b.String()
}

// callName is the MPI call a waiter's stack is in: the outermost function
// of package mpi, as "mpi.Recv" or "mpi.(*Request).Wait".
func callName(pcs []uintptr) string {
	const pkg = "github.com/adimpi/adimpi/mpi."
	name := ""
	frames := goruntime.CallersFrames(pcs)
	for {
		f, more := frames.Next()
		if rest, ok := strings.CutPrefix(f.Function, pkg); ok {
			name = rest
		} else if name != "" {
			break
		}
		if !more {
			break
		}
	}
	if name == "" {
		return "an MPI call"
	}
	if i := strings.Index(name, "["); i >= 0 {
		name = name[:i] // a generic function's instantiation
	}
	return "mpi." + name
}
