#!/bin/bash
# Issue 26's three NetPIPE targets on every device, in interleaved rounds:
# Debian's unmodified /usr/bin/NPmpich2 through adimpi's libmpich.so.12
# built from this tree, the Go API's 8 B ping-pong (mpibench pingpong, the
# best repetition) on the same device, and NPmpich2 on MPICH, all at np 2
# on one host. Per round and target: NetPIPE's 8 B latency (half its round
# trip, from its Mbps figure, which has more digits than its 0.01 µs time),
# its peak bandwidth over 64 KiB to 1 MiB (the sizes `mpibench compare
# --quick` runs, 50 repeats) and, for the devices, the Go API's 8 B
# latency. It prints the medians over ROUNDS rounds (default 5) and the
# ratios: NetPIPE 8 B / Go API (target <= 1.2), NetPIPE 8 B / MPICH's
# (<= 1.0), peak / MPICH's (>= 1.5). Run from the repository root:
#
#	bash bench/netpipe-targets.sh
#	DEVICES="netvm via" ROUNDS=9 bash bench/netpipe-targets.sh
set -eu
rounds=${ROUNDS:-5}
devices=${DEVICES:-netvm fm bip via}
for c in NPmpich2 mpiexec.mpich; do
	if ! command -v "$c" >/dev/null; then
		echo "netpipe-targets.sh: $c is missing (apt-get install netpipe-mpich2 mpich)" >&2
		exit 1
	fi
done
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
go build -o "$dir/mpirun" ./cmd/mpirun
go build -o "$dir/mpibench" ./cmd/mpibench
go build -buildmode=c-shared -ldflags=-extldflags=-Wl,-soname,libmpich.so.12 -o "$dir/lib/libmpich.so.12" ./cmd/libmpich
lat=(/usr/bin/NPmpich2 -l 8 -u 8 -p 0 -n 2000 -o /dev/null)
bw=(/usr/bin/NPmpich2 -l 65536 -u 1048576 -p 0 -n 50 -o /dev/null)
# NetPIPE's lines: "  0:       8 bytes   2000 times -->    277.43 Mbps in       0.22 usec".
usec8() { awk '$2 == 8 && / bytes .* Mbps/ { printf "%.4f\n", 64 / $(NF-4); exit }'; }
peak() { awk '/ bytes .* Mbps/ { mb = $(NF-4) / 8; if (mb > p) p = mb } END { if (p > 0) print p }'; }
# keep NAME KIND VALUE: one measurement, or a note that it failed.
keep() { if [ -n "$3" ]; then echo "$1 $2 $3" >>"$dir/all"; else echo "round $r: $1 $2 failed" >&2; fi; }
uptime
for r in $(seq "$rounds"); do
	for d in $devices; do
		run=("$dir/mpirun" -np 2 -device "$d")
		keep "$d" netpipe "$(ADIMPI_LIBMPICH_DIR=$dir/lib timeout 60 "${run[@]}" "${lat[@]}" 2>&1 | usec8 || true)"
		keep "$d" go "$(timeout 60 "${run[@]}" "$dir/mpibench" pingpong --min-size 8 --max-size 8 --iters 200 --reps 30 --csv --header=false 2>&1 |
			awk -F, '$1 == "pingpong" { print $5; exit }' || true)"
		keep "$d" peak "$(ADIMPI_LIBMPICH_DIR=$dir/lib timeout 60 "${run[@]}" "${bw[@]}" 2>&1 | peak || true)"
	done
	keep mpich netpipe "$(timeout 60 mpiexec.mpich -n 2 "${lat[@]}" 2>&1 | usec8 || true)"
	keep mpich peak "$(timeout 60 mpiexec.mpich -n 2 "${bw[@]}" 2>&1 | peak || true)"
done
uptime
awk -v devices="$devices" '
function median(s,   n, i, j, t, a) {
	n = split(s, a, " ")
	for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
	return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
function verdict(x, le, bound) { return sprintf("%.2f %s", x, (le ? x <= bound : x >= bound) ? "met" : "missed") }
{ v[$1 " " $2] = v[$1 " " $2] " " $3 }
END {
	mn = median(v["mpich netpipe"]); mp = median(v["mpich peak"])
	printf "| target | NetPIPE 8 B (µs) | Go API 8 B (µs) | NetPIPE / Go (≤ 1.2) | NetPIPE / MPICH (≤ 1.0) | NetPIPE peak (MB/s) | peak / MPICH (≥ 1.5) |\n|---|---:|---:|---:|---:|---:|---:|\n"
	n = split(devices, ds, " ")
	for (i = 1; i <= n; i++) {
		d = ds[i]; l = median(v[d " netpipe"]); g = median(v[d " go"]); p = median(v[d " peak"])
		printf "| %s | %.4f | %.4f | %s | %s | %.0f | %s |\n", d, l, g, verdict(l / g, 1, 1.2), verdict(l / mn, 1, 1.0), p, verdict(p / mp, 0, 1.5)
	}
	printf "| MPICH | %.4f | – | – | 1.00 | %.0f | 1.00 |\n", mn, mp
}' "$dir/all"
