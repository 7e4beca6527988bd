#!/usr/bin/env bash
# compare-overlap.sh: one run, on this machine, of the communication /
# computation overlap study ("Asynchronous Communications in MPI - the
# BIP/Myrinet Approach", Figs. 3–9) at np=2:
# adimpi's netvm device plain, with the Iprobe trick and with async progress
# (mpirun -async-progress), against MPICH and Open MPI plain and with the
# Iprobe trick (bench/c/overlap.c), then a table per message size.
#
#   bash bench/compare-overlap.sh               # output goes to bench-out/overlap/
#   OUT=/tmp/o bash bench/compare-overlap.sh    # another output directory
#   DEVICE=name bash bench/compare-overlap.sh   # another adimpi device (default netvm)
#   COMPUTE_US=1000 bash bench/compare-overlap.sh  # the computation C (default 500 µs)
#   REPS=5 MIN_TIME=0.05 bash bench/compare-overlap.sh  # more or longer timed rounds
#
# What is measured (mpibench overlap, see cmd/mpibench/overlap.go): per size,
# t_comm (Sendrecv alone), t_comp (a busy loop calibrated to C) and t_ovl
# (Irecv + Isend, the loop, Waitall); overlap = (t_comm + t_comp − t_ovl) /
# t_comm clamped to [0, 1]. Plus the 8 B one-way latency with and without
# async progress (latency_async_ratio, target ≤ 1.2×).
#
# It installs nothing: a missing MPI is reported with the apt-get line that
# brings it, and its runs are skipped. Rows go to a fresh $OUT/results.csv,
# logs to $OUT/logs, the table (mpibench summarize-overlap) to
# $OUT/summary.txt. On a 2-core machine the async progress goroutine shares
# the cores with the two ranks; the runs take well under a minute in all.
set -uo pipefail

cd "$(dirname "$0")/.." || exit 1
OUT=${OUT:-bench-out/overlap}
DEVICE=${DEVICE:-netvm}
COMPUTE_US=${COMPUTE_US:-500}
REPS=${REPS:-5}
MIN_TIME=${MIN_TIME:-0.05} # seconds, the least time of one timed round
LIMIT=${LIMIT:-90}         # seconds per run
. bench/lib.sh
detect_mpis
build_tools
build_c overlap.c overlap

# run LABEL CMD...: one benchmark under $LIMIT seconds (bench/lib.sh).
run() {
	local label=$1
	shift
	run_bench "$label" "$LIMIT" '^overlap_' "$@"
}

# --- adimpi ------------------------------------------------------------------
gobench=("$OUT/mpibench" --csv --reps "$REPS" --min-time "${MIN_TIME}s")
note "adimpi $DEVICE (mpirun), C = ${COMPUTE_US} µs"
run "$DEVICE" "$MPIRUN" -np 2 -device "$DEVICE" "${gobench[@]}" overlap plain iprobe "compute=${COMPUTE_US}us"
run "$DEVICE-async" "$MPIRUN" -np 2 -device "$DEVICE" -async-progress "${gobench[@]}" overlap plain "compute=${COMPUTE_US}us"

# --- MPICH -------------------------------------------------------------------
cbench=(plain iprobe --compute-us "$COMPUTE_US" --reps "$REPS" --min-time "$MIN_TIME")
if ((have_mpich)); then
	note "MPICH $(mpichversion 2>/dev/null | awk -F: '/Version/ {gsub(/[ \t]/, "", $2); print $2; exit}') (mpiexec.mpich)"
	run mpich mpiexec.mpich -n 2 "$OUT/overlap-mpich" "${cbench[@]}"
fi

# --- Open MPI ----------------------------------------------------------------
if ((have_ompi)); then
	# As root Open MPI wants --allow-run-as-root; if its default transports
	# fail here, fall back to shared memory with the ob1 PML.
	ompi=()
	for extra in "" "--mca btl self,vader --mca pml ob1" "--mca btl self,sm --mca pml ob1"; do
		# shellcheck disable=SC2206 # the MCA options are meant to split
		try=(mpiexec.openmpi --allow-run-as-root --oversubscribe $extra)
		if timeout -k 5 60 "${try[@]}" -n 2 "$OUT/overlap-openmpi" plain --iters 2 --reps 1 --no-check \
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
		run openmpi "${ompi[@]}" -n 2 "$OUT/overlap-openmpi" "${cbench[@]}"
	fi
fi

# --- summary -----------------------------------------------------------------
{
	echo "adimpi $(git describe --always --dirty 2>/dev/null || echo '?'), $(go version | awk '{print $3}'), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%Y-%m-%dT%H:%M:%SZ)"
	echo "rows: $(($(wc -l <"$RESULTS") - 1)) in $RESULTS; runtime ${SECONDS}s; C = ${COMPUTE_US} µs"
	if ((${#failures[@]})); then
		echo "failed runs: ${failures[*]}"
	fi
	echo
	"$OUT/mpibench" summarize-overlap "$RESULTS"
} | tee "$OUT/summary.txt"
# Keep the derived latency_async_ratio rows with the others.
sed -n '/^derived rows:/,$p' "$OUT/summary.txt" | grep '^latency_async_ratio,' >>"$RESULTS"
((${#failures[@]} == 0))
