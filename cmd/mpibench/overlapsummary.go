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

// ovlKey names one overlap measurement in a results CSV.
type ovlKey struct {
	bench, device string
	np, size      int
}

// ovlResults holds the overlap rows of a results CSV (bench overlap_* and
// latency_async_ratio); a later row for the same key replaces an earlier one.
type ovlResults map[ovlKey]float64

// ovlVariants are the overlap ratio rows, in column order within a device,
// with the short labels of the table's columns.
var ovlVariants = []struct{ bench, label string }{
	{"overlap_plain", "plain"},
	{"overlap_iprobe", "iprobe"},
	{"overlap_async", "async"},
	{"overlap_async_iprobe", "async+iprobe"},
}

// ovlCMPIs are the C MPI libraries, whose columns come after adimpi's.
var ovlCMPIs = []string{"mpich", "openmpi"}

// readOverlapResults parses a CSV of bench,device,np,size,value,unit rows and
// keeps the overlap ones. Header and blank rows anywhere are skipped, and
// rows of other benchmarks ignored; a malformed row is an error naming its
// line.
func readOverlapResults(r io.Reader) (ovlResults, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	res := ovlResults{}
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
		if !strings.HasPrefix(rec[0], "overlap_") && rec[0] != "latency_async_ratio" {
			continue
		}
		np, err1 := strconv.Atoi(rec[2])
		size, err2 := strconv.Atoi(rec[3])
		v, err3 := strconv.ParseFloat(rec[4], 64)
		if err := errors.Join(err1, err2, err3); err != nil {
			return nil, fmt.Errorf("line %d: bad row %q: %v", line, strings.Join(rec, ","), err)
		}
		res[ovlKey{rec[0], rec[1], np, size}] = v
	}
}

// devices lists the devices of res: adimpi's first (sorted, so netvm comes
// before netvm+async), then the C MPIs in ovlCMPIs order.
func (res ovlResults) devices() []string {
	var ours, theirs []string
	for k := range res {
		switch {
		case slices.Contains(ovlCMPIs, k.device):
			if !slices.Contains(theirs, k.device) {
				theirs = append(theirs, k.device)
			}
		case !slices.Contains(ours, k.device):
			ours = append(ours, k.device)
		}
	}
	slices.Sort(ours)
	slices.SortFunc(theirs, func(a, b string) int {
		return slices.Index(ovlCMPIs, a) - slices.Index(ovlCMPIs, b)
	})
	return append(ours, theirs...)
}

// nps lists, sorted, the process counts of res.
func (res ovlResults) nps() []int {
	var out []int
	for k := range res {
		if !slices.Contains(out, k.np) {
			out = append(out, k.np)
		}
	}
	slices.Sort(out)
	return out
}

// sizes lists, sorted, the message sizes of res's ratio rows at np.
func (res ovlResults) sizes(np int) []int {
	var out []int
	for k := range res {
		if k.np == np && k.bench != "overlap_latency" && k.bench != "latency_async_ratio" && !slices.Contains(out, k.size) {
			out = append(out, k.size)
		}
	}
	slices.Sort(out)
	return out
}

// ovlColumn is one column of the ratio table: a device and a variant.
type ovlColumn struct{ device, bench, label string }

// columns lists the (device, variant) pairs that have at least one row at np.
func (res ovlResults) columns(np int) []ovlColumn {
	var cols []ovlColumn
	for _, d := range res.devices() {
		for _, v := range ovlVariants {
			for k := range res {
				if k.device == d && k.bench == v.bench && k.np == np {
					label := d + " " + v.label
					if v.bench == "overlap_async" {
						label = d // netvm+async says it all
					}
					cols = append(cols, ovlColumn{d, v.bench, label})
					break
				}
			}
		}
	}
	return cols
}

// get returns a value and whether it is there.
func (res ovlResults) get(bench, device string, np, size int) (float64, bool) {
	v, ok := res[ovlKey{bench, device, np, size}]
	return v, ok
}

// latencyAsyncRatio is the 8 B one-way latency of device+"+async" over that
// of device at np, and whether both are there.
func (res ovlResults) latencyAsyncRatio(device string, np int) (float64, bool) {
	off, ok1 := res.get("overlap_latency", device, np, 8)
	on, ok2 := res.get("overlap_latency", device+"+async", np, 8)
	if !ok1 || !ok2 || off <= 0 {
		return 0, false
	}
	return on / off, true
}

// noisyShare is the t_comm / t_comp below which an overlap ratio says more
// about the jitter of the computation than about the communication.
const noisyShare = 0.05

// noisy reports whether device's t_comm at (np, size) is so small next to
// its t_comp that run-to-run jitter of t_comp decides the ratio.
func (res ovlResults) noisy(device string, np, size int) bool {
	comm, ok1 := res.get("overlap_tcomm", device, np, size)
	comp, ok2 := res.get("overlap_tcomp", device, np, size)
	return ok1 && ok2 && comm < noisyShare*comp
}

// cell formats a value, or "-" when it is missing.
func cell(v float64, ok bool, format string) string {
	if !ok {
		return "-"
	}
	return fmt.Sprintf(format, v)
}

// writeOverlapSummary prints, per process count, the table of overlap
// ratios by size, the table of times (t_comm and t_ovl per variant, t_comp)
// and the 8 B latencies with latency_async_ratio, followed by the derived
// latency_async_ratio CSV rows (which bench/compare-overlap.sh keeps).
func writeOverlapSummary(w io.Writer, res ovlResults) {
	if len(res) == 0 {
		fmt.Fprintln(w, "no overlap rows")
		return
	}
	var derived []row
	for _, np := range res.nps() {
		cols := res.columns(np)
		szs := res.sizes(np)
		if len(szs) == 0 {
			continue
		}
		fmt.Fprintf(w, "Overlap ratio at np=%d: (t_comm + t_comp − t_ovl) / t_comm, clamped to [0, 1]\n", np)
		fmt.Fprintln(w, "(1 = the exchange hides entirely behind the computation, 0 = not at all)")
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprint(tw, "size\t")
		for _, c := range cols {
			fmt.Fprintf(tw, "%s\t", c.label)
		}
		fmt.Fprintln(tw)
		for _, n := range szs {
			fmt.Fprintf(tw, "%s\t", humanSize(n))
			for _, c := range cols {
				v, ok := res.get(c.bench, c.device, np, n)
				mark := ""
				if ok && res.noisy(c.device, np, n) {
					mark = "*"
				}
				fmt.Fprintf(tw, "%s%s\t", cell(v, ok, "%.2f"), mark)
			}
			fmt.Fprintln(tw)
		}
		tw.Flush()
		fmt.Fprintf(w, "* t_comm < %.0f%% of t_comp: the ratio is within the noise of t_comp\n", noisyShare*100)

		fmt.Fprintf(w, "\nTimes at np=%d in µs per iteration (largest over the ranks, best run)\n", np)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprint(tw, "size\t")
		type tcol struct{ bench, device string }
		var tcols []tcol
		for _, d := range res.devices() {
			for _, b := range []string{"overlap_tcomm", "overlap_tcomp"} {
				if _, ok := res.get(b, d, np, szs[len(szs)-1]); ok {
					tcols = append(tcols, tcol{b, d})
					fmt.Fprintf(tw, "%s %s\t", d, strings.Replace(b, "overlap_t", "t_", 1))
				}
			}
			for _, c := range cols {
				if c.device == d {
					b := "overlap_tovl_" + strings.TrimPrefix(c.bench, "overlap_")
					tcols = append(tcols, tcol{b, d})
					fmt.Fprintf(tw, "t_ovl %s\t", strings.TrimPrefix(c.bench, "overlap_"))
				}
			}
		}
		fmt.Fprintln(tw)
		for _, n := range szs {
			fmt.Fprintf(tw, "%s\t", humanSize(n))
			for _, c := range tcols {
				v, ok := res.get(c.bench, c.device, np, n)
				fmt.Fprintf(tw, "%s\t", cell(v, ok, "%.1f"))
			}
			fmt.Fprintln(tw)
		}
		tw.Flush()

		fmt.Fprintf(w, "\n8 B one-way latency at np=%d (blocking ping-pong):", np)
		for _, d := range res.devices() {
			if v, ok := res.get("overlap_latency", d, np, 8); ok {
				fmt.Fprintf(w, "  %s %.3f µs", d, v)
			}
		}
		fmt.Fprintln(w)
		for _, d := range res.devices() {
			if r, ok := res.latencyAsyncRatio(d, np); ok {
				verdict := "within"
				if r > 1.2 {
					verdict = "ABOVE"
				}
				fmt.Fprintf(w, "latency_async_ratio %s: %.2fx (%s the 1.2x target)\n", d, r, verdict)
				derived = append(derived, row{"latency_async_ratio", d, np, 8, r, "x"})
			} else if v, ok := res.get("latency_async_ratio", d, np, 8); ok {
				fmt.Fprintf(w, "latency_async_ratio %s: %.2fx (from the CSV)\n", d, v)
			}
		}
		fmt.Fprintln(w)
	}
	if len(derived) > 0 {
		fmt.Fprintln(w, "derived rows:")
		for _, r := range derived {
			fmt.Fprintf(w, "%s,%s,%d,%d,%s,%s\n", r.bench, r.device, r.np, r.size, formatValue(r.value), r.unit)
		}
	}
}

// runSummarizeOverlap is the summarize-overlap subcommand: it reads the
// results CSV named by its one argument and prints the overlap tables.
func runSummarizeOverlap(args []string) {
	if len(args) != 1 {
		fmt.Fprintln(os.Stderr, "usage: mpibench summarize-overlap results.csv")
		os.Exit(2)
	}
	f, err := os.Open(args[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, "mpibench summarize-overlap:", err)
		os.Exit(1)
	}
	defer f.Close()
	res, err := readOverlapResults(f)
	if err != nil {
		fmt.Fprintf(os.Stderr, "mpibench summarize-overlap: %s: %v\n", args[0], err)
		os.Exit(1)
	}
	writeOverlapSummary(os.Stdout, res)
}
