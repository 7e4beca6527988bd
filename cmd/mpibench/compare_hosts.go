package main

// compare --hosts N: the benchmark set across simulated hosts. compare
// starts a netcluster of N compute hosts and one head host, and runs the
// point-to-point set between h1 and h2 and the collective set at np 4 and 8
// over 2 and 4 hosts, on every adimpi device that reaches other hosts
// (adi.CrossHost) and on Open MPI (TCP BTL) and MPICH started on the same
// hosts through bench/netcluster-agent.sh. The runs go in rounds, each
// round every step once, and the report keeps each point's median over the
// rounds.
//
// Open MPI binds each rank to a core by default, and each simulated host
// believes it owns every core, so ranks of different hosts would share one:
// its ranks run with --bind-to none, as MPICH's and adimpi's do by default.
//
// MPICH (ch4:ucx here) runs with UCX_TLS=tcp,self, TCP between every pair
// like Open MPI's tcp,self: with UCX's default transports a 4 MiB ping-pong
// between two simulated hosts once hung in MPI_Finalize.
//
// The head host only launches: Open MPI's mpirun and MPICH's Hydra run in
// its network namespace (and nowhere else, so that they can still see the
// other hosts' holders in /proc and enter them), and start every rank on a
// compute host through the agent, as ssh would. A launcher on a compute host
// would start that host's ranks itself, outside the host's PID and mount
// namespaces.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/adimpi/adimpi/adi"
	"github.com/adimpi/adimpi/internal/netcluster"
)

// xPrefix starts the bench column of a cross-host row ("x_pingpong"), which
// keeps those rows out of the single-host sections.
const xPrefix = "x_"

// xDevice is the device column of a cross-host row: the target and the
// number of hosts its ranks span, "netvm@4h".
func xDevice(target string, hosts int) string { return target + "@" + strconv.Itoa(hosts) + "h" }

// crossHostDevice reports whether the adimpi device name reaches ranks on
// other hosts, by asking a fresh instance of it.
func crossHostDevice(name string) bool {
	f, ok := adi.Lookup(name)
	if !ok {
		return false
	}
	ch, ok := f().(adi.CrossHost)
	return ok && ch.CrossHost()
}

// xCluster is the simulated cluster of a --hosts run.
type xCluster struct {
	nc      *netcluster.Cluster
	hosts   int    // compute hosts h1..hN; h(N+1) is the head
	agent   string // bench/netcluster-agent.sh
	binary  string // the netcluster command, for mpirun's -launcher-exec
	headPID int
	headIP  string
}

// startCluster makes the cluster of a --hosts run; the caller closes it.
func (c *comparer) startCluster() (*xCluster, error) {
	n := c.opts.hosts
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("--hosts %d: the simulated hosts need root to create namespaces (running as uid %d)", n, os.Geteuid())
	}
	nc, err := netcluster.Start(netcluster.Options{Hosts: n + 1, Dir: filepath.Join(c.tmp, "cluster")})
	if err != nil {
		return nil, fmt.Errorf("--hosts %d: %v", n, err)
	}
	head := nc.Hosts[n]
	x := &xCluster{nc: nc, hosts: n, headPID: head.PID, headIP: head.Addr.String(),
		binary: filepath.Join(c.tmp, "netcluster"), agent: filepath.Join(c.root, "bench", "netcluster-agent.sh")}
	// The agent finds the cluster through these (the C launchers pass
	// their environment to it).
	os.Setenv("NETCLUSTER", x.binary)
	os.Setenv("NETCLUSTER_DIR", nc.Dir)
	c.note("simulated cluster: %d hosts h1..h%d (198.18.0.1-%d), head h%d for the C launchers, in %s", n, n, n, n+1, nc.Dir)
	return x, nil
}

// hostList is "h1:k,h2:k,..." over hosts hosts (byAddr: addresses instead
// of names, for launchers that do not read the hosts' /etc/hosts).
func (x *xCluster) hostList(hosts, perHost int, byAddr bool) string {
	var l []string
	for i := 0; i < hosts; i++ {
		h := x.nc.Hosts[i].Name
		if byAddr {
			h = x.nc.Hosts[i].Addr.String()
		}
		l = append(l, h+":"+strconv.Itoa(perHost))
	}
	return strings.Join(l, ",")
}

// xLaunch is the command line that starts np ranks of prog over hosts
// hosts (np/hosts each, in blocks) on target t.
func (c *comparer) xLaunch(x *xCluster, t *cmpTarget, hosts, np int, prog string, args ...string) []string {
	per := np / hosts
	var argv []string
	switch {
	case t.adimpi:
		limit := max(c.opts.limit-5*time.Second, c.opts.limit/2)
		argv = []string{c.mpirun, "-hosts", x.hostList(hosts, per, false),
			"-launcher-exec", x.binary + " exec -dir " + x.nc.Dir + " {host} --",
			"-np", strconv.Itoa(np), "-device", t.name, "-timeout", limit.String(), prog}
	case t.name == "openmpi":
		argv = []string{"nsenter", "--net=/proc/" + strconv.Itoa(x.headPID) + "/ns/net", cmpLibs[t.name].run,
			"--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "--mca", "btl", "tcp,self", "--mca", "plm_rsh_agent", x.agent,
			"-H", x.hostList(hosts, per, true), "-n", strconv.Itoa(np), t.bins[prog]}
	default: // mpich
		argv = []string{"nsenter", "--net=/proc/" + strconv.Itoa(x.headPID) + "/ns/net", cmpLibs[t.name].run,
			"-genv", "UCX_TLS", "tcp,self", "-launcher", "ssh", "-launcher-exec", x.agent, "-localhost", x.headIP,
			"-hosts", x.hostList(hosts, per, true), "-n", strconv.Itoa(np), t.bins[prog]}
	}
	return append(argv, args...)
}

// xTargets are the targets of the cross-host runs: the adimpi devices that
// reach other hosts, and the C MPIs that were found.
func (c *comparer) xTargets() []*cmpTarget {
	var out []*cmpTarget
	for _, t := range c.targets {
		if !t.adimpi || crossHostDevice(t.name) {
			out = append(out, t)
			continue
		}
		msg := fmt.Sprintf("%s left out across hosts: the device does not implement adi.CrossHost", t.name)
		c.notes = append(c.notes, msg)
		c.note("%s", msg)
	}
	return out
}

// xSteps plans one round of the cross-host runs.
func (c *comparer) xSteps(x *xCluster) []*cmpStep {
	o := c.opts
	var steps []*cmpStep
	p2pG := []string{"--max-size", "4194304", "--min-time", "5ms", "--reps", "3"}
	p2pC := []string{"--max-size", "4194304", "--min-time", "0.005", "--reps", "3"}
	collG := []string{"--reps", "3", "--min-time", "20ms", "--allreduce-large", "1048576"}
	collC := []string{"--reps", "3", "--min-time", "0.02", "--allreduce-large", "1048576"}
	nps, hostCounts := []int{4, 8}, []int{2, 4}
	if o.quick {
		p2pG = []string{"--min-size", "8", "--max-size", "8", "--min-time", "1ms", "--reps", "1"}
		p2pC = []string{"--min-size", "8", "--max-size", "8", "--min-time", "0.001", "--reps", "1"}
		collG = []string{"--reps", "1", "--iters", "2", "--allreduce-large", "1024"}
		collC = collG
		nps, hostCounts = []int{4}, []int{2}
	}
	add := func(t *cmpTarget, bench string, hosts, np int, argv []string) {
		what := fmt.Sprintf("%s np%d %dh", bench, np, hosts)
		steps = append(steps, &cmpStep{target: t, bench: bench, np: np, hosts: hosts, what: what, argv: argv,
			label: fmt.Sprintf("x-%s-%s-np%d-%dh", t.name, bench, np, hosts)})
	}
	placements, err := collPlacements(o.hostColls, nps, hostCounts)
	if err != nil {
		c.note("%v", err)
		return nil
	}
	targets := c.xTargets()
	for _, bench := range o.benches {
		switch bench {
		case "pingpong", "bw":
			for _, t := range targets {
				if t.adimpi {
					add(t, bench, 2, 2, c.xLaunch(x, t, 2, 2, c.bench, slices.Concat([]string{bench, "--csv"}, p2pG)...))
				} else if t.bins["mpibench"] != "" {
					add(t, bench, 2, 2, c.xLaunch(x, t, 2, 2, "mpibench", slices.Concat([]string{bench}, p2pC)...))
				}
			}
		case "netpipe":
			steps = append(steps, c.xNetpipeSteps(x)...)
		case "coll":
			for _, pl := range placements {
				np, hosts := pl[0], pl[1]
				if hosts > x.hosts {
					continue
				}
				for _, t := range targets {
					if t.adimpi {
						add(t, bench, hosts, np, c.xLaunch(x, t, hosts, np, c.bench, slices.Concat([]string{"coll", "--csv"}, collG)...))
					} else if t.bins["coll"] != "" {
						add(t, bench, hosts, np, c.xLaunch(x, t, hosts, np, "coll", slices.Concat([]string{"--device", t.name}, collC)...))
					}
				}
			}
		}
	}
	return steps
}

// collPlacements reads --host-colls ("8@4": np 8 over 4 hosts); none
// given, every np of nps over every host count of hostCounts.
func collPlacements(spec []string, nps, hostCounts []int) ([][2]int, error) {
	var out [][2]int
	if len(spec) == 0 {
		for _, hosts := range hostCounts {
			for _, np := range nps {
				out = append(out, [2]int{np, hosts})
			}
		}
		return out, nil
	}
	for _, s := range spec {
		a, b, ok := strings.Cut(s, "@")
		np, err1 := strconv.Atoi(a)
		hosts, err2 := strconv.Atoi(b)
		if !ok || err1 != nil || err2 != nil || hosts < 2 || np < hosts || np%hosts != 0 {
			return nil, fmt.Errorf("--host-colls %q: want NP@HOSTS, NP a multiple of HOSTS ≥ 2", s)
		}
		out = append(out, [2]int{np, hosts})
	}
	return out, nil
}

// runCross runs the cross-host steps in c.opts.rounds interleaved rounds
// and adds each point's median over the rounds to c.rows.
func (c *comparer) runCross(ctx context.Context) error {
	x, err := c.startCluster()
	if err != nil {
		return err
	}
	defer func() {
		if err := x.nc.Close(); err != nil {
			c.note("tearing down the simulated cluster: %v", err)
		}
	}()
	steps := c.xSteps(x)
	if len(steps) == 0 {
		return errors.New("--hosts: nothing to run across hosts (no target reaches other hosts, or no pingpong, bw or coll in --benches)")
	}
	rounds := c.opts.rounds
	byKey := map[key][]float64{}
	units := map[key]string{}
	total := len(steps) * rounds
	for r := 1; r <= rounds; r++ {
		for i, s := range steps {
			if ctx.Err() != nil {
				break
			}
			rs := *s
			rs.label = fmt.Sprintf("%s-r%d", s.label, r)
			fmt.Fprintf(c.w, "[x %*d/%d] %-10s %-28s ", len(strconv.Itoa(total)), (r-1)*len(steps)+i+1, total, s.target.name, s.what)
			rows, run := c.exec(ctx, &rs)
			run.what = fmt.Sprintf("%s (round %d)", s.what, r)
			c.runs = append(c.runs, run)
			if run.ok {
				fmt.Fprintf(c.w, "ok %6.1fs %4d rows\n", run.secs, run.rows)
			} else {
				fmt.Fprintf(c.w, "%s after %.1fs: %s\n", strings.ToUpper(run.status[:1])+run.status[1:], run.secs, run.errLine)
			}
			for _, rw := range rows {
				k := key{xPrefix + rw.bench, xDevice(s.target.name, s.hosts), rw.np, rw.size}
				byKey[k] = append(byKey[k], rw.value)
				units[k] = rw.unit
			}
		}
	}
	keys := make([]key, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.bench != b.bench {
			return a.bench < b.bench
		}
		if a.device != b.device {
			return a.device < b.device
		}
		if a.np != b.np {
			return a.np < b.np
		}
		return a.size < b.size
	})
	for _, k := range keys {
		c.rows = append(c.rows, row{k.bench, k.device, k.np, k.size, median(byKey[k]), units[k]})
	}
	return nil
}

// median is the middle value of vs (the mean of the two middle ones for an
// even count).
func median(vs []float64) float64 {
	s := slices.Clone(vs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
