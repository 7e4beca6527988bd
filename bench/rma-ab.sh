#!/usr/bin/env bash
# bench/rma-ab.sh: an A/B of one-sided communication on WinCreate windows.
# Builds mpibench at git revision BEFORE (default main) and from the
# working tree, runs `mpibench rma --win-create` at np 2 with 8-byte
# operations (rank 0 accesses rank 1, which waits in a barrier) with each,
# interleaved, ROUNDS times on every device of DEVICES, and prints for
# each row of ROWS the median of each side (the range beside it) and
# after/before. Each run is bounded by LIMIT seconds; the script stops
# starting rounds after BUDGET seconds.
#
#   BEFORE=main DEVICES="netvm via" ROWS=rma_create_acc_rate ROUNDS=5 timeout 290 bash bench/rma-ab.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BEFORE=${BEFORE:-main} DEVICES=${DEVICES:-"netvm fm via bip"} ROUNDS=${ROUNDS:-5}
ROWS=${ROWS:-"rma_create_put_lat rma_create_acc_rate"} LIMIT=${LIMIT:-40} BUDGET=${BUDGET:-240}
MIN_TIME=${MIN_TIME:-20ms}
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
mkdir "$OUT/src"
git archive "$BEFORE" | tar -x -C "$OUT/src"
(cd "$OUT/src" && go build -o "$OUT/before" ./cmd/mpibench)
go build -o "$OUT/after" ./cmd/mpibench
go build -o "$OUT/mpirun" ./cmd/mpirun
echo "uptime at start: $(uptime)"
SECONDS=0
for ((i = 0; i < ROUNDS; i++)); do
	((SECONDS < BUDGET)) || { echo "BUDGET reached after $i rounds"; break; }
	for dev in $DEVICES; do
		for side in before after; do
			timeout "$LIMIT" "$OUT/mpirun" -np 2 -device "$dev" "$OUT/$side" rma --win-create --csv --header=false \
				--min-size 8 --max-size 8 --reps 1 --min-time "$MIN_TIME" 2>/dev/null |
				sed "s/^/$side,/" >>"$OUT/rows.csv" || echo "$side on $dev: run failed or hit $LIMIT s" >&2
		done
	done
done
echo "uptime at end: $(uptime)"
for row in $ROWS; do
	for dev in $DEVICES; do
		awk -F, -v row="$row" -v dev="$dev" '
			$2 == row && $3 == dev { v[$1] = v[$1] " " $6; unit = $7 }
			function med(s,   a, n, i, j, t) {
				n = split(s, a, " ")
				for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
				lo = a[1]; hi = a[n]; cnt = n
				return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
			}
			END {
				if (v["before"] == "" || v["after"] == "") { printf "%-22s %-6s no rows\n", row, dev; exit }
				b = med(v["before"]); bl = lo; bh = hi; bn = cnt
				a = med(v["after"]); al = lo; ah = hi; an = cnt
				printf "%-22s %-6s before %9.4g (%g-%g, %d runs)  after %9.4g (%g-%g, %d runs) %s  after/before %.3g\n", row, dev, b, bl, bh, bn, a, al, ah, an, unit, a / b
			}' "$OUT/rows.csv"
	done
done
