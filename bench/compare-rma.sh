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
# machine's load (uptime) before and after, followed by the ratios of the
# issue's figures (put/get 8 B latency, 1 MiB bandwidth, FetchAndOp at
# np 16) of every device to Open MPI's and MPICH's.
#
# Knobs: SIZES="8 1048576" runs each np=2 configuration once per size
# (--min-size = --max-size = size) instead of once over 8 B..1 MiB, which
# is much shorter; NP2=0 / NP16=0 / CREATE=0 leave out the np=2 runs, the
# np=16 runs, the --win-create runs; BUDGET=S starts no round that the
# last one's duration says would end after S seconds (the table then has
# fewer rounds, and says how many); DEVICES, ROUNDS, REPS, MIN_TIME, LIMIT
# (seconds per run). The issue's figures in under 5 minutes each:
#
#   SIZES="8 1048576" NP16=0 ROUNDS=3 REPS=2 MIN_TIME=0.02 BUDGET=240 LIMIT=40 timeout 300 bash bench/compare-rma.sh
#   NP2=0 ROUNDS=3 REPS=2 MIN_TIME=0.02 BUDGET=240 LIMIT=60 timeout 300 bash bench/compare-rma.sh
set -uo pipefail

cd "$(dirname "$0")/.." || exit 1
OUT=${OUT:-bench-out/rma}
ROUNDS=${ROUNDS:-3}
REPS=${REPS:-3}
MIN_TIME=${MIN_TIME:-0.05}
LIMIT=${LIMIT:-180}
DEVICES=${DEVICES:-"netvm fm via bip"}
SIZES=${SIZES:-}
NP2=${NP2:-1}
NP16=${NP16:-1}
CREATE=${CREATE:-1}
BUDGET=${BUDGET:-0}
. bench/lib.sh
detect_mpis
build_tools
build_c mpibench.c mpibench

ompi=(mpiexec.openmpi --allow-run-as-root --oversubscribe)
load_before=$(uptime)
# np2 IMPL LAUNCH...: the np=2 runs of one implementation and round: per
# size of SIZES (or once over every size), on an allocated window and with
# --win-create. LAUNCH is the command line up to the program's arguments;
# ARGS (an array) are the implementation's common flags.
np2() {
	local impl=$1
	shift
	local sz ranges=("--max-size 1048576") w
	if [ -n "$SIZES" ]; then
		ranges=()
		for sz in $SIZES; do ranges+=("--min-size $sz --max-size $sz"); done
	fi
	for w in "" --win-create; do
		if [ -n "$w" ] && ((!CREATE)); then
			continue
		fi
		for sz in "${ranges[@]}"; do
			# shellcheck disable=SC2086 # $sz is two flags
			run_bench "$impl${w:+-create}-${sz##* }-$round" "$LIMIT" '^rma_' "$@" $sz $w "${ARGS[@]}"
		done
	done
}

done_rounds=0 round_start=$SECONDS
for round in $(seq "$ROUNDS"); do
	if ((BUDGET && round > 1 && 2 * SECONDS - round_start > BUDGET)); then
		note "budget of ${BUDGET}s: no time for round $round"
		break
	fi
	round_start=$SECONDS
	note "round $round of $ROUNDS"
	for dev in $DEVICES; do
		ARGS=()
		g=("$OUT/mpibench" --csv --reps "$REPS" --min-time "${MIN_TIME}s")
		((NP2)) && np2 "$dev" "$MPIRUN" -np 2 -device "$dev" "${g[@]}" rma
		((NP16)) && run_bench "$dev-16-$round" "$LIMIT" '^rma_\(fop_rate\|halo\)' "$MPIRUN" -np 16 -device "$dev" "${g[@]}" --max-size 8 rma
	done
	ARGS=(--reps "$REPS" --min-time "$MIN_TIME" --no-header)
	if ((have_mpich)); then
		((NP2)) && np2 mpich mpiexec.mpich -n 2 "$OUT/mpibench-mpich" rma
		((NP16)) && run_bench "mpich-16-$round" "$LIMIT" '^rma_\(fop_rate\|halo\)' mpiexec.mpich -n 16 "$OUT/mpibench-mpich" rma --max-size 8 "${ARGS[@]}"
	fi
	if ((have_ompi)); then
		((NP2)) && np2 openmpi "${ompi[@]}" -n 2 "$OUT/mpibench-openmpi" rma
		((NP16)) && run_bench "openmpi-16-$round" "$LIMIT" '^rma_\(fop_rate\|halo\)' "${ompi[@]}" -n 16 "$OUT/mpibench-openmpi" rma --max-size 8 "${ARGS[@]}"
	fi
	done_rounds=$round
done
load_after=$(uptime)

# The median over the rounds of each row.
{
	echo "load before: $load_before"
	echo "load after:  $load_after"
	echo "median of $done_rounds interleaved rounds (of $ROUNDS asked)"
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
	}' "$RESULTS" | sort -k1,1 -k2,2n -k3,3n >"$OUT/table.txt"
	cat "$OUT/table.txt"
	echo
	# The issue's figures as ratios: latency device/MPI (below 1: faster),
	# bandwidth and rate device/MPI (above 1: faster).
	echo "ratios (device / Open MPI, device / MPICH; latency: < 1 is faster, MB/s and Mops/s: > 1 is faster)"
	awk -v order="$DEVICES" '
	$1 ~ /^rma_(create_)?(put|get)_lat$/ && $3 == 8 || $1 ~ /^rma_(create_)?(put|get)_bw$/ && $3 == 1048576 || $1 ~ /^rma_(create_)?fop_rate$/ && $2 == 16 {
		n = split(order, devs, " ")
		mp = $(5 + n); om = $(6 + n)
		for (i = 1; i <= n; i++) {
			v = $(4 + i)
			r1 = (v != "-" && om != "-" && om + 0 > 0) ? sprintf("%.3g", v / om) : "-"
			r2 = (v != "-" && mp != "-" && mp + 0 > 0) ? sprintf("%.3g", v / mp) : "-"
			printf "%-20s np=%-2s %8s %-6s %5s: %10s  /openmpi %7s  /mpich %7s\n", $1, $2, $3, $4, devs[i], v, r1, r2
		}
	}' "$OUT/table.txt"
} >"$OUT/summary.txt"
cat "$OUT/summary.txt"
if ((${#failures[@]})); then
	note "failed: ${failures[*]}"
	exit 1
fi
