#!/bin/bash
# via's 8-byte latency and 8-byte message rate (64 Isends per window) at
# np 2 on one host against netvm's, in interleaved rounds, and with
# MAIN=DIR also against via built from the tree in DIR (an A/B of a
# change). Each job's best repetition is its figure (mpibench reports the
# best); the table gives the median over ROUNDS rounds (default 5) and the
# CPU time (user + system, both ranks and mpirun) of each job, then the
# ratios. Run from the repository root:
#
#	bash devices/via/testdata/latency.sh
#	MAIN=/path/to/other/tree ROUNDS=7 bash devices/via/testdata/latency.sh
set -eu
rounds=${ROUNDS:-5}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
go build -o "$dir/mpirun" ./cmd/mpirun
go build -o "$dir/mpibench" ./cmd/mpibench
targets="via netvm"
if [ -n "${MAIN:-}" ]; then
	(cd "$MAIN" && go build -o "$dir/mpibench-main" ./cmd/mpibench)
	targets="via via-main netvm"
fi
uptime
for r in $(seq "$rounds"); do
	for t in $targets; do
		bin=$dir/mpibench dev=$t
		if [ "$t" = via-main ]; then bin=$dir/mpibench-main dev=via; fi
		for b in pingpong rate; do
			args="--iters 200 --reps 30"
			[ $b = rate ] && args="--iters 20 --reps 30"
			# shellcheck disable=SC2086
			if /usr/bin/time -f "%U %S" -o "$dir/cpu" timeout 60 "$dir/mpirun" -device "$dev" -np 2 \
				"$bin" $b --min-size 8 --max-size 8 $args --csv --header=false >"$dir/out" 2>&1; then
				v=$(awk -F, 'NR==1{print $5}' "$dir/out")
				echo "$t $b $v $(awk '{print $1+$2}' "$dir/cpu")" >>"$dir/all"
			else
				echo "round $r: $t $b failed: $(tail -1 "$dir/out")" >&2
			fi
		done
	done
done
uptime
awk '
function median(k,   n, i, j, t, a) {
	n = split(vals[k], a, " ")
	for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
	return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
{ vals[$1 " " $2] = vals[$1 " " $2] " " $3; cpus[$1 " " $2] = cpus[$1 " " $2] " " $4; seen[$1] = 1 }
END {
	printf "| target | 8 B latency (us) | 8 B rate (MB/s) | CPU s per latency job | CPU s per rate job |\n|---|---:|---:|---:|---:|\n"
	for (t in seen) {
		lat[t] = median(t " pingpong"); rate[t] = median(t " rate")
		save = vals[t " pingpong"]; vals[t " pingpong"] = cpus[t " pingpong"]; cl = median(t " pingpong"); vals[t " pingpong"] = save
		save = vals[t " rate"]; vals[t " rate"] = cpus[t " rate"]; cr = median(t " rate"); vals[t " rate"] = save
		printf "| %s | %.3f | %.2f | %.2f | %.2f |\n", t, lat[t], rate[t], cl, cr
	}
	printf "\nvia / netvm: latency %.2fx, rate %.2fx\n", lat["via"] / lat["netvm"], rate["via"] / rate["netvm"]
	if ("via-main" in seen) printf "via / via-main: latency %.2fx, rate %.2fx\n", lat["via"] / lat["via-main"], rate["via"] / rate["via-main"]
}' "$dir/all"
