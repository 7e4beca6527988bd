#!/usr/bin/env bash
# compare-rma.sh: one run, on this machine, of one-sided communication
# (mpibench rma, cmd/mpibench/rma.go) on every adimpi device and on MPICH
# and Open MPI (bench/c/mpibench.c rma), in ROUNDS interleaved rounds (every
# implementation once per round), so that the load of a shared machine falls
# on all alike; the table gives each row's median over the rounds (each
# run reports the best of its --reps repetitions).
#
#   bash bench/compare-rma.sh                 # output goes to bench-out/rma/
#   OUT=/tmp/r ROUNDS=5 bash bench/compare-rma.sh
#
# Per implementation and round: np=2 on an allocated window (Put/Get +
# Flush latency 8 B to 64 KiB, bandwidth 4 KiB to 1 MiB, Accumulate rate,
# FetchAndOp rate), np=2 with --win-create (a window of the program's
# memory: netvm's remote write, the other devices' target agent), and np=16
# (FetchAndOp rate of 16 ranks on one counter, fence halo exchange).
# Rows go to $OUT/results.csv, the table to $OUT/summary.txt, with the
# machine's load (uptime) before and after.
set -uo pipefail

cd "$(dirname "$0")/.." || exit 1
OUT=${OUT:-bench-out/rma}
ROUNDS=${ROUNDS:-3}
REPS=${REPS:-3}
MIN_TIME=${MIN_TIME:-0.05}
LIMIT=${LIMIT:-180}
DEVICES=${DEVICES:-"netvm fm via bip"}
. bench/lib.sh
detect_mpis
build_tools
build_c mpibench.c mpibench

ompi=(mpiexec.openmpi --allow-run-as-root --oversubscribe)
load_before=$(uptime)
for round in $(seq "$ROUNDS"); do
	note "round $round of $ROUNDS"
	for dev in $DEVICES; do
		g=("$OUT/mpibench" --csv --reps "$REPS" --min-time "${MIN_TIME}s")
		run_bench "$dev-$round" "$LIMIT" '^rma_' "$MPIRUN" -np 2 -device "$dev" "${g[@]}" --max-size 1048576 rma
		run_bench "$dev-create-$round" "$LIMIT" '^rma_' "$MPIRUN" -np 2 -device "$dev" "${g[@]}" --max-size 1048576 --win-create rma
		run_bench "$dev-16-$round" "$LIMIT" '^rma_\(fop_rate\|halo\)' "$MPIRUN" -np 16 -device "$dev" "${g[@]}" --max-size 8 rma
	done
	c=(--reps "$REPS" --min-time "$MIN_TIME" --no-header)
	if ((have_mpich)); then
		run_bench "mpich-$round" "$LIMIT" '^rma_' mpiexec.mpich -n 2 "$OUT/mpibench-mpich" rma --max-size 1048576 "${c[@]}"
		run_bench "mpich-create-$round" "$LIMIT" '^rma_' mpiexec.mpich -n 2 "$OUT/mpibench-mpich" rma --max-size 1048576 --win-create "${c[@]}"
		run_bench "mpich-16-$round" "$LIMIT" '^rma_\(fop_rate\|halo\)' mpiexec.mpich -n 16 "$OUT/mpibench-mpich" rma --max-size 8 "${c[@]}"
	fi
	if ((have_ompi)); then
		run_bench "openmpi-$round" "$LIMIT" '^rma_' "${ompi[@]}" -n 2 "$OUT/mpibench-openmpi" rma --max-size 1048576 "${c[@]}"
		run_bench "openmpi-create-$round" "$LIMIT" '^rma_' "${ompi[@]}" -n 2 "$OUT/mpibench-openmpi" rma --max-size 1048576 --win-create "${c[@]}"
		run_bench "openmpi-16-$round" "$LIMIT" '^rma_\(fop_rate\|halo\)' "${ompi[@]}" -n 16 "$OUT/mpibench-openmpi" rma --max-size 8 "${c[@]}"
	fi
done
load_after=$(uptime)

# The median over the rounds of each row.
{
	echo "load before: $load_before"
	echo "load after:  $load_after"
	echo "median of $ROUNDS interleaved rounds"
	echo
	order="$DEVICES mpich openmpi"
	printf '%-22s %3s %8s %7s' bench np size unit
	for d in $order; do printf ' %10s' "$d"; done
	printf '\n'
	awk -F, -v order="$order" 'NR > 1 {
		k = $1 "," $3 "," $4 "," $6; row[k] = 1
		vals[k, $2] = ((k, $2) in vals) ? vals[k, $2] " " $5 : $5
	}
	function median(list,   v, n, i, j, t) {
		n = split(list, v, " ")
		for (i = 2; i <= n; i++)
			for (j = i; j > 1 && v[j - 1] + 0 > v[j] + 0; j--) { t = v[j]; v[j] = v[j - 1]; v[j - 1] = t }
		return n % 2 ? v[(n + 1) / 2] : sprintf("%.4g", (v[n / 2] + v[n / 2 + 1]) / 2)
	}
	END {
		n = split(order, devs, " ")
		for (k in row) {
			split(k, f, ",")
			printf "%-22s %3s %8s %7s", f[1], f[2], f[3], f[4]
			for (i = 1; i <= n; i++) printf " %10s", ((k, devs[i]) in vals) ? median(vals[k, devs[i]]) : "-"
			printf "\n"
		}
	}' "$RESULTS" | sort -k1,1 -k2,2n -k3,3n
} >"$OUT/summary.txt"
cat "$OUT/summary.txt"
if ((${#failures[@]})); then
	note "failed: ${failures[*]}"
	exit 1
fi
