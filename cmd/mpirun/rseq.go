package main

import "strings"

// rseqTunable is the glibc tunable that stops glibc from registering a
// restartable sequence (rseq) area for every thread it starts. With an area
// registered the kernel updates it on each return to user space after a
// context switch, which MPI ranks oversubscribing their cores pay on every
// hand-off; Go does not use the area and glibc falls back to a system call
// for sched_getcpu. See docs/launching.md, "glibc's rseq".
const rseqTunable = "glibc.pthread.rseq"

// withoutRseq returns env with rseqTunable=0 added to GLIBC_TUNABLES,
// unless the user's environment already sets that tunable (theirs wins).
func withoutRseq(env []string) []string {
	for i, kv := range env {
		v, ok := strings.CutPrefix(kv, "GLIBC_TUNABLES=")
		if !ok {
			continue
		}
		for _, t := range strings.Split(v, ":") {
			if name, _, _ := strings.Cut(t, "="); name == rseqTunable {
				return env
			}
		}
		if v == "" {
			env[i] = "GLIBC_TUNABLES=" + rseqTunable + "=0"
		} else {
			env[i] = kv + ":" + rseqTunable + "=0"
		}
		return env
	}
	return append(env, "GLIBC_TUNABLES="+rseqTunable+"=0")
}
