#!/usr/bin/env bash
# compare-rate.sh: issue 25's small-message figures in one run: 0 B and 8 B
# one-way latency (pingpong) and the 8 B message rate with windows of 64
# Isends (rate --pattern pairs) at np 2, on adimpi's devices and on MPICH
# and Open MPI (bench/c/mpibench.c and bench/c/rate.c), in interleaved
# rounds; it prints the medians and their ratios to MPICH's and Open MPI's.
#
#   bash bench/compare-rate.sh                  # 5 rounds, netvm fm bip
#   ROUNDS=3 DEVICES="netvm fm" bash bench/compare-rate.sh
#   BASE=/tmp/main-bin bash bench/compare-rate.sh
#       # BASE holds mpirun and mpibench built from another tree (e.g.
#       # main); its runs join every round as base-DEVICE
#   BIND=1 bash bench/compare-rate.sh
#       # each device also runs with ADIMPI_BIND=core (every rank pinned to
#       # a CPU of its own, as Open MPI binds by default) as DEVICE-bound
#
# Every run takes fixed, short repetitions (pingpong --iters 200 --reps 30,
# rate --iters 20 --reps 30), so that on a busy machine the best repetition
# of a run is a stretch in which both ranks had a core. Rows land in
# $OUT/rounds.csv (bench,target,np,size,value,unit), the table in
# $OUT/summary.md. A round takes about 20 s per target.
set -uo pipefail

cd "$(dirname "$0")/.." || exit 1
OUT=${OUT:-bench-out/rate}
ROUNDS=${ROUNDS:-5}
DEVICES=${DEVICES:-netvm fm bip}
BASE=${BASE:-}
BIND=${BIND:-0}
. bench/lib.sh
detect_mpis
build_tools
build_c mpibench.c mpibench
build_c rate.c rate
: >"$OUT/rounds.csv"
OMPIRUN=(mpiexec.openmpi)
if [ "$(id -u)" = 0 ]; then
	OMPIRUN+=(--allow-run-as-root) # as root Open MPI refuses to start without it
fi

PP=(pingpong --min-size 0 --max-size 8 --iters 200 --reps 30)
RATE=(--min-size 8 --max-size 8 --iters 20 --reps 30)

# one LABEL CMD...: one run under a time limit; its rows, with the target
# column set to LABEL, go to rounds.csv.
one() {
	local label=$1
	shift
	timeout -k 5 90 "$@" 2>>"$OUT/logs/$label.err" | grep -v '^bench,' |
		awk -F, -v OFS=, -v l="$label" 'NF >= 6 { $2 = l; print }' >>"$OUT/rounds.csv" ||
		note "$label: failed: $*"
}

for ((round = 1; round <= ROUNDS; round++)); do
	note "round $round of $ROUNDS ($(uptime | sed 's/.*load/load/'))"
	for d in $DEVICES; do
		one "$d" "$MPIRUN" -np 2 -device "$d" "$OUT/mpibench" "${PP[@]}" --csv
		one "$d" "$MPIRUN" -np 2 -device "$d" "$OUT/mpibench" rate "${RATE[@]}" --csv
		if [ "$BIND" = 1 ]; then
			one "$d-bound" env ADIMPI_BIND=core "$MPIRUN" -np 2 -device "$d" "$OUT/mpibench" "${PP[@]}" --csv
			one "$d-bound" env ADIMPI_BIND=core "$MPIRUN" -np 2 -device "$d" "$OUT/mpibench" rate "${RATE[@]}" --csv
		fi
		if [ -n "$BASE" ]; then
			one "base-$d" "$BASE/mpirun" -np 2 -device "$d" "$BASE/mpibench" "${PP[@]}" --csv
			one "base-$d" "$BASE/mpirun" -np 2 -device "$d" "$BASE/mpibench" rate "${RATE[@]}" --csv
		fi
	done
	if ((have_mpich)); then
		one mpich mpiexec.mpich -n 2 "$OUT/mpibench-mpich" "${PP[@]}"
		one mpich mpiexec.mpich -n 2 "$OUT/rate-mpich" "${RATE[@]}"
	fi
	if ((have_ompi)); then
		one openmpi "${OMPIRUN[@]}" -n 2 "$OUT/mpibench-openmpi" "${PP[@]}"
		one openmpi "${OMPIRUN[@]}" -n 2 "$OUT/rate-openmpi" "${RATE[@]}"
	fi
done

# The medians of the rounds, one row per target, and the ratios.
awk -F, '
function median(key,   n, i, j, t, a) {
	n = split(vals[key], a, " ")
	for (i = 2; i <= n; i++)
		for (j = i; j > 1 && a[j-1] + 0 > a[j] + 0; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t }
	return n ? (n % 2 ? a[(n+1)/2] : (a[n/2] + a[n/2+1]) / 2) : ""
}
($1 == "pingpong" && ($4 == 0 || $4 == 8)) || ($1 == "rate_pairs" && $4 == 8) {
	key = $1 SUBSEP $2 SUBSEP $4
	vals[key] = vals[key] " " $5
	if (!($2 in seen)) { seen[$2] = 1; order[++nt] = $2 }
}
END {
	split("pingpong:8:8 B latency, us;pingpong:0:0 B latency, us;rate_pairs:8:8 B rate, MB/s", cols, ";")
	printf "| target |"
	for (c = 1; c <= 3; c++) { split(cols[c], f, ":"); printf " %s | x MPICH | x Open MPI |", f[3] }
	printf "\n|---|"
	for (c = 1; c <= 3; c++) printf "---|---|---|"
	printf "\n"
	for (i = 1; i <= nt; i++) {
		t = order[i]
		printf "| %s |", t
		for (c = 1; c <= 3; c++) {
			split(cols[c], f, ":")
			v = median(f[1] SUBSEP t SUBSEP f[2])
			m = median(f[1] SUBSEP "mpich" SUBSEP f[2])
			o = median(f[1] SUBSEP "openmpi" SUBSEP f[2])
			printf " %s | %s | %s |", v, (v != "" && m > 0 ? sprintf("%.2f", v / m) : ""), (v != "" && o > 0 ? sprintf("%.2f", v / o) : "")
		}
		printf "\n"
	}
}' "$OUT/rounds.csv" | tee "$OUT/summary.md"
echo "(medians of $ROUNDS interleaved rounds; latency: lower is better, rate: higher is better)"
