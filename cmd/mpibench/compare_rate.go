package main

import "strconv"

// The message rate in compare: rate.go's pairs pattern at np 2, 1 B to 64
// KiB, on every target (bench/c/rate.c for MPICH and Open MPI).

// rateMaxSize is the largest message of compare's rate rows.
const rateMaxSize = 64 << 10

// planRate adds the rate runs: one per target, np 2, pattern pairs.
func (c *comparer) planRate(add func(*cmpTarget, string, int, string, []string),
	ours func(*cmpTarget, int, []string, string, ...string) []string,
	theirs func(*cmpTarget, int, string, ...string) []string) {
	args := []string{"--pattern", "pairs", "--min-size", "1", "--max-size", strconv.Itoa(rateMaxSize)}
	goTime, cTime := "50ms", "0.05"
	if c.opts.quick {
		goTime, cTime = "2ms", "0.002"
		args = append(args, "--reps", "5")
	}
	for _, t := range c.targets {
		if t.adimpi {
			add(t, "rate", 2, "rate np2", ours(t, 2, nil, c.bench, append([]string{"rate", "--csv", "--min-time", goTime}, args...)...))
		} else {
			add(t, "rate", 2, "rate np2", theirs(t, 2, "rate", append([]string{"--min-time", cTime}, args...)...))
		}
	}
}

// messageRate is the report's section on the rate rows.
func (r *cmpReport) messageRate() {
	r.perSizeSection("rate_pairs_mmps", "Message rate vs size",
		"Messages per second from rank 0 to rank 1 in windows of 64 Isends (osu_mbw_mr-style, `mpibench rate`; bench/c/rate.c), millions; higher is better.",
		"million messages/s", "rate.png", false, true)
}
