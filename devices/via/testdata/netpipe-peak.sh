#!/bin/bash
# NetPIPE's peak bandwidth (Debian's unmodified /usr/bin/NPmpich2, the
# sizes `mpibench compare --quick` runs: 64 KiB to 1 MiB, 50 repeats) on via
# through adimpi's libmpich.so.12 built from this tree, with MAIN=DIR also
# through one built from the tree in DIR (an A/B of a change), and on
# MPICH, at np 2 in interleaved rounds. Per round it keeps each target's
# peak (the best size's MB/s) and its 1 MiB figure; it prints the medians
# over ROUNDS rounds (default 5) and the ratios to MPICH (issue 26's target:
# peak >= 1.5x MPICH's). Run from the repository root:
#
#	bash devices/via/testdata/netpipe-peak.sh
#	MAIN=/path/to/other/tree ROUNDS=7 bash devices/via/testdata/netpipe-peak.sh
. devices/via/testdata/netpipe-lib.sh
np=(/usr/bin/NPmpich2 -l 65536 -u 1048576 -p 0 -n 50 -o /dev/null)
# NetPIPE's lines: "  8: 1048576 bytes 50 times --> 123456.78 Mbps in 68.00 usec";
# MB/s = Mbps / 8. Prints "peak MB/s" and "1 MiB MB/s".
peak() { awk '/ bytes .* Mbps/ { mb = $(NF-4) / 8; if (mb > p) p = mb; if ($2 == 1048576) m = mb } END { if (p > 0) print p, m }'; }
uptime
for r in $(seq "$rounds"); do
	for t in $targets mpich; do
		if [ "$t" = mpich ]; then
			v=$(timeout 60 mpiexec.mpich -n 2 "${np[@]}" 2>&1 | peak) || true
		else
			v=$(ADIMPI_LIBMPICH_DIR=$dir/$t timeout 60 "$dir/mpirun" -np 2 -device via "${np[@]}" 2>&1 | peak) || true
		fi
		[ -n "$v" ] && echo "$t $v" >>"$dir/all" || echo "round $r: $t failed" >&2
	done
done
uptime
awk "$median"'
{ p[$1] = p[$1] " " $2; m[$1] = m[$1] " " $3; seen[$1] = 1 }
END {
	mp = median(p["mpich"])
	printf "| target | NetPIPE peak (MB/s) | at 1 MiB (MB/s) | peak / MPICH (>= 1.5) |\n|---|---:|---:|---:|\n"
	for (t in seen) printf "| %s | %.0f | %.0f | %.2f |\n", t, median(p[t]), median(m[t]), median(p[t]) / mp
	if ("via-main" in seen) printf "\nvia / via-main: peak %.2fx\n", median(p["via"]) / median(p["via-main"])
}' "$dir/all"
