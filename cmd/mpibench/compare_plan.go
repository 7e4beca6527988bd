package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// cmpLibs describes the C MPI libraries: the compiler, the launcher, the
// Debian packages that bring them, and the launcher's option sets to try
// (Open MPI as root needs --allow-run-as-root, and where its default
// transports fail, shared memory with the ob1 PML), as bench/lib.sh and the
// bench/compare*.sh scripts do.
var cmpLibs = map[string]struct {
	cc, run  string
	packages string
	tries    [][]string
}{
	"mpich": {"mpicc.mpich", "mpiexec.mpich", "mpich libmpich-dev", [][]string{nil}},
	"openmpi": {"mpicc.openmpi", "mpiexec.openmpi", "openmpi-bin libopenmpi-dev", [][]string{
		{"--allow-run-as-root", "--oversubscribe"},
		{"--allow-run-as-root", "--oversubscribe", "--mca", "btl", "self,vader", "--mca", "pml", "ob1"},
		{"--allow-run-as-root", "--oversubscribe", "--mca", "btl", "self,sm", "--mca", "pml", "ob1"},
	}},
}

// cmpCSources are the bench/c programs each benchmark needs.
var cmpCSources = map[string]string{
	"pingpong": "mpibench", "bw": "mpibench", "anysource": "mpibench", "rate": "rate",
	"coll": "coll", "overlap": "overlap", "netpipe": "mpibench",
}

// findMPI finds lib's compiler and launcher, builds the bench/c programs
// with it and checks that a tiny job runs. Its error says why lib is left out.
func (c *comparer) findMPI(ctx context.Context, lib string) (*cmpTarget, error) {
	spec := cmpLibs[lib]
	for _, tool := range []string{spec.cc, spec.run} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("%s skipped: %s not found (apt-get install -y %s)", lib, tool, spec.packages)
		}
	}
	if c.root == "" {
		return nil, fmt.Errorf("%s skipped: bench/c not found (run from inside the adimpi source tree)", lib)
	}
	t := &cmpTarget{name: lib, bins: map[string]string{}}
	for _, b := range c.opts.benches {
		src, ok := cmpCSources[b]
		if !ok || t.bins[src] != "" {
			continue
		}
		bin := filepath.Join(c.tmp, src+"-"+lib)
		cmd := exec.CommandContext(ctx, spec.cc, "-O2", "-o", bin, filepath.Join(c.root, "bench", "c", src+".c"))
		if out, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("%s skipped: bench/c/%s.c does not build: %v: %s", lib, src, err, lastLine(string(out)))
		}
		t.bins[src] = bin
	}
	t.version = mpiVersion(lib)
	if len(t.bins) == 0 {
		return nil, fmt.Errorf("%s skipped: none of the chosen benchmarks has a C counterpart", lib)
	}
	// The probe: a 2-rank job of whichever program was built, with each option set in turn.
	var probe []string
	switch {
	case t.bins["mpibench"] != "":
		probe = []string{t.bins["mpibench"], "pingpong", "--max-size", "8", "--iters", "100", "--reps", "1"}
	case t.bins["coll"] != "":
		probe = []string{t.bins["coll"], "--iters", "2", "--reps", "1"}
	case t.bins["rate"] != "":
		probe = []string{t.bins["rate"], "--min-size", "8", "--max-size", "8", "--iters", "2", "--reps", "1"}
	default:
		probe = []string{t.bins["overlap"], "plain", "--iters", "2", "--reps", "1", "--no-check"}
	}
	var log strings.Builder
	for _, opts := range spec.tries {
		launch := append([]string{spec.run}, opts...)
		argv := append(append(slices.Clone(launch), "-n", "2"), probe...)
		fmt.Fprintf(&log, "# %s\n", strings.Join(argv, " "))
		if _, err := runLimited(ctx, 60*time.Second, argv, io.Discard, &log); err == nil {
			t.launch = launch
			return t, nil
		} else {
			fmt.Fprintf(&log, "# %v\n", err)
		}
	}
	probeLog := filepath.Join(c.logs, lib+"-probe.err")
	_ = os.WriteFile(probeLog, []byte(log.String()), 0o644)
	return nil, fmt.Errorf("%s skipped: a 2-rank job does not run here (see %s)", lib, probeLog)
}

// mpiVersion asks lib for its version, "MPICH 4.0.2" or "Open MPI 4.1.4".
func mpiVersion(lib string) string {
	if lib == "mpich" {
		out, _ := exec.Command("mpichversion").Output()
		for _, l := range strings.Split(string(out), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "MPICH Version" {
				return "MPICH " + strings.TrimSpace(v)
			}
		}
		return "MPICH"
	}
	out, _ := exec.Command("mpiexec.openmpi", "--version").Output()
	if f := strings.Fields(strings.SplitN(string(out), "\n", 2)[0]); len(f) > 0 {
		return "Open MPI " + f[len(f)-1]
	}
	return "Open MPI"
}

// plan lists the runs: benchmark by benchmark, each across the targets.
func (c *comparer) plan() []*cmpStep {
	o := c.opts
	var steps []*cmpStep
	q := o.quick
	// Settings of the Go (g) and C (cc) programs; min-time is a duration
	// for mpibench and seconds for bench/c.
	var p2pG, p2pC []string
	if q {
		// Short timed rounds, best of several: on a busy machine a
		// round that was descheduled is dropped rather than averaged in.
		p2pG = []string{"--max-size", "1048576", "--min-time", "2ms", "--reps", "5"}
		p2pC = []string{"--max-size", "1048576", "--min-time", "0.002", "--reps", "5"}
	}
	anyArgs := []string{}
	if q {
		anyArgs = []string{"--msgs", "200", "--reps", "1"}
	}
	collMin := func(np int) time.Duration {
		switch {
		case q:
			return 3 * time.Millisecond
		case np >= 16:
			return 20 * time.Millisecond
		}
		return 50 * time.Millisecond
	}
	collReps, ovlReps, ovlMin := "3", "5", 50*time.Millisecond
	if q {
		ovlReps, ovlMin = "3", 5*time.Millisecond
	}
	add := func(t *cmpTarget, bench string, np int, what string, argv []string) {
		label := fmt.Sprintf("%s-%s", t.name, strings.ReplaceAll(what, " ", "-"))
		steps = append(steps, &cmpStep{target: t, bench: bench, np: np, label: label, what: what, argv: argv})
	}
	// adimpi runs mpibench under our mpirun; mpirun's own limit comes a
	// little before ours, so that it gets to stop its ranks and say so.
	mpirunLimit := max(o.limit-5*time.Second, o.limit/2)
	ours := func(t *cmpTarget, np int, extra []string, prog string, args ...string) []string {
		argv := []string{c.mpirun, "-np", strconv.Itoa(np), "-device", t.name, "-timeout", mpirunLimit.String()}
		argv = append(argv, extra...)
		return append(append(argv, prog), args...)
	}
	theirs := func(t *cmpTarget, np int, prog string, args ...string) []string {
		argv := append(slices.Clone(t.launch), "-n", strconv.Itoa(np), t.bins[prog])
		return append(argv, args...)
	}
	for _, bench := range o.benches {
		switch bench {
		case "pingpong", "bw":
			for _, t := range c.targets {
				if t.adimpi {
					add(t, bench, 2, bench+" np2", ours(t, 2, nil, c.bench, append([]string{bench, "--csv"}, p2pG...)...))
				} else {
					add(t, bench, 2, bench+" np2", theirs(t, 2, "mpibench", append([]string{bench}, p2pC...)...))
				}
			}
		case "rate":
			c.planRate(add, ours, theirs)
		case "netpipe":
			steps = append(steps, c.netpipeSteps()...)
		case "anysource":
			for _, np := range o.nps {
				args := append([]string{"anysource", "--senders", strconv.Itoa(np - 1)}, anyArgs...)
				for _, t := range c.targets {
					what := fmt.Sprintf("anysource np%d", np)
					if t.adimpi {
						add(t, bench, np, what, ours(t, np, nil, c.bench, slices.Concat(args, []string{"--csv"})...))
					} else {
						add(t, bench, np, what, theirs(t, np, "mpibench", args...))
					}
				}
			}
		case "coll":
			// On MPI_COMM_WORLD, and from np 4 on (not --quick) on a Dup
			// of it too (rows coll_*_dup).
			for _, np := range o.nps {
				comms := []string{"world"}
				if np >= 4 && !q {
					comms = append(comms, "dup")
				}
				for _, comm := range comms {
					for _, t := range c.targets {
						what := fmt.Sprintf("coll np%d", np)
						if comm != "world" {
							what = fmt.Sprintf("coll %s np%d", comm, np)
						}
						if t.adimpi {
							add(t, bench, np, what, ours(t, np, nil, c.bench, "coll", "--csv", "--comm", comm, "--reps", collReps, "--min-time", collMin(np).String()))
						} else {
							add(t, bench, np, what, theirs(t, np, "coll", "--device", t.name, "--comm", comm, "--reps", collReps,
								"--min-time", strconv.FormatFloat(collMin(np).Seconds(), 'f', -1, 64)))
						}
					}
				}
			}
		case "overlap":
			compute := fmt.Sprintf("compute=%dus", o.computeUS)
			for _, t := range c.targets {
				if t.adimpi {
					args := []string{"--csv", "--reps", ovlReps, "--min-time", ovlMin.String(), "overlap"}
					add(t, bench, 2, "overlap np2", ours(t, 2, nil, c.bench, slices.Concat(args, []string{"plain", "iprobe", compute})...))
					add(t, bench, 2, "overlap async np2", ours(t, 2, []string{"-async-progress"}, c.bench, slices.Concat(args, []string{"plain", compute})...))
				} else {
					add(t, bench, 2, "overlap np2", theirs(t, 2, "overlap", "plain", "iprobe", "--compute-us", strconv.Itoa(o.computeUS),
						"--reps", ovlReps, "--min-time", strconv.FormatFloat(ovlMin.Seconds(), 'f', -1, 64)))
				}
			}
		case "examples":
			if c.exBins == nil {
				continue
			}
			for _, ex := range compareExamples {
				for _, np := range o.nps {
					for _, t := range c.targets {
						if !t.adimpi {
							continue
						}
						what := fmt.Sprintf("%s np%d", ex.name, np)
						add(t, bench, np, what, ours(t, np, nil, c.exBins[ex.name], o.exampleArgs(ex.name)...))
						s := steps[len(steps)-1]
						s.example, s.reps = ex.name, o.exReps
					}
				}
			}
		}
	}
	return steps
}
