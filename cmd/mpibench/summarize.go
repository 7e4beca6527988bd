package main

import (
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
)

// key names one measurement in a results CSV.
type key struct {
	bench, device string
	np, size      int
}

// results is a parsed results CSV.
type results map[key]float64

// readResults parses a CSV of rows (header rows anywhere are skipped).
func readResults(path string) (results, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cr := csv.NewReader(f)
	cr.FieldsPerRecord = 6
	res := results{}
	for line := 1; ; line++ {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		if rec[0] == "bench" {
			continue
		}
		np, err1 := strconv.Atoi(rec[2])
		size, err2 := strconv.Atoi(rec[3])
		v, err3 := strconv.ParseFloat(rec[4], 64)
		if err1 != nil || err2 != nil || err3 != nil {
			return nil, fmt.Errorf("%s:%d: bad row %q", path, line, strings.Join(rec, ","))
		}
		res[key{rec[0], rec[1], np, size}] = v
	}
	return res, nil
}

// get returns a value and whether it is there.
func (r results) get(bench, device string, np, size int) (float64, bool) {
	v, ok := r[key{bench, device, np, size}]
	return v, ok
}

// num prints a value or n/a.
func num(v float64, ok bool) string {
	if !ok {
		return "n/a"
	}
	return formatValue(v)
}

// ratio prints a/b or n/a.
func ratio(a float64, aok bool, b float64, bok bool) string {
	if !aok || !bok || b == 0 {
		return "n/a"
	}
	return strconv.FormatFloat(a/b, 'f', 2, 64)
}

// mpis are the C MPI libraries compared against, in column order.
var mpis = []string{"mpich", "openmpi"}

// summarize prints the comparison that bench/compare.sh asks for.
func summarize(w io.Writer, path string) error {
	res, err := readResults(path)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "== netvm vs. MPICH and Open MPI, np=2 (latency: ratio > 1 means netvm is slower; bandwidth: ratio > 1 means netvm is faster)")
	fmt.Fprintln(tw, "metric\tnetvm\tmpich\topenmpi\tnetvm/mpich\tnetvm/openmpi")
	for _, m := range []struct {
		label, bench string
		size         int
	}{
		{"latency 0 B (us)", "pingpong", 0},
		{"latency 8 B (us)", "pingpong", 8},
		{"latency 64 KiB (us)", "pingpong", 64 << 10},
		{"bandwidth 64 KiB (MB/s)", "bw", 64 << 10},
		{"bandwidth 4 MiB (MB/s)", "bw", 4 << 20},
	} {
		nv, nok := res.get(m.bench, "netvm", 2, m.size)
		fmt.Fprintf(tw, "%s\t%s", m.label, num(nv, nok))
		for _, d := range mpis {
			v, ok := res.get(m.bench, d, 2, m.size)
			fmt.Fprintf(tw, "\t%s", num(v, ok))
		}
		for _, d := range mpis {
			v, ok := res.get(m.bench, d, 2, m.size)
			fmt.Fprintf(tw, "\t%s", ratio(nv, nok, v, ok))
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()

	fmt.Fprintln(w)
	fmt.Fprintln(w, "== ANY_SOURCE vs. specific-source receives: rank 0 receives 8 B messages from np-1 senders (us per message)")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "device\tnp\tANY_SOURCE\tspecific\tANY/specific")
	for _, d := range append([]string{"netvm"}, mpis...) {
		for _, np := range npsOf(res, "anysource_any", d) {
			a, aok := res.get("anysource_any", d, np, 8)
			s, sok := res.get("anysource_specific", d, np, 8)
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", d, np, num(a, aok), num(s, sok), ratio(a, aok, s, sok))
		}
	}
	tw.Flush()

	fmt.Fprintln(w)
	fmt.Fprintln(w, "== netvm vs. the machine's floor (one process: Go copy(), a cache line between two threads)")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "metric\tnetvm\tfloor\tnetvm/floor")
	bw4, bok := res.get("bw", "netvm", 2, 4<<20)
	hot, hok := res.get("memcpy", "go", 1, 4<<20)
	cold, cok := res.get("memcpy_cold", "go", 1, 4<<20)
	fmt.Fprintf(tw, "bandwidth 4 MiB vs. copy() of reused 4 MiB buffers (MB/s)\t%s\t%s\t%s\n", num(bw4, bok), num(hot, hok), ratio(bw4, bok, hot, hok))
	fmt.Fprintf(tw, "bandwidth 4 MiB vs. copy() through %s of fresh buffers (MB/s)\t%s\t%s\t%s\n", "4x LLC", num(bw4, bok), num(cold, cok), ratio(bw4, bok, cold, cok))
	lat8, lok := res.get("pingpong", "netvm", 2, 8)
	cl, clok := res.get("cacheline", "go", 2, 64)
	fmt.Fprintf(tw, "latency 8 B vs. cache-line one-way (us)\t%s\t%s\t%s\n", num(lat8, lok), num(cl, clok), ratio(lat8, lok, cl, clok))
	tw.Flush()

	fmt.Fprintln(w)
	fmt.Fprintln(w, "== per size, np=2 (! marks netvm more than 2x worse than the better C MPI)")
	perSize(w, res, "pingpong", "latency (us)", false)
	fmt.Fprintln(w)
	perSize(w, res, "bw", "bandwidth (MB/s)", true)
	if _, ok := res.get("bw_touch", "netvm", 2, 1<<20); ok {
		fmt.Fprintln(w)
		perSize(w, res, "bw_touch", "bandwidth, --touch (MB/s)", true)
	}
	virtusTable(w, res, "virtus_", "bw-style streaming")
	virtusTable(w, res, "virtus_touch_", "every message produced by the sender and consumed by the receiver (--touch, one message per window)")
	return nil
}

// virtusTable prints, if the results hold virtus rows (bench names starting
// with prefix), the VIRTUS test per block size: the strided/contiguous
// bandwidth ratio of netvm, MPICH and Open MPI, then their strided and
// contiguous bandwidths; how says how the messages were sent.
func virtusTable(w io.Writer, res results, prefix, how string) {
	seen := map[int]bool{}
	for k := range res {
		if (k.bench == prefix+"strided" || k.bench == prefix+"ratio") && k.np == 2 {
			seen[k.size] = true
		}
	}
	if len(seen) == 0 {
		return
	}
	var blocks []int
	for b := range seen {
		blocks = append(blocks, b)
	}
	sort.Ints(blocks)
	devs := append([]string{"netvm"}, mpis...)
	fmt.Fprintln(w)
	fmt.Fprintf(w, "== VIRTUS, np=2: a strided array (Vector of blocks, stride 2x block) vs. the same bytes contiguous, %s (ratio = strided/contiguous; < 1 means the derived type costs bandwidth)\n", how)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "block\t")
	for _, d := range devs {
		fmt.Fprintf(tw, "%s ratio\t", d)
	}
	for _, d := range devs {
		fmt.Fprintf(tw, "%s strided\t%s contig\t", d, d)
	}
	fmt.Fprintln(tw, "(MB/s)\t")
	for _, b := range blocks {
		fmt.Fprintf(tw, "%s\t", humanSize(b))
		for _, d := range devs {
			s, sok := res.get(prefix+"strided", d, 2, b)
			c, cok := res.get(prefix+"contig", d, 2, b)
			r := ratio(s, sok, c, cok)
			if rv, ok := res.get(prefix+"ratio", d, 2, b); ok {
				r = strconv.FormatFloat(rv, 'f', 2, 64)
			}
			fmt.Fprintf(tw, "%s\t", r)
		}
		for _, d := range devs {
			s, sok := res.get(prefix+"strided", d, 2, b)
			c, cok := res.get(prefix+"contig", d, 2, b)
			fmt.Fprintf(tw, "%s\t%s\t", num(s, sok), num(c, cok))
		}
		fmt.Fprintln(tw, "\t")
	}
	tw.Flush()
}

// npsOf lists the np values that a bench has rows for on a device.
func npsOf(res results, bench, device string) []int {
	seen := map[int]bool{}
	for k := range res {
		if k.bench == bench && k.device == device {
			seen[k.np] = true
		}
	}
	var out []int
	for np := range seen {
		out = append(out, np)
	}
	sort.Ints(out)
	return out
}

// perSize prints one bench over every size, netvm beside the C MPIs, with
// netvm's ratio to the better of them (higher is better when bigger is).
func perSize(w io.Writer, res results, bench, label string, higherBetter bool) {
	seen := map[int]bool{}
	for k := range res {
		if k.bench == bench && k.np == 2 {
			seen[k.size] = true
		}
	}
	var sz []int
	for s := range seen {
		sz = append(sz, s)
	}
	sort.Ints(sz)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%s size\tnetvm\tmpich\topenmpi\tnetvm/best\t\t\n", label)
	for _, s := range sz {
		nv, nok := res.get(bench, "netvm", 2, s)
		fmt.Fprintf(tw, "%s\t%s", humanSize(s), num(nv, nok))
		best, bestOK := 0.0, false
		for _, d := range mpis {
			v, ok := res.get(bench, d, 2, s)
			fmt.Fprintf(tw, "\t%s", num(v, ok))
			if ok && (!bestOK || (higherBetter && v > best) || (!higherBetter && v < best)) {
				best, bestOK = v, true
			}
		}
		mark := ""
		if nok && bestOK && best > 0 && nv > 0 {
			if (higherBetter && nv < best/2) || (!higherBetter && nv > 2*best) {
				mark = "!"
			}
		}
		fmt.Fprintf(tw, "\t%s\t%s\t\n", ratio(nv, nok, best, bestOK), mark)
	}
	tw.Flush()
}
