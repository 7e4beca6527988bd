package conformance

import (
	"bufio"
	"context"
	"fmt"
	"github.com/adimpi/adimpi/internal/testproc"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/adimpi/adimpi/internal/netcluster"
	"github.com/adimpi/adimpi/internal/testnote"
)

// crossHostDevices are the devices that run the conformance programs across
// simulated hosts; a device joins by a line here.
var crossHostDevices = []string{
	"netvm",
	"fm",
	"bip",
	"via",
}

// crossHosts is the number of simulated hosts of the cross-host runs.
const crossHosts = 3

// placement is how a cross-host run puts its ranks on the hosts.
type placement struct {
	name string
	np   int
	args []string // mpirun's placement flags
}

// crossPlacements: with 3 ranks on 3 hosts block and round-robin agree; at
// 6, block puts neighbours on one host (h1 h1 h2 h2 h3 h3) and
// round-robin none (h1 h2 h3 h1 h2 h3).
var crossPlacements = []placement{
	{"np=3", 3, nil},
	{"np=6-block", 6, nil},
	{"np=6-rr", 6, []string{"-rr"}},
}

// crossPrograms are the programs and checks of the cross-host runs, and
// their options (collectives run the core's message algorithms: board
// collectives are per host, and the hierarchical ones are still to come).
var crossPrograms = []struct {
	prog   *program
	checks []string // nil: every check
	opts   []string
}{
	{p2p, nil, nil},
	{stress, []string{"thresholds", "flood"}, nil},
	{datatypes, nil, nil},
	{collectives, nil, []string{nativeOffOpt}},
}

// crossWide is each device's run at np 12 (4 ranks on each of the 3
// hosts: the tiered collectives' within-host tier with several ranks) and
// its intercommunicator run at np 6, each device with one placement and
// the devices between them with both, so that every device and every
// placement is covered without running the whole matrix again.
var crossWide = map[string]struct{ wide, inter placement }{
	"netvm": {placement{"np=12-block", 12, nil}, placement{"np=6-rr", 6, []string{"-rr"}}},
	"fm":    {placement{"np=12-rr", 12, []string{"-rr"}}, placement{"np=6-block", 6, nil}},
	"bip":   {placement{"np=12-rr", 12, []string{"-rr"}}, placement{"np=6-block", 6, nil}},
	"via":   {placement{"np=12-block", 12, nil}, placement{"np=6-rr", 6, []string{"-rr"}}},
}

// crossWidePrograms are the programs and checks (nil: every one but
// crossWideSkip) of the np-12 runs, each program's checks in one job (a
// job of 12 ranks costs more to start than a check costs to run). The collectives run with the device's own
// collectives on, as a program gets them: tiered across hosts, the
// device's board and multidestination sends within one.
var crossWidePrograms = []struct {
	prog   *program
	checks []string
}{
	{p2p, nil},
	{collectives, nil},
	{datatypes, nil},
	{stress, []string{"thresholds", "flood"}},
}

// crossWideSkip are the checks the np-12 jobs leave out: exit-early ends
// its job on purpose.
var crossWideSkip = []string{"exit-early"}

// startHosts starts the simulated hosts of a test and returns them and the
// mpirun flags that launch on them. Without root the test is skipped
// loudly (and fails under CI).
func startHosts(t *testing.T, n int) (*netcluster.Cluster, []string) {
	t.Helper()
	if os.Geteuid() != 0 {
		testnote.Skip(t, fmt.Sprintf("conformance: simulated hosts need root to create namespaces (running as uid %d)", os.Geteuid()))
	}
	c := netcluster.StartT(t, n)
	hosts := make([]string, n)
	for i := range hosts {
		hosts[i] = netcluster.HostName(i + 1)
	}
	launcher := fmt.Sprintf("%s exec -dir %s {host} --", crossBin(t, "netcluster"), c.Dir)
	return c, []string{"-launcher-exec", launcher, "-hosts", strings.Join(hosts, ",")}
}

// crossBuild serialises crossBin's builds.
var crossBuild sync.Mutex

// crossBin builds cmd/netcluster or conformance/drill once, next to the
// programs TestMain built.
func crossBin(t *testing.T, name string) string {
	t.Helper()
	crossBuild.Lock()
	defer crossBuild.Unlock()
	bin := filepath.Join(filepath.Dir(mpirunBin), name)
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	pkg := map[string]string{"netcluster": "cmd/netcluster", "drill": "conformance/drill", "mpibench": "cmd/mpibench"}[name]
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/adimpi/adimpi/"+pkg).CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, out)
	}
	return bin
}

// TestCrossHost runs the conformance programs (p2p, stress's thresholds
// and flood, datatypes, collectives) on every device of crossHostDevices
// across 3 simulated hosts at np 3 and 6, ranks placed in blocks and
// round-robin, with the device's default options and, for netvm, eager=0
// (MPIN's receiver-initiated protocol, RFA/SRFA over the network), for fm
// remote=1 minblock=0 (every rendezvous written by the receiving side);
// and on each device the checks of crossWidePrograms at np 12 and every
// check of conformance/intercoll at np 6 (crossWide).
func TestCrossHost(t *testing.T) {
	_, launch := startHosts(t, crossHosts)
	for _, dev := range crossHostDevices {
		t.Run(dev, func(t *testing.T) {
			t.Parallel()
			modes := [][]string{nil}
			if dev == "netvm" {
				modes = append(modes, []string{"eager=0"})
			}
			if dev == "fm" {
				modes = append(modes, []string{"remote=1", "minblock=0"})
			}
			for _, mode := range modes {
				for _, pl := range crossPlacements {
					for _, cp := range crossPrograms {
						checks := cp.checks
						if checks == nil {
							checks = cp.prog.checks
						}
						opts := append(append([]string(nil), mode...), cp.opts...)
						name := strings.Join(append([]string{cp.prog.name, pl.name}, mode...), "/")
						t.Run(name, func(t *testing.T) {
							t.Parallel()
							for _, check := range checks {
								t.Run(check, func(t *testing.T) {
									t.Parallel()
									crossCheck(t, cp.prog, dev, opts, pl, launch, check)
								})
							}
						})
					}
				}
			}
			wide := crossWide[dev]
			for _, cp := range crossWidePrograms {
				checks := cp.checks
				if checks == nil {
					checks = slices.DeleteFunc(slices.Clone(cp.prog.checks), func(c string) bool { return slices.Contains(crossWideSkip, c) })
				}
				t.Run(cp.prog.name+"/"+wide.wide.name, func(t *testing.T) {
					t.Parallel()
					crossChecks(t, cp.prog, dev, nil, wide.wide, launch, checks)
				})
			}
			t.Run(intercoll.name+"/"+wide.inter.name, func(t *testing.T) {
				t.Parallel()
				for _, check := range intercoll.checks {
					t.Run(check, func(t *testing.T) {
						t.Parallel()
						crossCheck(t, intercoll, dev, nil, wide.inter, launch, check)
					})
				}
			})
		})
	}
}

// crossChecks runs checks in one job whose ranks run on the simulated
// hosts, and judges each check on its output (a failure of one fails all).
func crossChecks(t *testing.T, prog *program, dev string, opts []string, pl placement, launch []string, checks []string) {
	config := strings.Join(append(append([]string{dev}, opts...), "hosts", pl.name), "/")
	var args []string
	if prog.short && testing.Short() {
		args = append(args, "-short")
	}
	jobs <- struct{}{}
	r := runJob(prog.bin, dev, opts, pl.np, append(args, checks...), append(append([]string(nil), launch...), pl.args...)...)
	<-jobs
	for _, check := range checks {
		t.Run(check, func(t *testing.T) {
			outcome := judge(t, r, pl.np, check)
			noteProgress(r, outcome)
			resultsMu.Lock()
			results = append(results, result{prog: prog.name, device: dev, config: config, check: check, outcome: outcome, elapsed: r.elapsed})
			resultsMu.Unlock()
		})
	}
}

// shapedPrograms are the programs and checks of TestCrossHostShaped, each
// program's checks in one job: messages of every protocol (eager,
// rendezvous, ANY_SOURCE, synchronous) and the collectives, small sizes,
// so that a round trip of 2 ms and the retransmissions of lost packets keep
// each job within seconds.
var shapedPrograms = []struct {
	prog   *program
	checks []string
}{
	{p2p, []string{"order", "anysource", "probe", "ssend", "truncate", "waitany", "alltoall"}},
	{collectives, []string{"barrier", "bcast", "reduce", "allreduce", "gather", "allgather", "alltoall", "split"}},
	{stress, []string{"thresholds"}},
}

// TestCrossHostShaped runs shapedPrograms on every device across 3
// simulated hosts whose links delay every packet by 1 ms and lose 1 % of
// them (netcluster's Netem: netem, or on kernels without it the delay line
// and a random drop at the switch), np 6 round-robin: every message
// crosses a shaped link, and the results must be what they are on a clean
// network.
func TestCrossHostShaped(t *testing.T) {
	c, launch := startHosts(t, crossHosts)
	for _, h := range c.Hosts {
		err := c.Netem(h.Name, "delay", "1ms", "loss", "1%")
		if err != nil && strings.Contains(err.Error(), "iptables") && strings.Contains(err.Error(), "not found") {
			testnote.Skip(t, fmt.Sprintf("conformance: this kernel has no netem, and the simulated cluster's delay line needs iptables: %v", err))
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	pl := placement{"np=6-rr-delay=1ms-loss=1%", 6, []string{"-rr"}}
	t.Run("devices", func(t *testing.T) {
		for _, dev := range crossHostDevices {
			t.Run(dev, func(t *testing.T) {
				t.Parallel()
				for _, sp := range shapedPrograms {
					t.Run(sp.prog.name, func(t *testing.T) {
						t.Parallel()
						crossChecks(t, sp.prog, dev, nil, pl, launch, sp.checks)
					})
				}
			})
		}
	})
	// The jobs' traffic went through the shaping.
	for _, h := range c.Hosts {
		n, err := c.ShapedPackets(h.Name)
		if err != nil {
			t.Fatal(err)
		}
		if n < 1000 {
			t.Errorf("the shaping of %s handled %d packets during the jobs; it is not in their path", h.Name, n)
		}
		t.Logf("the shaping of %s handled %d packets", h.Name, n)
	}
}

// crossCheck is runCheck for a job whose ranks run on the simulated hosts.
func crossCheck(t *testing.T, prog *program, dev string, opts []string, pl placement, launch []string, check string) {
	config := strings.Join(append(append([]string{dev}, opts...), "hosts", pl.name), "/")
	args := []string{check}
	if prog.short && testing.Short() {
		args = []string{"-short", check}
	}
	jobs <- struct{}{}
	r := runJob(prog.bin, dev, opts, pl.np, args, append(append([]string(nil), launch...), pl.args...)...)
	<-jobs
	outcome := judge(t, r, pl.np, check)
	noteProgress(r, outcome)
	resultsMu.Lock()
	results = append(results, result{prog: prog.name, device: dev, config: config, check: check, outcome: outcome, elapsed: r.elapsed})
	resultsMu.Unlock()
}

// drillLimit is how long a job may take to end after a host or its link
// is lost: the wire notices a silent peer within about five seconds.
const drillLimit = 15 * time.Second

// TestCrossHostDrill breaks a host under a running job (conformance/drill:
// every rank exchanging with its ring neighbours), on every device of
// crossHostDevices: its link cut at the switch, or the host destroyed
// (every process on it killed with its namespaces). The job must end
// non-zero within drillLimit, its standard error naming a rank and the
// host, with no process of it left.
func TestCrossHostDrill(t *testing.T) {
	for _, dev := range crossHostDevices {
		for _, how := range []string{"link-cut", "host-destroyed"} {
			t.Run(dev+"/"+how, func(t *testing.T) {
				c, launch := startHosts(t, crossHosts)
				drill(t, c, dev, launch, how)
			})
		}
	}
}

// drill runs one drill: h2 loses its link, or h3 is destroyed, once every
// rank is exchanging.
func drill(t *testing.T, c *netcluster.Cluster, dev string, launch []string, how string) {
	const np = 3
	marker := fmt.Sprintf("ADIMPI_CONFORMANCE_JOB=%d-drill-%d", os.Getpid(), runSeq.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	args := append([]string{"-np", fmt.Sprint(np), "-device", dev, "-timeout", "90s"}, launch...)
	cmd := exec.CommandContext(ctx, mpirunBin, append(args, crossBin(t, "drill"), "-for", "80s")...)
	cmd.Env = append(cleanEnv(), marker)
	out, stderr := testproc.StartPiped(t, cmd)
	defer func() {
		for _, pid := range processesWith(marker) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}()
	running, lines := 0, bufio.NewScanner(out)
	var stdout strings.Builder
	for running < np && lines.Scan() {
		stdout.WriteString(lines.Text() + "\n")
		if strings.HasSuffix(lines.Text(), " running") {
			running++
		}
	}
	if running < np {
		cmd.Wait()
		t.Fatalf("the drill's ranks did not all start exchanging:\nstdout:\n%s\nstderr:\n%s", indent(stdout.String()), indent(stderr.String()))
	}
	host := "h2"
	if how == "link-cut" {
		if err := c.SetLink(host, false); err != nil {
			t.Fatal(err)
		}
	} else {
		host = "h3"
		h, err := c.Host(host)
		if err != nil {
			t.Fatal(err)
		}
		if err := syscall.Kill(h.PID, syscall.SIGKILL); err != nil {
			t.Fatalf("destroying %s (holder pid %d): %v", host, h.PID, err)
		}
	}
	broken := time.Now()
	for lines.Scan() {
		stdout.WriteString(lines.Text() + "\n")
	}
	err := cmd.Wait()
	took := time.Since(broken)
	report := fmt.Sprintf("mpirun: %v after %.1fs\nstdout:\n%s\nstderr:\n%s", err, took.Seconds(), indent(stdout.String()), indent(stderr.String()))
	if err == nil {
		t.Fatalf("the job ended with status 0 although %s is gone: %s", host, report)
	}
	if took > drillLimit {
		t.Errorf("the job took %.1fs to end after %s went (limit %v): %s", took.Seconds(), host, drillLimit, report)
	}
	if !regexp.MustCompile(`rank \d+ (on host |on )?` + host + `\b`).MatchString(stderr.String()) {
		t.Errorf("standard error does not name a rank on %s: %s", host, report)
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(processesWith(marker)) > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if left := processesWith(marker); len(left) > 0 {
		t.Errorf("processes of the job still run after mpirun exited: %v: %s", left, report)
	}
	t.Logf("%s: the job ended in %.1fs: %v", how, took.Seconds(), err)
}
