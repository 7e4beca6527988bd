package conformance

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/adimpi/adimpi/internal/netcluster"
	"github.com/adimpi/adimpi/internal/testnote"
)

// xdpArgs are mpirun's flags for a job on the XDP wire that prints its
// wire counters when it closes (ADIMPI_WIRE_STATS), with a short loss
// timeout (ADIMPI_XDP_TIMEOUT) so that a drill ends soon.
var xdpArgs = []string{"-wire", "xdp", "-x", "ADIMPI_WIRE_STATS=1", "-x", "ADIMPI_XDP_TIMEOUT=4s"}

// xdpStat is one counter of the XDP wire's closing line of rank r, or -1
// when the rank printed none (it did not run on the XDP wire).
func xdpStat(stderr string, r int, name string) int {
	m := regexp.MustCompile(`wire: rank ` + strconv.Itoa(r) + `: xdp .*\b` + name + `=(\d+)`).FindStringSubmatch(stderr)
	if m == nil {
		return -1
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// noXDPLeft checks that no host's interface still has an XDP program once
// the job is over.
func noXDPLeft(t *testing.T, c *netcluster.Cluster, hosts ...string) {
	t.Helper()
	for _, h := range hosts {
		out, err := c.Command(h, "ip", "-d", "link", "show", "eth0").CombinedOutput()
		if err != nil {
			t.Errorf("ip link on %s: %v: %s", h, err, out)
			continue
		}
		if strings.Contains(string(out), "xdp") {
			t.Errorf("%s's eth0 still has an XDP program after the job:\n%s", h, out)
		}
	}
}

// xdpJob runs one check on the XDP wire and judges it; with xdpRanks it
// also checks that those ranks carried frames over AF_XDP.
func xdpJob(t *testing.T, prog *program, dev string, pl placement, launch []string, check string, xdpRanks ...int) *job {
	t.Helper()
	jobs <- struct{}{}
	r := runJob(prog.bin, dev, nil, pl.np, []string{check}, append(append(append([]string(nil), launch...), pl.args...), xdpArgs...)...)
	<-jobs
	if judge(t, r, pl.np, check) != "PASS" {
		return r
	}
	for _, rank := range xdpRanks {
		if n := xdpStat(r.stderr, rank, "xdp_packets_in"); n <= 0 {
			t.Errorf("rank %d received no frame over the XDP wire (xdp_packets_in %d):\n%s", rank, n, indent(r.stderr))
		}
	}
	return r
}

// TestCrossHostXDP runs point-to-point and stress checks on every device
// over the XDP wire across 3 simulated hosts: at np 3 every rank is its
// host's lowest and uses AF_XDP; at np 6 round-robin the second rank of
// each host talks TCP (one AF_XDP socket per host queue), so the job mixes
// both wires. Afterwards no host keeps the XDP program.
func TestCrossHostXDP(t *testing.T) {
	c, launch := startHosts(t, crossHosts)
	checks := []struct {
		prog  *program
		check string
	}{{p2p, "order"}, {p2p, "anysource"}, {stress, "thresholds"}, {stress, "flood"}}
	t.Cleanup(func() { noXDPLeft(t, c, "h1", "h2", "h3") })
	for _, dev := range crossHostDevices {
		// Not parallel: an interface carries one job's XDP program, so a
		// second job at once on the same hosts would run on TCP.
		t.Run(dev, func(t *testing.T) {
			for _, pl := range []placement{crossPlacements[0], crossPlacements[2]} {
				for _, ck := range checks {
					t.Run(pl.name+"/"+ck.prog.name+"/"+ck.check, func(t *testing.T) {
						xdpJob(t, ck.prog, dev, pl, launch, ck.check, 0, 1, 2)
					})
				}
			}
		})
	}
}

// startJumboHosts is startHosts for a cluster whose links carry jumbo
// frames (MTU 9000), on which the XDP wire's frames span several UMEM
// frames.
func startJumboHosts(t *testing.T, n int) (*netcluster.Cluster, []string) {
	t.Helper()
	return startHostsMTU(t, n, 9000)
}

// startHostsMTU is startHosts for a cluster whose links have the MTU mtu.
func startHostsMTU(t *testing.T, n, mtu int) (*netcluster.Cluster, []string) {
	t.Helper()
	if os.Geteuid() != 0 {
		testnote.Skip(t, fmt.Sprintf("conformance: simulated hosts need root to create namespaces (running as uid %d)", os.Geteuid()))
	}
	c := netcluster.StartOptsT(t, netcluster.Options{Hosts: n, MTU: mtu})
	hosts := make([]string, n)
	for i := range hosts {
		hosts[i] = netcluster.HostName(i + 1)
	}
	launcher := fmt.Sprintf("%s exec -dir %s {host} --", crossBin(t, "netcluster"), c.Dir)
	return c, []string{"-launcher-exec", launcher, "-hosts", strings.Join(hosts, ",")}
}

// TestCrossHostXDPLoss drops 1 % and then 5 % of the frames the switch
// sends to h1 and h2 (loss on the cable, which the XDP wire must repair
// itself), on links of MTU 9000 (jumbo frames, each in several UMEM
// frames); then, since the kernel here has no netem to reorder or
// duplicate, the ranks' own links lose 1 %, duplicate 5 % and hold back
// 10 % of their frames behind the next one (ADIMPI_XDP_IMPAIR). The stress
// programs, which check every byte and the order of every message, still
// pass; the wire counted retransmissions, and duplicates where frames were
// duplicated.
func TestCrossHostXDPLoss(t *testing.T) {
	c, launch := startJumboHosts(t, crossHosts)
	impair := append(append([]string(nil), launch...), "-x", "ADIMPI_XDP_IMPAIR=loss=0.01,dup=0.05,reorder=0.1")
	for _, shape := range []string{"1%", "5%", "impair"} {
		for _, h := range []string{"h1", "h2"} {
			var err error
			if shape == "impair" {
				err = c.Netem(h)
			} else {
				err = c.Netem(h, "loss", shape)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		args := launch
		if shape == "impair" {
			args = impair
		}
		for _, dev := range []string{"netvm", "fm"} {
			retx, dups := 0, 0
			for _, check := range []string{"thresholds", "flood"} {
				t.Run(fmt.Sprintf("%s/%s/%s", shape, dev, check), func(t *testing.T) {
					r := xdpJob(t, stress, dev, crossPlacements[0], args, check, 0, 1, 2)
					for rank := range 3 {
						retx += max(xdpStat(r.stderr, rank, "xdp_retransmits"), 0)
						dups += max(xdpStat(r.stderr, rank, "xdp_duplicates"), 0)
					}
				})
			}
			if retx == 0 && !t.Failed() {
				t.Errorf("%s, %s: the jobs passed without a single retransmission: was the loss applied?", shape, dev)
			}
			if shape == "impair" && dups == 0 && !t.Failed() {
				t.Errorf("%s, %s: no duplicate counted: were frames duplicated?", shape, dev)
			}
		}
	}
	noXDPLeft(t, c, "h1", "h2", "h3")
}

// TestCrossHostXDPLossLargestMTU drops 1 % of the frames the switch sends
// to h1 and h2 on links of MTU 65000, the largest frames veth takes (each
// of the XDP wire's frames in 17 UMEM frames, a lost frame 64 KB of a
// message): the stress programs, which check every byte and the order of
// every message, pass on every device, and the wire counted
// retransmissions and cut large messages' frames straight into the UMEM
// (xdp_lent), so that those frames were resent from there.
func TestCrossHostXDPLossLargestMTU(t *testing.T) {
	c, launch := startHostsMTU(t, crossHosts, 65000)
	for _, h := range []string{"h1", "h2"} {
		if err := c.Netem(h, "loss", "1%"); err != nil {
			t.Fatal(err)
		}
	}
	retx, lent := 0, 0
	for _, dev := range []string{"netvm", "fm", "via", "bip"} {
		t.Run(dev, func(t *testing.T) {
			r := xdpJob(t, stress, dev, crossPlacements[0], launch, "thresholds", 0, 1, 2)
			for rank := range 3 {
				retx += max(xdpStat(r.stderr, rank, "xdp_retransmits"), 0)
				lent += max(xdpStat(r.stderr, rank, "xdp_lent"), 0)
			}
		})
	}
	if retx == 0 && !t.Failed() {
		t.Errorf("the jobs passed without a single retransmission: was the loss applied?")
	}
	if lent == 0 && !t.Failed() {
		t.Errorf("no frame was cut straight into the UMEM (xdp_lent 0): large messages took the copying path")
	}
	noXDPLeft(t, c, "h1", "h2", "h3")
}

// TestCrossHostXDPDrill cuts h2's link, or destroys h3, under a job on the
// XDP wire: the job must end non-zero, soon, naming a rank on that host
// (drill), and the surviving hosts must have lost the XDP program with the
// ranks that attached it (killed by mpirun as the job ended).
func TestCrossHostXDPDrill(t *testing.T) {
	for _, dev := range []string{"netvm", "fm"} {
		for _, how := range []string{"link-cut", "host-destroyed"} {
			t.Run(dev+"/"+how, func(t *testing.T) {
				c, launch := startHosts(t, crossHosts)
				drill(t, c, dev, append(launch, xdpArgs...), how)
				if how == "link-cut" {
					noXDPLeft(t, c, "h1", "h2", "h3")
				} else {
					noXDPLeft(t, c, "h1", "h2")
				}
			})
		}
	}
}

// TestCrossHostXDPFullFrames streams 4 MiB messages (mpibench bw, 64 in
// flight) over the XDP wire on links of MTU 65000 with the devices that
// cut a large message into pieces of their own, netvm (1 MiB chunks) and
// bip (128 KiB): the pieces must fill their Ethernet frames, so that the
// sender's short frames that end a message of several frames (xdp_tails)
// are few against its full frames (xdp_lent). Pieces of 1 MiB and 128 KiB
// ended in one short frame each: a sixteenth and a half of the full ones.
func TestCrossHostXDPFullFrames(t *testing.T) {
	c, launch := startHostsMTU(t, 2, 65000)
	bench := crossBin(t, "mpibench")
	for _, dev := range []string{"netvm", "bip"} {
		t.Run(dev, func(t *testing.T) {
			jobs <- struct{}{}
			r := runJob(bench, dev, nil, 2, []string{"bw", "--min-size", "4194304", "--max-size", "4194304", "--iters", "2", "--reps", "1"},
				append(append([]string(nil), launch...), xdpArgs...)...)
			<-jobs
			if r.err != nil {
				t.Fatalf("%s: %v\n%s", r.command(), r.err, indent(r.stderr))
			}
			lent, tails := xdpStat(r.stderr, 0, "xdp_lent"), xdpStat(r.stderr, 0, "xdp_tails")
			if lent < 64*64 || tails < 0 {
				t.Fatalf("rank 0 cut %d full frames into the UMEM (xdp_lent), %d tails: want the counters of 128 messages of 4 MiB\n%s", lent, tails, indent(r.stderr))
			}
			if tails > lent/64 {
				t.Errorf("rank 0 sent %d short frames ending a message of several (xdp_tails) against %d full frames: the pieces do not fill their frames", tails, lent)
			}
		})
	}
	noXDPLeft(t, c, "h1", "h2")
}
