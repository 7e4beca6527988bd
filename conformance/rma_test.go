package conformance

import (
	"fmt"
	"strings"
	"testing"
)

// rmaNPs are the process counts of TestRMA: every check of conformance/rma
// runs in one job per device and count.
var rmaNPs = []int{1, 2, 3, 4}

// TestRMA runs every check of conformance/rma (one-sided communication)
// through mpirun under every registered device, one job per device and
// configuration running all the checks: at np = 1, 2, 3 and 4 (windows
// that the ranks of a host map: Put, Get, accumulates and locks without
// the target), at np = 4 with -create (windows of the program's memory:
// everything through the device's remote memory access or the target's
// agent) and with -create under mpirun -async-progress; under netvm also
// at np = 16 (contention on locks, CompareAndSwap and FetchAndOp, with
// and without -create) and with eager=0 and cma=off.
func TestRMA(t *testing.T) {
	eachDevice(t, func(t *testing.T, dev string) {
		for _, np := range rmaNPs {
			rmaJob(t, dev, nil, np, false)
		}
		rmaJob(t, dev, nil, 4, true)
		rmaJob(t, dev, []string{asyncOpt}, 4, true)
		if dev != "netvm" {
			return
		}
		rmaJob(t, dev, nil, 16, false)
		rmaJob(t, dev, nil, 16, true)
		for _, opt := range netvmOptions {
			rmaJob(t, dev, []string{opt}, 4, true)
		}
	})
}

// TestRMACrossHost runs every check of conformance/rma in one job per
// device across 3 simulated hosts, at np = 3 (one rank per host: every
// operation through the targets' agents over the network) and np = 6
// round-robin with -create (windows of the program's memory).
func TestRMACrossHost(t *testing.T) {
	_, launch := startHosts(t, crossHosts)
	for _, dev := range crossHostDevices {
		t.Run(dev, func(t *testing.T) {
			t.Parallel()
			for _, pl := range []placement{crossPlacements[0], crossPlacements[2]} {
				t.Run(pl.name, func(t *testing.T) {
					jobs <- struct{}{}
					args := []string{"all"}
					if pl.np == 6 {
						args = []string{"-create", "all"} // the program's memory: native on no host
					}
					r := runJob(rmaProg.bin, dev, nil, pl.np, args, append(append([]string(nil), launch...), pl.args...)...)
					<-jobs
					worst := "PASS"
					for _, check := range rmaProg.checks {
						if outcome := judge(t, r, pl.np, check); outcome != "PASS" {
							worst = outcome
							break
						}
					}
					noteProgress(r, worst)
				})
			}
		})
	}
}

// rmaJob runs all the rma checks in one job and judges each; create
// passes -create (windows of the program's memory).
func rmaJob(t *testing.T, dev string, opts []string, np int, create bool) {
	name := fmt.Sprintf("np=%d", np)
	args := []string{"all"}
	if create {
		name = "create/" + name
		args = []string{"-create", "all"}
	}
	for _, o := range opts {
		name = o + "/" + name
	}
	t.Run(name, func(t *testing.T) {
		jobs <- struct{}{}
		r := runJob(rmaProg.bin, dev, opts, np, args)
		<-jobs
		worst := "PASS"
		for _, check := range rmaProg.checks {
			outcome := judge(t, r, np, check)
			if outcome != "PASS" {
				worst = outcome
			}
			resultsMu.Lock()
			results = append(results, result{prog: rmaProg.name, device: dev, config: dev + "/" + name, check: check, outcome: outcome, elapsed: r.elapsed})
			resultsMu.Unlock()
			if outcome == "FAIL" {
				break // judge has shown the job's output
			}
		}
		noteProgress(r, worst)
	})
}

// TestRMADeadLockHolder: a rank that exits while it holds a window's lock,
// with another rank waiting for the lock, ends the job (the launcher sees
// the rank's exit status) rather than leaving the waiter hanging.
func TestRMADeadLockHolder(t *testing.T) {
	for _, create := range []bool{false, true} {
		args := []string{"-die-holding", "all"}
		if create {
			args = append([]string{"-create"}, args...)
		}
		r := runJob(rmaProg.bin, "netvm", nil, 3, args)
		out := r.stdout + r.stderr
		switch {
		case r.killed || r.elapsed >= mpirunTimeout:
			t.Fatalf("create=%v: the job hung after its lock holder died (%v):\n%s", create, r.elapsed, out)
		case r.err == nil:
			t.Fatalf("create=%v: the job succeeded though rank 1 exited with status 3:\n%s", create, out)
		case !strings.Contains(out, "rank 1") || !strings.Contains(out, "status 3"):
			t.Fatalf("create=%v: the job failed without naming rank 1's exit (status 3): %v\n%s", create, r.err, out)
		}
	}
}
