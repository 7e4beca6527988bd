#!/usr/bin/env bash
# compare-coll.sh: one run, on this machine, of adimpi's collectives
# (mpibench coll) against MPICH and Open MPI (the same collectives in C,
# bench/c/coll.c) at np = 2, 4, 8 and 16, then a table of the three.
#
#   bash bench/compare-coll.sh                # output goes to bench-out/coll/
#   OUT=/tmp/c bash bench/compare-coll.sh     # another output directory
#   DEVICE=name bash bench/compare-coll.sh    # another adimpi device (default netvm)
#   NPS="2 4" bash bench/compare-coll.sh      # other process counts
#
# It installs nothing: a missing MPI is reported with the apt-get line that
# brings it, and its runs are skipped. The rows (bench,device,np,size,value,
# unit) of this run are appended to a fresh $OUT/results.csv, the logs kept in
# $OUT/logs, and the table (mpibench summarize-coll) in $OUT/summary.txt.
# np=16 oversubscribes a small machine many times over (MPICH busy-polls, so
# each of its calls can take a scheduler slice per rank): those runs use a
# shorter --min-time, and every run has a time limit.
set -uo pipefail

cd "$(dirname "$0")/.." || exit 1
OUT=${OUT:-bench-out/coll}
DEVICE=${DEVICE:-netvm}
read -r -a NPS <<<"${NPS:-2 4 8 16}"
LIMIT=${LIMIT:-120} # seconds per run
. bench/lib.sh
detect_mpis
build_tools
build_c coll.c coll

# run LABEL CMD...: one benchmark under $LIMIT seconds (bench/lib.sh).
run() {
	local label=$1
	shift
	run_bench "$label" "$LIMIT" '^coll_' "$@"
}

# mintime NP: the least time of one timed repetition, in seconds.
mintime() { if (($1 >= 16)); then echo 0.02; else echo 0.05; fi; }

# --- adimpi ------------------------------------------------------------------
note "adimpi $DEVICE (mpirun)"
for np in "${NPS[@]}"; do
	run "$DEVICE-np$np" "$MPIRUN" -np "$np" -device "$DEVICE" "$OUT/mpibench" coll --csv \
		--min-time "$(mintime "$np")s"
done

# --- MPICH -------------------------------------------------------------------
if ((have_mpich)); then
	note "MPICH $(mpichversion 2>/dev/null | awk -F: '/Version/ {gsub(/[ \t]/, "", $2); print $2; exit}') (mpiexec.mpich)"
	for np in "${NPS[@]}"; do
		run "mpich-np$np" mpiexec.mpich -n "$np" "$OUT/coll-mpich" --device mpich --min-time "$(mintime "$np")"
	done
fi

# --- Open MPI ----------------------------------------------------------------
if ((have_ompi)); then
	# As root Open MPI wants --allow-run-as-root, and more ranks than cores
	# --oversubscribe; if its default transports fail here, fall back to
	# shared memory with the ob1 PML.
	ompi=()
	for extra in "" "--mca btl self,vader --mca pml ob1" "--mca btl self,sm --mca pml ob1"; do
		# shellcheck disable=SC2206 # the MCA options are meant to split
		try=(mpiexec.openmpi --allow-run-as-root --oversubscribe $extra)
		if timeout -k 5 60 "${try[@]}" -n 2 "$OUT/coll-openmpi" --iters 2 --reps 1 \
			>"$OUT/logs/openmpi-probe.csv" 2>"$OUT/logs/openmpi-probe.err"; then
			ompi=("${try[@]}")
			break
		fi
	done
	if ((${#ompi[@]} == 0)); then
		note "Open MPI does not run here (see $OUT/logs/openmpi-probe.err); skipped"
		failures+=("openmpi (no working transport)")
	else
		note "Open MPI $(mpiexec.openmpi --version 2>/dev/null | awk 'NR==1 {print $NF}') (${ompi[*]})"
		for np in "${NPS[@]}"; do
			run "openmpi-np$np" "${ompi[@]}" -n "$np" "$OUT/coll-openmpi" --device openmpi --min-time "$(mintime "$np")"
		done
	fi
fi

# --- summary -----------------------------------------------------------------
{
	echo "adimpi $(git describe --always --dirty 2>/dev/null || echo '?'), $(go version | awk '{print $3}'), $(nproc) CPUs, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
	echo "rows: $(($(wc -l <"$RESULTS") - 1)) in $RESULTS; runtime ${SECONDS}s"
	if ((${#failures[@]})); then
		echo "failed runs: ${failures[*]}"
	fi
	echo
	"$OUT/mpibench" summarize-coll "$RESULTS"
} | tee "$OUT/summary.txt"
((${#failures[@]} == 0))
