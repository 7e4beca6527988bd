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

// checkLocal checks that every host names this machine, which is all that
// mpirun can launch on for now, and returns the hosts' total slots (0 if
// none gave any).
func checkLocal(hosts []host) (int, error) {
	local := localNames()
	total := 0
	for _, h := range hosts {
		if !local[strings.ToLower(h.name)] && !isLocalAddr(h.name) {
			hn, _ := os.Hostname()
			return 0, usagef("%s: host %q is not this machine (%s): multi-host launching is not available yet; every rank runs here, so name only localhost or %s", h.where, h.name, hn, hn)
		}
		total += h.slots
	}
	return total, nil
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
