package main

// The compare report: report.md with its tables, and the plots beside it.

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// compareMeta describes a compare run for the report's header.
type compareMeta struct {
	when, commit, goVer, load string
	elapsed                   time.Duration
	cpus                      int
	quick                     bool
	notes                     []string
	exReps                    int
	examples                  []string    // the example command lines
	compute                   int         // overlap: C in µs
	hosts, rounds             int         // cross-host runs: compute hosts (0: none), rounds
	order                     []string    // target names, in column order
	targets                   [][2]string // name, description
}

// cmpReport builds report.md.
type cmpReport struct {
	dir string
	res results
	m   compareMeta
	b   strings.Builder
	err error
}

// writeCompareReport writes dir/report.md and its plots from res.
func writeCompareReport(dir string, res results, m compareMeta, runs []cmpRun) error {
	r := &cmpReport{dir: dir, res: res, m: m}
	r.header(runs)
	r.summary()
	r.crossHost()
	r.latency()
	r.bandwidth()
	r.messageRate()
	r.netpipe()
	r.anysource()
	r.collectives()
	r.overlap()
	r.examples()
	r.runs(runs)
	if r.err != nil {
		return r.err
	}
	return os.WriteFile(filepath.Join(dir, "report.md"), []byte(r.b.String()), 0o644)
}

func (r *cmpReport) p(format string, a ...any) { fmt.Fprintf(&r.b, format, a...) }

// devices lists the devices with rows of any of benches: the targets in
// their order, then any other device name sorted.
func (r *cmpReport) devices(benches ...string) []string {
	seen := map[string]bool{}
	for k := range r.res {
		if slices.Contains(benches, k.bench) {
			seen[k.device] = true
		}
	}
	var out, extra []string
	for _, d := range r.m.order {
		if seen[d] {
			out = append(out, d)
		}
	}
	for d := range seen {
		if !slices.Contains(r.m.order, d) {
			extra = append(extra, d)
		}
	}
	// Other names ("netvm@2h") follow their target's order, then by name.
	rank := func(d string) int {
		base, _, _ := strings.Cut(strings.TrimSuffix(d, "+async"), "@")
		if i := slices.Index(r.m.order, base); i >= 0 {
			return i
		}
		return len(r.m.order)
	}
	slices.SortFunc(extra, func(a, b string) int {
		if ra, rb := rank(a), rank(b); ra != rb {
			return ra - rb
		}
		return strings.Compare(a, b)
	})
	return append(out, extra...)
}

// color is a device's palette index, the same in every plot; "D+async" takes D's.
func (r *cmpReport) color(device string) int {
	device = strings.TrimSuffix(device, "+async")
	device, _, _ = strings.Cut(device, "@")
	if i := slices.Index(r.m.order, device); i >= 0 {
		return i
	}
	return len(r.m.order) + int(device[0])%5
}

// values returns bench's values on device by size (byNP false) or by np,
// keeping only rows with the given np or size (-1: any).
func (r *cmpReport) values(bench, device string, byNP bool, np, size int) map[int]float64 {
	out := map[int]float64{}
	for k, v := range r.res {
		if k.bench != bench || k.device != device || (np >= 0 && k.np != np) || (size >= 0 && k.size != size) {
			continue
		}
		if byNP {
			out[k.np] = v
		} else {
			out[k.size] = v
		}
	}
	return out
}

// keysOf returns the sorted union of the maps' keys.
func keysOf(ms ...map[int]float64) []int {
	var ks []int
	for _, m := range ms {
		for k := range m {
			ks = append(ks, k)
		}
	}
	slices.Sort(ks)
	return slices.Compact(ks)
}

// seriesOf turns a map into sorted plot coordinates.
func seriesOf(m map[int]float64, label string, color, style int) plotSeries {
	s := plotSeries{label: label, color: color, style: style}
	for _, k := range keysOf(m) {
		s.xs, s.ys = append(s.xs, float64(k)), append(s.ys, m[k])
	}
	return s
}

// plot draws a plot into the directory and links it from the report.
func (r *cmpReport) plot(file string, spec plotSpec) {
	drawn, err := savePlot(filepath.Join(r.dir, file), spec)
	if err != nil && r.err == nil {
		r.err = fmt.Errorf("plot %s: %v", file, err)
	}
	if drawn {
		r.p("![%s](%s)\n\n", spec.title, file)
	}
}

// table writes a Markdown table; align has an l (left) or r (right) per
// column, and columns beyond it are right-aligned.
func (r *cmpReport) table(align string, header []string, rows [][]string) {
	r.p("| %s |\n|", strings.Join(header, " | "))
	for i := range header {
		if i < len(align) && align[i] == 'l' {
			r.p("---|")
		} else {
			r.p("---:|")
		}
	}
	r.p("\n")
	for _, row := range rows {
		r.p("| %s |\n", strings.Join(row, " | "))
	}
	r.p("\n")
}

// cells formats one table row's values ("—" where missing), the best in
// bold when more than one is there.
func cells(vals []float64, ok []bool, lowerBetter bool, format func(float64) string) []string {
	best, n := -1, 0
	for i, v := range vals {
		if !ok[i] {
			continue
		}
		n++
		if best < 0 || (lowerBetter && v < vals[best]) || (!lowerBetter && v > vals[best]) {
			best = i
		}
	}
	out := make([]string, len(vals))
	for i, v := range vals {
		switch {
		case !ok[i]:
			out[i] = "—"
		case i == best && n > 1:
			out[i] = "**" + format(v) + "**"
		default:
			out[i] = format(v)
		}
	}
	return out
}

// noData says that a section has nothing to show.
func (r *cmpReport) noData() {
	r.p("_No results (not run, or every run failed: see [Runs](#runs))._\n\n")
}

func (r *cmpReport) header(runs []cmpRun) {
	m := r.m
	mode := "full run"
	if m.quick {
		mode = "quick run (--quick: sizes up to 1 MiB, few iterations)"
	}
	r.p("# adimpi devices compared\n\n")
	facts := []string{m.when}
	if m.commit != "" {
		facts = append(facts, "commit "+m.commit)
	}
	facts = append(facts, m.goVer, strconv.Itoa(m.cpus)+" CPUs")
	if m.load != "" {
		facts = append(facts, "load "+m.load)
	}
	facts = append(facts, mode, "took "+m.elapsed.String())
	r.p("%s.\n\n", strings.Join(facts, " · "))
	if len(m.targets) > 0 {
		r.table("ll", []string{"target", "what"}, func() [][]string {
			var rows [][]string
			for _, t := range m.targets {
				rows = append(rows, []string{t[0], t[1]})
			}
			return rows
		}())
	}
	for _, n := range m.notes {
		r.p("- %s\n", n)
	}
	if len(m.notes) > 0 {
		r.p("\n")
	}
	failed := 0
	for _, run := range runs {
		if !run.ok {
			failed++
		}
	}
	if failed > 0 {
		r.p("**%d of %d runs failed or timed out**; their cells are empty (—). See [Runs](#runs).\n\n", failed, len(runs))
	}
	r.p("Made by `go run ./cmd/mpibench compare` (add `--quick` for a short run); every row is in `results.csv`, every run's output in `logs/`.\n\n")
}

// reference is the target the summary divides by: the first adimpi
// device with results (netvm when it is there), else the first target.
func (r *cmpReport) reference() string {
	devs := r.devices("pingpong", "bw", "anysource_any", "coll_barrier", "coll_allreduce", "coll_bcast", "coll_alltoall")
	switch {
	case slices.Contains(devs, "netvm"):
		return "netvm"
	case len(devs) == 0:
		return ""
	}
	return devs[0]
}

// geoRatio is the geometric mean of dev's values over ref's, over the rows
// keep lets through that both have; ok is false when there are none.
func (r *cmpReport) geoRatio(dev, ref string, keep func(k key) bool) (float64, bool) {
	sum, n := 0.0, 0
	for k, v := range r.res {
		if k.device != dev || !keep(k) {
			continue
		}
		rk := k
		rk.device = ref
		if w, ok := r.res[rk]; ok && v > 0 && w > 0 {
			sum += math.Log(v / w)
			n++
		}
	}
	if n == 0 {
		return 0, false
	}
	return math.Exp(sum / float64(n)), true
}

// summary is a table of each target's geometric-mean ratios to the reference.
func (r *cmpReport) summary() {
	ref := r.reference()
	if ref == "" {
		return
	}
	r.p("## Summary\n\n")
	r.p("Each target's time (or bandwidth) divided by %s's, geometric mean over the points both measured: "+
		"below 1× is faster than %s for times, above 1× is faster for bandwidth.\n\n", ref, ref)
	cols := []struct {
		name string
		keep func(k key) bool
	}{
		{"latency ≤ 1 KiB", func(k key) bool { return k.bench == "pingpong" && k.size <= 1<<10 }},
		{"latency ≥ 64 KiB", func(k key) bool { return k.bench == "pingpong" && k.size >= 64<<10 }},
		{"bandwidth ≥ 64 KiB", func(k key) bool { return k.bench == "bw" && k.size >= 64<<10 }},
		{"ANY_SOURCE", func(k key) bool { return k.bench == "anysource_any" }},
		{"collectives", func(k key) bool { return strings.HasPrefix(k.bench, "coll_") }},
		{"examples", func(k key) bool { return strings.HasPrefix(k.bench, "example_") }},
	}
	header := []string{"target"}
	for _, c := range cols {
		header = append(header, c.name)
	}
	var rows [][]string
	for _, d := range r.m.order {
		row := []string{d}
		some := false
		for _, c := range cols {
			switch v, ok := r.geoRatio(d, ref, c.keep); {
			case d == ref && ok:
				row, some = append(row, "1× (reference)"), true
			case ok:
				row, some = append(row, strconv.FormatFloat(v, 'f', 2, 64)+"×"), true
			default:
				row = append(row, "—")
			}
		}
		if some {
			rows = append(rows, row)
		}
	}
	r.table("l", header, rows)
}

// perSizeSection is latency or bandwidth: one row per size, one column per device.
func (r *cmpReport) perSizeSection(bench, title, text, unit, file string, lowerBetter, logY bool) {
	r.p("## %s\n\n%s\n\n", title, text)
	devs := r.devices(bench)
	if len(devs) == 0 {
		r.noData()
		return
	}
	maps := make([]map[int]float64, len(devs))
	spec := plotSpec{title: title, xlabel: "message size (bytes)", ylabel: unit, xKind: xLog2Size, logY: logY}
	for i, d := range devs {
		maps[i] = r.values(bench, d, false, -1, -1)
		spec.series = append(spec.series, seriesOf(maps[i], d, r.color(d), lineSolid))
	}
	r.plot(file, spec)
	var rows [][]string
	for _, size := range keysOf(maps...) {
		vals, ok := make([]float64, len(devs)), make([]bool, len(devs))
		for i := range devs {
			vals[i], ok[i] = maps[i][size]
		}
		rows = append(rows, append([]string{humanSize(size)}, cells(vals, ok, lowerBetter, formatValue)...))
	}
	r.table("l", append([]string{"size"}, devs...), rows)
}

func (r *cmpReport) latency() {
	r.perSizeSection("pingpong", "Latency vs size",
		"One-way latency of a blocking ping-pong between 2 ranks (round trip / 2), µs; lower is better, the best of each row in bold.",
		"one-way latency (µs)", "latency.png", true, true)
}

func (r *cmpReport) bandwidth() {
	r.perSizeSection("bw", "Bandwidth vs size",
		"Streaming bandwidth from rank 0 to rank 1 (windows of 64 Isends, then a 4 B acknowledgement), MB/s; higher is better.",
		"bandwidth (MB/s)", "bandwidth.png", false, true)
}

func (r *cmpReport) anysource() {
	r.p("## ANY_SOURCE cost vs senders\n\n")
	r.p("Rank 0 receives 8 B messages from k senders, with MPI_ANY_SOURCE receives and with specific-source receives taken round-robin; " +
		"µs per received message with ANY_SOURCE, and in brackets its ratio to the specific-source receives (1.00× = ANY_SOURCE costs nothing extra).\n\n")
	devs := r.devices("anysource_any")
	if len(devs) == 0 {
		r.noData()
		return
	}
	anyM, specM := make([]map[int]float64, len(devs)), make([]map[int]float64, len(devs))
	spec := plotSpec{title: "ANY_SOURCE cost vs senders", xlabel: "senders (solid: ANY_SOURCE, dashed: specific source)",
		ylabel: "µs per received message", xKind: xLinear, logY: true}
	for i, d := range devs {
		anyM[i] = shiftKeys(r.values("anysource_any", d, true, -1, -1), -1)
		specM[i] = shiftKeys(r.values("anysource_specific", d, true, -1, -1), -1)
		spec.series = append(spec.series, seriesOf(anyM[i], d, r.color(d), lineSolid),
			seriesOf(specM[i], d+" specific", r.color(d), lineDashed))
	}
	r.plot("anysource.png", spec)
	var rows [][]string
	for _, k := range keysOf(anyM...) {
		vals, ok := make([]float64, len(devs)), make([]bool, len(devs))
		for i := range devs {
			vals[i], ok[i] = anyM[i][k]
		}
		cs := cells(vals, ok, true, formatValue)
		for i := range devs {
			if s, sok := specM[i][k]; ok[i] && sok && s > 0 {
				cs[i] += fmt.Sprintf(" (%.2f×)", vals[i]/s)
			}
		}
		rows = append(rows, append([]string{strconv.Itoa(k)}, cs...))
	}
	r.table("l", append([]string{"senders"}, devs...), rows)
}

// shiftKeys adds d to every key (np → senders).
func shiftKeys(m map[int]float64, d int) map[int]float64 {
	out := make(map[int]float64, len(m))
	for k, v := range m {
		out[k+d] = v
	}
	return out
}

// collName names a collective benchmark row.
func collName(bench string, size int) string {
	name := strings.TrimPrefix(bench, "coll_")
	if name == "" {
		return bench
	}
	name = strings.ToUpper(name[:1]) + name[1:]
	switch bench {
	case "coll_barrier":
		return name
	case "coll_alltoall":
		return name + " " + humanSize(size) + "/pair"
	}
	return name + " " + humanSize(size)
}

func (r *cmpReport) collectives() {
	r.p("## Collective time vs np\n\n")
	r.p("Time per call (the slowest rank's average, best of the timed repetitions), µs; lower is better. " +
		"Above 2 ranks this machine's cores are oversubscribed.\n\n")
	type collKind struct {
		bench string
		size  int
	}
	var kinds []collKind
	order := []string{"coll_barrier", "coll_allreduce", "coll_bcast", "coll_alltoall"}
	for k := range r.res {
		if strings.HasPrefix(k.bench, "coll_") && !slices.Contains(kinds, collKind{k.bench, k.size}) {
			kinds = append(kinds, collKind{k.bench, k.size})
		}
	}
	rank := func(b string) int {
		if i := slices.Index(order, b); i >= 0 {
			return i
		}
		return len(order)
	}
	slices.SortFunc(kinds, func(a, b collKind) int {
		if ra, rb := rank(a.bench), rank(b.bench); ra != rb {
			return ra - rb
		}
		if a.bench != b.bench {
			return strings.Compare(a.bench, b.bench)
		}
		return a.size - b.size
	})
	var benches []string
	for _, k := range kinds {
		benches = append(benches, k.bench)
	}
	devs := r.devices(benches...)
	if len(devs) == 0 {
		r.noData()
		return
	}
	var rows [][]string
	for _, k := range kinds {
		name := collName(k.bench, k.size)
		spec := plotSpec{title: name + ": time vs np", xlabel: "processes (np)", ylabel: "µs per call", xKind: xLog2, logY: true}
		maps := make([]map[int]float64, len(devs))
		for i, d := range devs {
			maps[i] = r.values(k.bench, d, true, -1, k.size)
			spec.series = append(spec.series, seriesOf(maps[i], d, r.color(d), lineSolid))
		}
		r.plot(fmt.Sprintf("coll-%s-%s.png", strings.TrimPrefix(k.bench, "coll_"), shortSize(k.size)), spec)
		for _, np := range keysOf(maps...) {
			vals, ok := make([]float64, len(devs)), make([]bool, len(devs))
			for i := range devs {
				vals[i], ok[i] = maps[i][np]
			}
			rows = append(rows, append([]string{name, strconv.Itoa(np)}, cells(vals, ok, true, formatValue)...))
		}
	}
	r.table("l", append([]string{"collective", "np"}, devs...), rows)
}

// ovlSeries is one column of the overlap table: a device with a variant.
type ovlSeries struct {
	device, bench, label string
	style                int
}

func (r *cmpReport) overlap() {
	r.p("## Overlap ratio vs size\n\n")
	r.p("2 ranks exchange a message around a computation of C = %d µs: overlap = (t_comm + t_comp − t_ovl) / t_comm, "+
		"clamped to [0, 1] (1 = the exchange hides entirely behind the computation); higher is better. "+
		"plain: the computation makes no MPI call; iprobe: it calls Iprobe every ~10 µs; async: adimpi with `mpirun -async-progress`.\n\n", r.m.compute)
	var cols []ovlSeries
	bases := r.devices("overlap_plain", "overlap_iprobe")
	for _, d := range r.m.order {
		if !slices.Contains(bases, d) && len(r.values("overlap_async", d+"+async", false, -1, -1)) > 0 {
			bases = append(bases, d)
		}
	}
	for _, d := range bases {
		for _, c := range []ovlSeries{
			{d, "overlap_plain", d, lineSolid},
			{d, "overlap_iprobe", d + " iprobe", lineDashed},
			{d + "+async", "overlap_async", d + " async", lineDotted},
			{d + "+async", "overlap_async_iprobe", d + " async iprobe", lineDotted},
		} {
			if len(r.values(c.bench, c.device, false, -1, -1)) > 0 {
				cols = append(cols, c)
			}
		}
	}
	if len(cols) == 0 {
		r.noData()
		return
	}
	spec := plotSpec{title: "Overlap ratio vs size", xlabel: "message size (bytes)", ylabel: "overlap ratio",
		xKind: xLog2Size, yRange: [2]float64{0, 1.05}}
	maps := make([]map[int]float64, len(cols))
	header := []string{"size"}
	for i, c := range cols {
		maps[i] = r.values(c.bench, c.device, false, 2, -1)
		spec.series = append(spec.series, seriesOf(maps[i], c.label, r.color(c.device), c.style))
		header = append(header, c.label)
	}
	r.plot("overlap.png", spec)
	var rows [][]string
	for _, size := range keysOf(maps...) {
		vals, ok := make([]float64, len(cols)), make([]bool, len(cols))
		for i := range cols {
			vals[i], ok[i] = maps[i][size]
		}
		rows = append(rows, append([]string{humanSize(size)}, cells(vals, ok, false, func(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) })...))
	}
	r.table("l", header, rows)
}

func (r *cmpReport) examples() {
	r.p("## Examples: wall time\n\n")
	r.p("Wall time of `mpirun -np N -device D examples/X` (launch included; the best of %d runs), seconds; lower is better.", r.m.exReps)
	if len(r.m.examples) > 0 {
		r.p(" The programs: `%s`.", strings.Join(r.m.examples, "`, `"))
	}
	r.p("\n\n")
	var names []string
	for k := range r.res {
		if ex, ok := strings.CutPrefix(k.bench, "example_"); ok && !slices.Contains(names, ex) {
			names = append(names, ex)
		}
	}
	exOrder := func(n string) int {
		for i, e := range compareExamples {
			if e.name == n {
				return i
			}
		}
		return len(compareExamples)
	}
	slices.SortFunc(names, func(a, b string) int {
		if d := exOrder(a) - exOrder(b); d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	var benches []string
	for _, n := range names {
		benches = append(benches, "example_"+n)
	}
	devs := r.devices(benches...)
	if len(devs) == 0 {
		r.noData()
		return
	}
	var rows [][]string
	maxNP := 0
	for _, n := range names {
		maps := make([]map[int]float64, len(devs))
		for i, d := range devs {
			maps[i] = r.values("example_"+n, d, true, -1, -1)
		}
		for _, np := range keysOf(maps...) {
			maxNP = max(maxNP, np)
			vals, ok := make([]float64, len(devs)), make([]bool, len(devs))
			for i := range devs {
				vals[i], ok[i] = maps[i][np]
			}
			rows = append(rows, append([]string{n, strconv.Itoa(np)}, cells(vals, ok, true, func(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) })...))
		}
	}
	var series []barSeries
	for _, d := range devs {
		s := barSeries{label: d, color: r.color(d)}
		for _, n := range names {
			v, ok := r.res.get("example_"+n, d, maxNP, 0)
			if !ok {
				v = math.NaN()
			}
			s.values = append(s.values, v)
		}
		series = append(series, s)
	}
	title := fmt.Sprintf("Examples: wall time at np=%d", maxNP)
	drawn, err := saveBars(filepath.Join(r.dir, "examples.png"), title, "seconds", names, series)
	if err != nil && r.err == nil {
		r.err = fmt.Errorf("plot examples.png: %v", err)
	}
	if drawn {
		r.p("![%s](examples.png)\n\n", title)
	}
	r.table("l", append([]string{"example", "np"}, devs...), rows)
}

func (r *cmpReport) runs(runs []cmpRun) {
	r.p("## Runs\n\n")
	if len(runs) == 0 {
		r.p("_No runs._\n")
		return
	}
	var rows [][]string
	for i, run := range runs {
		status := run.status
		if !run.ok {
			status = "**" + status + "**"
			if run.errLine != "" {
				status += ": " + strings.ReplaceAll(run.errLine, "|", `\|`)
			}
		}
		rows = append(rows, []string{strconv.Itoa(i + 1), run.target, run.what, status,
			strconv.FormatFloat(run.secs, 'f', 1, 64), strconv.Itoa(run.rows), "`logs/" + run.label + ".{out,err}`"})
	}
	r.table("rlllrrl", []string{"#", "target", "run", "status", "seconds", "rows", "output"}, rows)
}
