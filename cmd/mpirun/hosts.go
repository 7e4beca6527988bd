package main

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
)

// host is one entry of -hosts or a hostfile.
type host struct {
	name  string
	slots int    // 0: not given
	where string // "-hosts" or file:line, for messages
	local bool   // this machine (set by markLocal)
}

// parseHostList reads -hosts/-host values: comma-separated host or
// host:slots entries.
func parseHostList(flag string, lists []string) ([]host, error) {
	var hosts []host
	for _, list := range lists {
		for _, e := range strings.Split(list, ",") {
			e = strings.TrimSpace(e)
			if e == "" {
				return nil, usagef("%s %q: empty host name", flag, list)
			}
			name, slots, err := splitSlots(e)
			if err != nil {
				return nil, usagef("%s %q: %v", flag, list, err)
			}
			hosts = append(hosts, host{name: name, slots: slots, where: flag})
		}
	}
	return hosts, nil
}

// splitSlots splits host:slots (slots a positive number).
func splitSlots(e string) (string, int, error) {
	name, s, ok := strings.Cut(e, ":")
	if !ok {
		return e, 0, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || name == "" {
		return "", 0, fmt.Errorf("%q: want host or host:slots with slots a positive number", e)
	}
	return name, n, nil
}

// parseHostfile reads a hostfile: one host per line, as "host",
// "host:slots" (Hydra) or "host slots=N" (Open MPI, which also allows
// max_slots=M); '#' starts a comment. A line it cannot read is an error
// naming file:line.
func parseHostfile(path string) ([]host, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, usagef("hostfile: %v", err)
	}
	defer f.Close()
	var hosts []host
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		where := fmt.Sprintf("%s:%d", path, line)
		text, _, _ := strings.Cut(sc.Text(), "#")
		fields := strings.Fields(text)
		if len(fields) == 0 {
			continue
		}
		name, slots, err := splitSlots(fields[0])
		if err != nil {
			return nil, usagef("%s: %v", where, err)
		}
		for _, kv := range fields[1:] {
			k, v, _ := strings.Cut(kv, "=")
			n, err := strconv.Atoi(v)
			switch {
			case k != "slots" && k != "max_slots" && k != "max-slots":
				return nil, usagef("%s: %q: want host, host:slots or host slots=N", where, kv)
			case err != nil || n < 1:
				return nil, usagef("%s: %q: want %s=N with N a positive number", where, kv, k)
			case k == "slots":
				slots = n
			}
		}
		hosts = append(hosts, host{name: name, slots: slots, where: where})
	}
	if err := sc.Err(); err != nil {
		return nil, usagef("hostfile %s: %v", path, err)
	}
	if len(hosts) == 0 {
		return nil, usagef("hostfile %s names no host", path)
	}
	return hosts, nil
}

// markLocal marks which hosts are this machine (the others are reached
// through the launcher) and reports whether any is not.
func markLocal(hosts []host) (anyRemote bool) {
	local := localNames()
	for i := range hosts {
		h := &hosts[i]
		h.local = local[strings.ToLower(h.name)] || isLocalAddr(h.name)
		anyRemote = anyRemote || !h.local
	}
	return anyRemote
}

// defaultNP is the number of ranks the hosts ask for when -n is not given:
// -ppn on each host, else the slots the hosts give (0 if none).
func defaultNP(hosts []host, ppn int) int {
	if ppn > 0 {
		return ppn * len(hosts)
	}
	total := 0
	for _, h := range hosts {
		total += h.slots
	}
	return total
}

// place puts np ranks on hosts and returns each rank's host (an index into
// hosts). Each host has a capacity: -ppn if given; else its slots, or 1 for
// a host that gives none when some do; else (no host gives slots) an even
// share of np, the first hosts taking one more when np does not divide.
// Block placement fills each host's capacity before the next host's;
// round-robin gives one rank to each host with room in turn. Ranks beyond
// the total capacity start another round of the same order.
func place(hosts []host, np, ppn int, roundRobin bool) []int {
	caps := make([]int, len(hosts))
	anySlots := false
	for _, h := range hosts {
		anySlots = anySlots || h.slots > 0
	}
	for i, h := range hosts {
		switch {
		case ppn > 0:
			caps[i] = ppn
		case anySlots:
			caps[i] = max(h.slots, 1)
		default:
			caps[i] = np / len(hosts)
			if i < np%len(hosts) {
				caps[i]++
			}
		}
	}
	out := make([]int, 0, np)
	for len(out) < np {
		used := make([]int, len(hosts))
		if !roundRobin {
			for i := range hosts {
				for ; used[i] < caps[i] && len(out) < np; used[i]++ {
					out = append(out, i)
				}
			}
			continue
		}
		for progress := true; progress && len(out) < np; {
			progress = false
			for i := range hosts {
				if used[i] < caps[i] && len(out) < np {
					out = append(out, i)
					used[i]++
					progress = true
				}
			}
		}
	}
	return out
}

// localNames are the names of this machine.
func localNames() map[string]bool {
	names := map[string]bool{"localhost": true, "localhost.localdomain": true, "ip6-localhost": true}
	if hn, err := os.Hostname(); err == nil {
		hn = strings.ToLower(hn)
		names[hn] = true
		short, _, _ := strings.Cut(hn, ".")
		names[short] = true
	}
	return names
}

// isLocalAddr reports whether s is a loopback address or one of this
// machine's interface addresses.
func isLocalAddr(s string) bool {
	ip := net.ParseIP(s)
	if ip == nil {
		return false
	}
	if ip.IsLoopback() {
		return true
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return false
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.Equal(ip) {
			return true
		}
	}
	return false
}
