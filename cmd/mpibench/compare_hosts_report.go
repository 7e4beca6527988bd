package main

// The cross-host section of the compare report (compare --hosts).

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// xMetric is one headline figure of the cross-host section.
type xMetric struct {
	name        string
	bench       string // with xPrefix
	hosts, np   int
	size        int
	lowerBetter bool
}

// xMetrics are the figures the cross-host ratios are given for.
var xMetrics = []xMetric{
	{"8 B latency (µs)", xPrefix + "pingpong", 2, 2, 8, true},
	{"64 KiB bandwidth (MB/s)", xPrefix + "bw", 2, 2, 64 << 10, false},
	{"4 MiB bandwidth (MB/s)", xPrefix + "bw", 2, 2, 4 << 20, false},
	{"Allreduce 8 B, np 8, 4 hosts (µs)", xPrefix + "coll_allreduce", 4, 8, 8, true},
	{"Allreduce 1 MiB, np 8, 4 hosts (µs)", xPrefix + "coll_allreduce", 4, 8, 1 << 20, true},
}

// xValue is target's value of m.
func (r *cmpReport) xValue(target string, m xMetric) (float64, bool) {
	v, ok := r.res[key{m.bench, xDevice(target, m.hosts), m.np, m.size}]
	return v, ok
}

// xTargets are the targets with cross-host rows, in the report's order.
func (r *cmpReport) xTargets() []string {
	var out []string
	for _, t := range r.m.order {
		for k := range r.res {
			if strings.HasPrefix(k.bench, xPrefix) && strings.HasPrefix(k.device, t+"@") {
				out = append(out, t)
				break
			}
		}
	}
	return out
}

// crossHost writes the cross-host section: the headline figures, each
// adimpi device's ratios to Open MPI and MPICH, then every point.
func (r *cmpReport) crossHost() {
	if r.m.hosts == 0 {
		return
	}
	r.p("## Across simulated hosts\n\n")
	r.p("A simulated cluster of %d hosts (cmd/netcluster: network, PID, mount, IPC and UTS namespaces each, "+
		"veth links to one bridge). Ping-pong and bandwidth between ranks on h1 and h2; collectives with the ranks "+
		"in blocks over the hosts (np and hosts in the table of collectives; `--host-colls`). adimpi devices that reach other hosts (adi.CrossHost) run "+
		"under `mpirun -hosts … -launcher-exec 'netcluster exec …'`; Open MPI (`--mca btl tcp,self`) and MPICH "+
		"are launched from a head host through bench/netcluster-agent.sh onto the same hosts. "+
		"Every point is the median of %d interleaved rounds (each round's value the best of its repetitions).\n\n",
		r.m.hosts, r.m.rounds)
	targets := r.xTargets()
	if len(targets) == 0 {
		r.noData()
		return
	}
	var rows [][]string
	for _, m := range xMetrics {
		vals, ok := make([]float64, len(targets)), make([]bool, len(targets))
		for i, t := range targets {
			vals[i], ok[i] = r.xValue(t, m)
		}
		rows = append(rows, append([]string{m.name}, cells(vals, ok, m.lowerBetter, formatValue)...))
	}
	r.table("l", append([]string{"figure"}, targets...), rows)

	var refs []string
	for _, t := range []string{"openmpi", "mpich"} {
		if slices.Contains(targets, t) {
			refs = append(refs, t)
		}
	}
	if len(refs) > 0 {
		r.p("Each adimpi device's figure divided by the C library's (times: below 1× is faster; bandwidths: above 1× is faster).\n\n")
		header := []string{"device"}
		for _, m := range xMetrics {
			for _, ref := range refs {
				header = append(header, strings.TrimSuffix(strings.TrimSuffix(m.name, " (µs)"), " (MB/s)")+" / "+ref)
			}
		}
		rows = nil
		for _, t := range targets {
			if slices.Contains(refs, t) {
				continue
			}
			row := []string{t}
			for _, m := range xMetrics {
				for _, ref := range refs {
					v, ok1 := r.xValue(t, m)
					w, ok2 := r.xValue(ref, m)
					if ok1 && ok2 && w > 0 {
						row = append(row, strconv.FormatFloat(v/w, 'f', 2, 64)+"×")
					} else {
						row = append(row, "—")
					}
				}
			}
			rows = append(rows, row)
		}
		r.table("l", header, rows)
	}

	r.perSizeSection(xPrefix+"pingpong", "Latency across hosts (h1 ↔ h2)",
		"One-way latency of a blocking ping-pong between ranks on two hosts, µs, median of the rounds; lower is better.",
		"one-way latency (µs)", "x-latency.png", true, true)
	r.perSizeSection(xPrefix+"bw", "Bandwidth across hosts (h1 → h2)",
		"Streaming bandwidth from a rank on h1 to one on h2, MB/s, median of the rounds; higher is better.",
		"bandwidth (MB/s)", "x-bandwidth.png", false, true)
	r.xCollectives(targets)
}

// xCollectives is the table of every cross-host collective point.
func (r *cmpReport) xCollectives(targets []string) {
	r.p("## Collectives across hosts\n\n")
	r.p("Time per call, µs (the largest over the ranks of the average), median of the rounds; lower is better.\n\n")
	type point struct {
		bench       string
		size, np, h int
	}
	var pts []point
	for k := range r.res {
		if !strings.HasPrefix(k.bench, xPrefix+"coll_") {
			continue
		}
		_, hs, ok := strings.Cut(k.device, "@")
		h, err := strconv.Atoi(strings.TrimSuffix(hs, "h"))
		if !ok || err != nil {
			continue
		}
		p := point{k.bench, k.size, k.np, h}
		if !slices.Contains(pts, p) {
			pts = append(pts, p)
		}
	}
	if len(pts) == 0 {
		r.noData()
		return
	}
	slices.SortFunc(pts, func(a, b point) int {
		switch {
		case a.bench != b.bench:
			return strings.Compare(a.bench, b.bench)
		case a.size != b.size:
			return a.size - b.size
		case a.np != b.np:
			return a.np - b.np
		}
		return a.h - b.h
	})
	var rows [][]string
	for _, p := range pts {
		vals, ok := make([]float64, len(targets)), make([]bool, len(targets))
		for i, t := range targets {
			vals[i], ok[i] = r.res[key{p.bench, xDevice(t, p.h), p.np, p.size}]
		}
		name := strings.TrimPrefix(p.bench, xPrefix+"coll_")
		what := fmt.Sprintf("%s %s", strings.ToUpper(name[:1])+name[1:], humanSize(p.size))
		if name == "barrier" {
			what = "Barrier"
		}
		rows = append(rows, append([]string{what, strconv.Itoa(p.np), strconv.Itoa(p.h)}, cells(vals, ok, true, formatValue)...))
	}
	r.table("lll", append([]string{"collective", "np", "hosts"}, targets...), rows)
}
