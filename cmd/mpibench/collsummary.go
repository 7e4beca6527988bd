package main

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
)

// collKey names one collective measurement in a results CSV.
type collKey struct {
	bench, device string
	np, size      int
}

// collResults holds the coll_* rows of a results CSV; a later row for the
// same key replaces an earlier one.
type collResults map[collKey]float64

// collCMPIs are the C MPI libraries that summarize-coll compares with, in
// column order; every other device is one of ours.
var collCMPIs = []string{"mpich", "openmpi"}

// collOrder is the order of the table's sections: collective and size.
var collOrder = []struct {
	label, bench string
	size         int
}{
	{"Barrier", "coll_barrier", 0},
	{"Allreduce 8 B", "coll_allreduce", 8},
	{"Allreduce 1 MiB", "coll_allreduce", 1 << 20},
	{"Allreduce 8 MiB", "coll_allreduce", 8 << 20},
	{"Bcast 1 MiB", "coll_bcast", 1 << 20},
	{"Alltoall 64 KiB/pair", "coll_alltoall", 64 << 10},
}

// readCollResults parses a CSV of bench,device,np,size,value,unit rows and
// keeps those whose bench starts with "coll_". Header rows anywhere are
// skipped; a malformed row is an error naming its line.
func readCollResults(r io.Reader) (collResults, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	res := collResults{}
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			return res, nil
		}
		if err != nil {
			return nil, err
		}
		line, _ := cr.FieldPos(0)
		if len(rec) == 1 && strings.TrimSpace(rec[0]) == "" {
			continue
		}
		if len(rec) != 6 {
			return nil, fmt.Errorf("line %d: %d fields, want 6 (bench,device,np,size,value,unit)", line, len(rec))
		}
		if rec[0] == "bench" || !strings.HasPrefix(rec[0], "coll_") {
			continue
		}
		np, err1 := strconv.Atoi(rec[2])
		size, err2 := strconv.Atoi(rec[3])
		v, err3 := strconv.ParseFloat(rec[4], 64)
		if err := errors.Join(err1, err2, err3); err != nil {
			return nil, fmt.Errorf("line %d: bad row %q: %v", line, strings.Join(rec, ","), err)
		}
		res[collKey{rec[0], rec[1], np, size}] = v
	}
}

// ourDevices lists, sorted, the devices in res that are not C MPIs.
func (res collResults) ourDevices() []string {
	var out []string
	for k := range res {
		if !slices.Contains(collCMPIs, k.device) && !slices.Contains(out, k.device) {
			out = append(out, k.device)
		}
	}
	slices.Sort(out)
	return out
}

// nps lists, sorted, the np values that a collective and size have rows for.
func (res collResults) nps(bench string, size int) []int {
	var out []int
	for k := range res {
		if k.bench == bench && k.size == size && !slices.Contains(out, k.np) {
			out = append(out, k.np)
		}
	}
	slices.Sort(out)
	return out
}

// collCell prints a value in µs, or n/a.
func collCell(res collResults, k collKey) string {
	v, ok := res[k]
	if !ok {
		return "n/a"
	}
	return formatValue(v)
}

// collRatio is ours over the faster of the C MPIs, with ok false if
// either side is missing.
func collRatio(res collResults, ours collKey) (float64, bool) {
	v, ok := res[ours]
	if !ok {
		return 0, false
	}
	best, bestOK := 0.0, false
	for _, d := range collCMPIs {
		k := ours
		k.device = d
		if c, ok := res[k]; ok && c > 0 && (!bestOK || c < best) {
			best, bestOK = c, true
		}
	}
	if !bestOK {
		return 0, false
	}
	return v / best, true
}

// summarizeColl prints, for every collective and np in res, the time per
// call of our devices, MPICH and Open MPI, and ours / the better of the
// two C MPIs (> 1: we are slower; ! marks more than 2×).
func summarizeColl(w io.Writer, res collResults) {
	ours := res.ourDevices()
	fmt.Fprintln(w, "== collectives: time per call in us (max over ranks of the average, best of the repetitions); ratio = ours / best C MPI, > 1 means ours is slower, ! marks > 2x")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "collective\tnp\t")
	for _, d := range ours {
		fmt.Fprintf(tw, "%s\t", d)
	}
	for _, d := range collCMPIs {
		fmt.Fprintf(tw, "%s\t", d)
	}
	for _, d := range ours {
		fmt.Fprintf(tw, "%s/best\t", d)
	}
	fmt.Fprintln(tw, "\t")
	var order []struct {
		label, bench string
		size         int
	}
	for _, suffix := range []string{"", "_dup"} {
		for _, c := range collOrder {
			c.bench += suffix
			if suffix != "" {
				c.label += " (Dup)"
			}
			order = append(order, c)
		}
	}
	for _, c := range order {
		for _, np := range res.nps(c.bench, c.size) {
			fmt.Fprintf(tw, "%s\t%d\t", c.label, np)
			for _, d := range append(slices.Clone(ours), collCMPIs...) {
				fmt.Fprintf(tw, "%s\t", collCell(res, collKey{c.bench, d, np, c.size}))
			}
			mark := ""
			for _, d := range ours {
				r, ok := collRatio(res, collKey{c.bench, d, np, c.size})
				if !ok {
					fmt.Fprint(tw, "n/a\t")
					continue
				}
				fmt.Fprintf(tw, "%s\t", strconv.FormatFloat(r, 'f', 2, 64))
				if r > 2 {
					mark = "!"
				}
			}
			fmt.Fprintf(tw, "%s\t\n", mark)
		}
	}
	tw.Flush()
}

// medianCollResults merges the results of several rounds: each cell is the
// median of the rounds that have it (the mean of the middle two for an even
// count).
func medianCollResults(rounds []collResults) collResults {
	all := map[collKey][]float64{}
	for _, res := range rounds {
		for k, v := range res {
			all[k] = append(all[k], v)
		}
	}
	out := collResults{}
	for k, vs := range all {
		slices.Sort(vs)
		m := len(vs) / 2
		if len(vs)%2 == 1 {
			out[k] = vs[m]
		} else {
			out[k] = (vs[m-1] + vs[m]) / 2
		}
	}
	return out
}

// runSummarizeColl is the summarize-coll subcommand: args are the results
// CSVs' paths, one per round (each cell is the median over the rounds).
func runSummarizeColl(args []string) {
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "usage: mpibench summarize-coll results.csv... (several: one per round, medians)")
		os.Exit(2)
	}
	var rounds []collResults
	for _, path := range args {
		f, err := os.Open(path)
		if err == nil {
			var res collResults
			res, err = readCollResults(f)
			f.Close()
			rounds = append(rounds, res)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "mpibench summarize-coll: %s: %v\n", path, err)
			os.Exit(1)
		}
	}
	summarizeColl(os.Stdout, medianCollResults(rounds))
}
