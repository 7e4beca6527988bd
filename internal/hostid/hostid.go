// Package hostid names the host a process runs on, in the sense that
// matters to shared memory: two processes share a host when they run on
// the same kernel and see the same processes and the same mounts, so that
// one can map the other's segments through /proc and write into its memory.
// A hostname alone does not establish that (two containers may share one),
// nor does the existence of a /proc/PID entry (a PID of another namespace
// may exist here too).
package hostid

import (
	"fmt"
	"os"
	"strings"
)

// ID identifies a host: the kernel's boot id and the inodes of the
// process's PID and mount namespaces. Equal IDs mean shared memory works.
type ID string

// Self returns the ID of the host this process runs on.
func Self() (ID, error) {
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return "", fmt.Errorf("hostid: boot id: %v", err)
	}
	parts := []string{strings.TrimSpace(string(boot))}
	for _, ns := range []string{"pid", "mnt"} {
		link, err := os.Readlink("/proc/self/ns/" + ns)
		if err != nil {
			return "", fmt.Errorf("hostid: %s namespace: %v", ns, err)
		}
		parts = append(parts, link)
	}
	return ID(strings.Join(parts, "/")), nil
}

// Name is the host's name as its users know it (the UTS hostname).
func Name() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "localhost"
	}
	return h
}

// Map numbers the hosts of a job: ids[r] is rank r's ID, and the result
// gives each rank the number of its host, hosts numbered in order of their
// lowest rank (rank 0's host is host 0).
func Map(ids []ID) []int {
	num := map[ID]int{}
	hosts := make([]int, len(ids))
	for r, id := range ids {
		h, ok := num[id]
		if !ok {
			h = len(num)
			num[id] = h
		}
		hosts[r] = h
	}
	return hosts
}
