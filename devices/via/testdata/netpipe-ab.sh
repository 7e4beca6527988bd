#!/bin/bash
# NetPIPE's 8 B latency (Debian's unmodified /usr/bin/NPmpich2, half its
# round trip) on via through adimpi's libmpich.so.12 built from this tree,
# with MAIN=DIR also through one built from the tree in DIR (an A/B of a
# change), and on MPICH, at np 2 in interleaved rounds; it prints the
# medians over ROUNDS rounds (default 5) and the ratios. The Go API's 8 B
# latency (mpibench pingpong, the best repetition) of each via build runs
# in the same rounds, for NetPIPE's target of at most 1.2x it. Run from
# the repository root:
#
#	bash devices/via/testdata/netpipe-ab.sh
#	MAIN=/path/to/other/tree ROUNDS=7 bash devices/via/testdata/netpipe-ab.sh
. devices/via/testdata/netpipe-lib.sh
go build -o "$dir/mpibench" ./cmd/mpibench
if [ -n "${MAIN:-}" ]; then
	(cd "$MAIN" && go build -o "$dir/mpibench-main" ./cmd/mpibench && go build -o "$dir/mpirun-main" ./cmd/mpirun)
fi
np=(/usr/bin/NPmpich2 -l 8 -u 8 -p 0 -n 2000 -o /dev/null)
lat() { awk '/ 8 bytes .* usec/ { print $(NF-1); exit }'; }
uptime
for r in $(seq "$rounds"); do
	for t in $targets; do
		run=$dir/mpirun bench=$dir/mpibench
		if [ "$t" = via-main ]; then run=$dir/mpirun-main bench=$dir/mpibench-main; fi
		v=$(ADIMPI_LIBMPICH_DIR=$dir/$t timeout 60 "$run" -np 2 -device via "${np[@]}" 2>&1 | lat) || true
		[ -n "$v" ] && echo "$t netpipe $v" >>"$dir/all" || echo "round $r: $t netpipe failed" >&2
		v=$(timeout 60 "$run" -np 2 -device via "$bench" pingpong --min-size 8 --max-size 8 --iters 200 --reps 30 --csv --header=false 2>&1 |
			awk -F, '$1 == "pingpong" { print $5; exit }') || true
		[ -n "$v" ] && echo "$t go $v" >>"$dir/all" || echo "round $r: $t pingpong failed" >&2
	done
	v=$(timeout 60 mpiexec.mpich -n 2 "${np[@]}" 2>&1 | lat) || true
	[ -n "$v" ] && echo "mpich netpipe $v" >>"$dir/all" || echo "round $r: mpich netpipe failed" >&2
done
uptime
awk "$median"'
{ v[$1 " " $2] = v[$1 " " $2] " " $3; seen[$1] = 1 }
END {
	m = median(v["mpich netpipe"])
	printf "| target | NetPIPE 8 B (us) | Go API 8 B (us) | NetPIPE / Go (<= 1.2) | NetPIPE / MPICH (<= 1.0) |\n|---|---:|---:|---:|---:|\n"
	for (t in seen) {
		n = median(v[t " netpipe"])
		if (t == "mpich") { printf "| mpich | %.3f | - | - | 1.00 |\n", n; continue }
		g = median(v[t " go"])
		printf "| %s | %.3f | %.3f | %.2f | %.2f |\n", t, n, g, n / g, n / m
	}
	if ("via-main" in seen) printf "\nvia / via-main: NetPIPE %.2fx, Go API %.2fx\n", median(v["via netpipe"]) / median(v["via-main netpipe"]), median(v["via go"]) / median(v["via-main go"])
}' "$dir/all"
