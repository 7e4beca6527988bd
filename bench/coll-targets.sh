#!/usr/bin/env bash
# coll-targets.sh: issue 25's collective targets in one run, on this
# machine: adimpi's collectives (mpibench coll) on every device against Open
# MPI's (the same collectives in C, bench/c/coll.c), at np 2 on
# MPI_COMM_WORLD (Allreduce of 1 MiB) and at np 16 on MPI_COMM_WORLD and on a
# Dup of it (Barrier, Allreduce of 8 B, Bcast of 1 MiB, Allreduce of 1 MiB).
# ROUNDS rounds, each running every target in turn (interleaved); the table
# gives the median of the rounds, the ratio to Open MPI's median and the
# verdict against the target (np 2 Allreduce 1 MiB <= 0.8x; np 16 <= 0.5x
# on netvm, <= 0.7x on the other devices).
#
#   timeout 300 bash bench/coll-targets.sh          # output in bench-out/coll-targets/
#   ROUNDS=5 DEVICES="netvm fm" bash bench/coll-targets.sh
#   REPS=20 MIN_MS=2 bash bench/coll-targets.sh  # best of 20 short repetitions a run
#   BASE=/tmp/main-bin DEVICES="netvm bip" bash bench/coll-targets.sh
#       # BASE holds mpirun and mpibench built from another tree (e.g.
#       # main): base-DEVICE columns run them in the same rounds, an A/B
#
# On a busy machine the best of many short repetitions (REPS, MIN_MS: the
# least milliseconds one takes) comes closest to what an idle machine
# gives, for adimpi and Open MPI alike; the defaults (3 of 20 ms) are
# mpibench compare's.
#
# It stops starting rounds once another would end past BUDGET seconds
# (default 280, so that the whole run fits in five minutes; at least one
# round runs); the table says how many ran. Each run has a time limit
# (LIMIT seconds); a run that fails or times out
# leaves its points empty in that round, and the median is of the rounds
# that have it. MPICH is left out: it busy-polls, and at np 16 on a small
# machine one run takes minutes (bench/compare-coll.sh runs it).
set -uo pipefail

cd "$(dirname "$0")/.." || exit 1
OUT=${OUT:-bench-out/coll-targets}
ROUNDS=${ROUNDS:-3}
read -r -a DEVICES <<<"${DEVICES:-netvm fm via bip}"
LIMIT=${LIMIT:-40}
REPS=${REPS:-3}
MIN_MS=${MIN_MS:-20}
BUDGET=${BUDGET:-280}
BASE=${BASE:-}
mkdir -p "$OUT/logs"
RESULTS=$OUT/results.csv
echo "round,comm,bench,device,np,size,value,unit" >"$RESULTS"

go build -o "$OUT/mpirun" ./cmd/mpirun || exit 1
go build -o "$OUT/mpibench" ./cmd/mpibench || exit 1
ompi=()
if command -v mpicc.openmpi >/dev/null && mpicc.openmpi -O2 -o "$OUT/coll-openmpi" bench/c/coll.c; then
	ompi=(mpiexec.openmpi --allow-run-as-root --oversubscribe)
else
	echo "coll-targets: Open MPI is missing (apt-get install openmpi-bin libopenmpi-dev): no ratios" >&2
fi

# run ROUND COMM NP TARGET: one mpibench coll run, its rows appended.
run() {
	local round=$1 comm=$2 np=$3 target=$4 log
	log=$OUT/logs/r$round-$target-$comm-np$np
	local args=(--allreduce-large 1048576 --reps "$REPS" --comm "$comm")
	if [[ $target == openmpi ]]; then
		timeout -k 5 "$LIMIT" "${ompi[@]}" -n "$np" "$OUT/coll-openmpi" --device openmpi "${args[@]}" --min-time "$(awk "BEGIN {print $MIN_MS / 1000}")" \
			>"$log.csv" 2>"$log.err"
	else
		local bin=$OUT dev=$target
		if [[ $target == base-* ]]; then
			bin=$BASE dev=${target#base-}
		fi
		timeout -k 5 "$LIMIT" "$bin/mpirun" -np "$np" -device "$dev" -timeout "$((LIMIT - 5))s" \
			"$bin/mpibench" coll --csv "${args[@]}" --min-time "${MIN_MS}ms" >"$log.csv" 2>"$log.err"
	fi || echo "coll-targets: round $round $target $comm np $np failed (see $log.err)" >&2
	# Rows name the target (base-DEVICE for BASE's binaries).
	grep -E '^coll_' "$log.csv" | awk -F, -v OFS=, -v t="$target" -v p="$round,$comm" '{ $2 = t; print p, $0 }' >>"$RESULTS"
}

targets=("${DEVICES[@]}")
if [[ -n $BASE ]]; then
	targets=()
	for d in "${DEVICES[@]}"; do
		targets+=("$d" "base-$d") # each beside its base, in every round
	done
	DEVICES=("${targets[@]}")
fi
((${#ompi[@]})) && targets+=(openmpi)
done_rounds=0
for ((k = 1; k <= ROUNDS; k++)); do
	start=$SECONDS
	if ((k > 1 && SECONDS + last > BUDGET)); then
		echo "coll-targets: stopping after $done_rounds rounds (another would pass BUDGET=${BUDGET}s)" >&2
		break
	fi
	for cfg in "world 2" "world 16" "dup 16"; do
		read -r comm np <<<"$cfg"
		for t in "${targets[@]}"; do
			run "$k" "$comm" "$np" "$t"
		done
	done
	last=$((SECONDS - start))
	done_rounds=$k
done

# The table: medians over the rounds, ratios to Open MPI, verdicts.
{
	echo "adimpi $(git describe --always --dirty 2>/dev/null || echo '?'), $(nproc) CPUs, $(date -u +%Y-%m-%dT%H:%M:%SZ), ${done_rounds} of ${ROUNDS} rounds in ${SECONDS}s, load: $(cut -d' ' -f1-3 /proc/loadavg)"
	awk -F, -v devs="${DEVICES[*]}" '
	NR == 1 { next }
	{
		b = $3; sub(/_dup$/, "", b)
		key = b "," $5 "," $6 "," $2
		want = (b == "coll_allreduce" && $5 == 2 && $6 == 1048576) || ($5 == 16 && (b == "coll_barrier" || b == "coll_allreduce" || b == "coll_bcast") && !(b == "coll_bcast" && $6 != 1048576))
		if (!want) next
		if (!(key in seen)) { seen[key] = 1; keys[++nk] = key }
		v[key, $4, ++cnt[key, $4]] = $7
	}
	function median(key, d,    n, i, j, a, t) {
		n = cnt[key, d]
		if (n == 0) return ""
		for (i = 1; i <= n; i++) a[i] = v[key, d, i] + 0
		for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j-1] > a[j]; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t }
		return n % 2 ? a[(n+1)/2] : (a[n/2] + a[n/2+1]) / 2
	}
	END {
		nd = split(devs, d, " ")
		printf "| point | comm |"
		for (i = 1; i <= nd; i++) printf " %s |", d[i]
		printf " Open MPI |"
		for (i = 1; i <= nd; i++) printf " %s / OMPI |", d[i]
		print ""
		printf "|---|---|"
		for (i = 1; i <= 2 * nd + 1; i++) printf "---:|"
		print ""
		for (k = 1; k <= nk; k++) {
			split(keys[k], f, ",")
			name = f[1] == "coll_barrier" ? "Barrier" : f[1] == "coll_bcast" ? "Bcast" : "Allreduce"
			if (f[1] != "coll_barrier") name = name " " (f[3] >= 1048576 ? f[3] / 1048576 " MiB" : f[3] " B")
			printf "| %s, np %d | %s |", name, f[2], f[4]
			for (i = 1; i <= nd; i++) printf " %s |", median(keys[k], d[i])
			o = median(keys[k], "openmpi")
			printf " %s |", o
			for (i = 1; i <= nd; i++) {
				m = median(keys[k], d[i])
				goal = f[2] == 2 ? 0.8 : (d[i] ~ /(^|-)netvm$/ ? 0.5 : 0.7)
				if (m == "" || o == "" || o == 0) { printf " - |"; continue }
				printf " %.2fx %s |", m / o, m / o <= goal ? "met" : "MISSED"
			}
			print ""
		}
	}' "$RESULTS"
	echo
	echo "Values: µs per call, max over ranks of the average, best of $REPS repetitions of at least $MIN_MS ms; medians of the rounds. Targets: np 2 <= 0.8x, np 16 <= 0.5x (netvm) / 0.7x (fm, via, bip)."
} | tee "$OUT/summary.txt"
