#!/usr/bin/env bash
# compare.sh: one run, on this machine, of adimpi's netvm device against
# MPICH and Open MPI (the same benchmark patterns written in C, bench/c), and
# against the machine's floor (Go copy() and a cache-line ping-pong).
#
#   bash bench/compare.sh            # from anywhere; output goes to bench-out/
#   OUT=/tmp/b bash bench/compare.sh # another output directory
#   MPIRUN=path bash bench/compare.sh # an already built launcher instead of cmd/mpirun
#
# It installs nothing: a missing MPI is reported with the apt-get line that
# brings it, and its runs are skipped. Every CSV row lands in
# $OUT/results.csv (bench,device,np,size,value,unit), the logs in $OUT/logs,
# and the summary (mpibench summarize) in $OUT/summary.txt.
# adimpi runs keep their defaults (ADIMPI_SPIN_US unset: a waiting rank polls 1 ms
# before sleeping when ranks ≤ cores, yields for 100 µs when oversubscribed).
set -uo pipefail

cd "$(dirname "$0")/.." || exit 1
OUT=${OUT:-bench-out}
. bench/lib.sh
detect_mpis
build_tools
build_c mpibench.c mpibench

# run LABEL SECONDS CMD...: one benchmark under a time limit (bench/lib.sh).
run() {
	local label=$1 limit=$2
	shift 2
	run_bench "$label" "$limit" ',' "$@"
}

NPS=(2 4 8 16)

# --- the machine's floor -----------------------------------------------------
note "reference: Go copy() and a cache-line ping-pong (one process)"
run memcpy 120 "$OUT/mpibench" memcpy --csv

# --- adimpi netvm ------------------------------------------------------------
note "adimpi netvm (mpirun)"
run netvm-pingpong 180 "$MPIRUN" -np 2 -device netvm "$OUT/mpibench" pingpong --csv
run netvm-bw 180 "$MPIRUN" -np 2 -device netvm "$OUT/mpibench" bw --csv
run netvm-virtus 180 "$MPIRUN" -np 2 -device netvm "$OUT/mpibench" virtus --csv
run netvm-virtus-touch 180 "$MPIRUN" -np 2 -device netvm "$OUT/mpibench" virtus --touch --csv
run netvm-bw-touch 180 "$MPIRUN" -np 2 -device netvm "$OUT/mpibench" bw --touch --min-size 32768 --csv
for np in "${NPS[@]}"; do
	run "netvm-anysource-np$np" 120 "$MPIRUN" -np "$np" -device netvm "$OUT/mpibench" anysource --senders $((np - 1)) --csv
done

# --- MPICH -------------------------------------------------------------------
if ((have_mpich)); then
	note "MPICH $(mpichversion 2>/dev/null | awk -F: '/Version/ {gsub(/[ \t]/, "", $2); print $2; exit}') (mpiexec.mpich)"
	run mpich-pingpong 180 mpiexec.mpich -n 2 "$OUT/mpibench-mpich" pingpong
	run mpich-bw 180 mpiexec.mpich -n 2 "$OUT/mpibench-mpich" bw
	run mpich-virtus 180 mpiexec.mpich -n 2 "$OUT/mpibench-mpich" virtus
	run mpich-virtus-touch 180 mpiexec.mpich -n 2 "$OUT/mpibench-mpich" virtus --touch
	run mpich-bw-touch 180 mpiexec.mpich -n 2 "$OUT/mpibench-mpich" bw --touch --min-size 32768
	for np in "${NPS[@]}"; do
		run "mpich-anysource-np$np" 120 mpiexec.mpich -n "$np" "$OUT/mpibench-mpich" anysource --senders $((np - 1))
	done
fi

# --- Open MPI ----------------------------------------------------------------
if ((have_ompi)); then
	# As root Open MPI wants --allow-run-as-root; if its default transports
	# fail here, fall back to shared memory only with the ob1 PML.
	ompi=()
	for extra in "" "--mca btl self,vader --mca pml ob1" "--mca btl self,sm --mca pml ob1"; do
		# shellcheck disable=SC2206 # the MCA options are meant to split
		try=(mpiexec.openmpi --allow-run-as-root --oversubscribe $extra)
		if timeout -k 5 60 "${try[@]}" -n 2 "$OUT/mpibench-openmpi" pingpong --max-size 8 --iters 100 --reps 1 \
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
		run openmpi-pingpong 180 "${ompi[@]}" -n 2 "$OUT/mpibench-openmpi" pingpong
		run openmpi-bw 180 "${ompi[@]}" -n 2 "$OUT/mpibench-openmpi" bw
		run openmpi-virtus 180 "${ompi[@]}" -n 2 "$OUT/mpibench-openmpi" virtus
		run openmpi-virtus-touch 180 "${ompi[@]}" -n 2 "$OUT/mpibench-openmpi" virtus --touch
		run openmpi-bw-touch 180 "${ompi[@]}" -n 2 "$OUT/mpibench-openmpi" bw --touch --min-size 32768
		for np in "${NPS[@]}"; do
			run "openmpi-anysource-np$np" 120 "${ompi[@]}" -n "$np" "$OUT/mpibench-openmpi" anysource --senders $((np - 1))
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
	"$OUT/mpibench" summarize "$RESULTS"
} | tee "$OUT/summary.txt"
((${#failures[@]} == 0))
