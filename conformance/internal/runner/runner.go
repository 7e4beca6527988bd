// Package runner is the scaffolding the conformance programs share: picking
// a check by name, starting MPI, refusing a check that needs more ranks than
// it got (UNSUPPORTED), reporting failures as "FAIL <check>: rank R of N:
// <reason>", checking that the device holds nothing of this rank's own
// operations afterwards, and printing "PASS <check>" on rank 0 after
// MPI_Finalize, so that a pass means every rank got there.
package runner

import (
	"flag"
	"fmt"
	"os"

	"github.com/adimpi/adimpi/mpi"
)

// Check is one named conformance check.
type Check struct {
	Name     string
	MinRanks int    // fewer ranks: the check reports UNSUPPORTED
	Run      func() // fails through Failf; returning means it passed
}

// Program is one conformance program: its name and its checks, and hooks.
type Program struct {
	Name   string
	Checks []Check
	// Setup runs after MPI_Init, before the check, with MPI_COMM_WORLD.
	Setup func(world *mpi.Comm)
	// After runs after the check on every rank, before MPI_Finalize
	// (default: CheckLeaks).
	After func()
	// Unsupported, if set, is asked after each check: a non-empty reason
	// (the device refused an operation the check needs) turns PASS into
	// UNSUPPORTED. Setup should clear the reason, which is per check.
	Unsupported func() string
}

// The running check, for failure messages.
var (
	current    string
	world      *mpi.Comm
	rank, size int
)

// CommChecks turns checks written as functions of MPI_COMM_WORLD that
// return an error into Checks needing minRanks ranks each; a returned error
// fails the check.
func CommChecks(minRanks int, fns []NamedFunc) []Check {
	cs := make([]Check, 0, len(fns))
	for _, f := range fns {
		cs = append(cs, Check{Name: f.Name, MinRanks: minRanks, Run: func() {
			Must(f.Fn(mpi.World()), "%s", f.Name)
		}})
	}
	return cs
}

// NamedFunc is a check written as a function of MPI_COMM_WORLD.
type NamedFunc struct {
	Name string
	Fn   func(world *mpi.Comm) error
}

// Main runs the checks named on the command line ("all": every check), in
// one MPI job, or lists them with -list, and exits: 0 on PASS or
// UNSUPPORTED, 1 on FAIL, 2 on bad usage. Flags the program defined with
// package flag come before the checks' names. Rank 0 prints each check's
// PASS or UNSUPPORTED line after MPI_Finalize, so that a pass means every
// rank got there.
func (p Program) Main() {
	list := flag.Bool("list", false, "print the checks' names and exit")
	flag.Parse()
	args := flag.Args()
	if *list {
		for _, c := range p.Checks {
			fmt.Println(c.Name)
		}
		return
	}
	if len(args) == 0 {
		fmt.Fprintf(os.Stderr, "usage: %s [flags] <check>... | %s [flags] all | %s -list\n", p.Name, p.Name, p.Name)
		flag.PrintDefaults()
		os.Exit(2)
	}
	var run []*Check
	for _, a := range args {
		found := false
		for i := range p.Checks {
			if a == "all" || p.Checks[i].Name == a {
				run = append(run, &p.Checks[i])
				found = true
			}
		}
		if !found {
			fmt.Fprintf(os.Stderr, "%s: unknown check %q (%s -list shows them)\n", p.Name, a, p.Name)
			os.Exit(2)
		}
	}
	current = run[0].Name
	Must(mpi.Init(), "MPI_Init")
	world = mpi.World()
	rank, size = world.Rank(), world.Size()
	var report []string
	for i, c := range run {
		current = c.Name
		if size < c.MinRanks {
			report = append(report, fmt.Sprintf("UNSUPPORTED %s: needs %d ranks", c.Name, c.MinRanks))
			continue
		}
		if p.Setup != nil {
			p.Setup(world)
		}
		c.Run()
		if p.After != nil {
			p.After()
		} else {
			CheckLeaks()
		}
		line := "PASS " + c.Name
		if p.Unsupported != nil {
			if why := p.Unsupported(); why != "" {
				line = fmt.Sprintf("UNSUPPORTED %s: %s", c.Name, why)
			}
		}
		report = append(report, line)
		// Every rank is done with this check before the next starts, whatever
		// it reports: a refusal may be seen by some ranks only, so skipping
		// the barrier on it would pair one rank's next check with another's
		// barrier.
		if i < len(run)-1 {
			Must(mpi.Barrier(world), "MPI_Barrier after the check")
		}
	}
	Must(mpi.Finalize(), "MPI_Finalize")
	if rank == 0 {
		for _, line := range report {
			fmt.Println(line)
		}
	}
}

// Failf reports the running check as failed on this rank and exits 1.
func Failf(format string, args ...any) {
	who := fmt.Sprintf("rank %d of %d", rank, size)
	if world == nil { // before MPI_Init finished: what the launcher said
		who = fmt.Sprintf("rank %s of %s", os.Getenv("PMI_RANK"), os.Getenv("PMI_SIZE"))
	}
	fmt.Fprintf(os.Stderr, "FAIL %s: %s: %s\n", current, who, fmt.Sprintf(format, args...))
	os.Exit(1)
}

// Must fails the check with err, described by format, if err is not nil.
func Must(err error, format string, args ...any) {
	if err != nil {
		Failf("%s: %v", fmt.Sprintf(format, args...), err)
	}
}

// CheckLeaks fails the check if the device still holds state for this
// rank's own operations (posted receives, rendezvous in flight, sends
// waiting). Counters of what peers sent are not checked: a peer already in
// MPI_Finalize may have sent its barrier token.
func CheckLeaks() {
	c := mpi.Counters()
	for _, k := range []string{"posted_receives", "rendezvous_sends", "rendezvous_receives",
		"mpin_waiting_sends", "mpin_held_receives", "mpin_open_rtrs"} {
		if v := c[k]; v != 0 {
			Failf("after the check the device counter %s = %d, want 0 (counters %v)", k, v, c)
		}
	}
}

// Eq reports the first difference between got and want, naming what.
func Eq[T comparable](what string, got, want []T) error {
	if len(got) != len(want) {
		return fmt.Errorf("%s: length %d, want %d", what, len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			return fmt.Errorf("%s: element %d is %v, want %v", what, i, got[i], want[i])
		}
	}
	return nil
}

// Roots are the roots a rooted collective is checked with on n processes:
// the first, the last and the middle one.
func Roots(n int) []int {
	rs := []int{0}
	if n > 1 {
		rs = append(rs, n-1)
	}
	if n > 2 {
		rs = append(rs, n/2)
	}
	return rs
}
