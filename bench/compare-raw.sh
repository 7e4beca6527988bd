#!/usr/bin/env bash
# compare-raw.sh: DMPI's table — each device's MPI bandwidth against its raw
# transfer (mpibench raw: the device's own API, no MPI), one host, 2 ranks,
# 64 KiB to 8 MiB, in interleaved rounds, medians:
#
#   bash bench/compare-raw.sh                       # output in raw-bench-out/
#   BEFORE=/path/to/old/mpibench bash bench/compare-raw.sh
#
# With BEFORE (an mpibench built from an earlier tree) every round also runs
# that binary's bw, and the table has a column "MPI before". ROUNDS (default
# 5) rounds, each running every device's raw, bw (and before) once, in turn;
# DEVICES (default "netvm fm bip via") picks the devices. Rows and the load
# (uptime) before and after go to $OUT.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
OUT=${OUT:-raw-bench-out}
mkdir -p "$OUT"
go build -o "$OUT/mpirun" ./cmd/mpirun || exit 1
go build -o "$OUT/mpibench" ./cmd/mpibench || exit 1
CSV="$OUT/results.csv"
echo "bench,device,np,size,value,unit,round" >"$CSV"
uptime >"$OUT/load.txt"
args=(--csv --header=false --min-size 65536 --max-size 8388608 --reps 3)
run() { timeout 600 "$@" | sed "s/\$/,$round/" >>"$CSV" || echo "compare-raw.sh: $* failed" >&2; }
for ((round = 0; round < ${ROUNDS:-5}; round++)); do
	for dev in ${DEVICES:-netvm fm bip via}; do
		run "$OUT/mpirun" -np 2 -timeout 550s "$OUT/mpibench" raw "$dev" "${args[@]}"
		run "$OUT/mpirun" -np 2 -timeout 550s -device "$dev" "$OUT/mpibench" bw "${args[@]}"
		if [ -n "${BEFORE:-}" ]; then
			timeout 600 "$OUT/mpirun" -np 2 -timeout 550s -device "$dev" "$BEFORE" bw "${args[@]}" |
				sed "s/^bw,/bw_before,/; s/\$/,$round/" >>"$CSV" || echo "compare-raw.sh: before $dev failed" >&2
		fi
	done
	echo "round $((round + 1)) done" >&2
done
uptime >>"$OUT/load.txt"
# The table: per device and size the median of the rounds for raw, MPI
# (and MPI before), and MPI / raw.
awk -F, 'NR > 1 {
	dev = $2; sub(/-raw$/, "", dev)
	k = dev SUBSEP $4 SUBSEP $1
	v[k] = v[k] " " $5
	devs[dev] = 1; sz[$4] = 1
}
function median(s,   a, n, i, j, t) {
	n = split(s, a, " ")
	for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
	if (n == 0) return ""
	return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
END {
	print "| device | size | raw (MB/s) | MPI before (MB/s) | MPI (MB/s) | MPI / raw |"
	print "|---|---:|---:|---:|---:|---:|"
	for (d in devs) for (s = 65536; s <= 8388608; s *= 2) {
		r = median(v[d, s, "raw_bw"]); m = median(v[d, s, "bw"]); b = median(v[d, s, "bw_before"])
		if (r == "" || m == "") continue
		printf "| %s | %d KiB | %.0f | %s | %.0f | %.2f |\n", d, s / 1024, r, (b == "" ? "" : sprintf("%.0f", b)), m, m / r
	}
}' "$CSV" | tee "$OUT/table.md"
cat "$OUT/load.txt"
