#!/bin/bash
# via's 8-byte latency and 8-byte message rate (64 Isends per window) at
# np 2 on one host against netvm's, in interleaved rounds, and with
# MAIN=DIR also against via built from the tree in DIR (an A/B of a
# change). Each job's best repetition is its figure (mpibench reports the
# best); the table gives the median over ROUNDS rounds (default 5) and the
# CPU time (user + system, both ranks and mpirun) of each job, then the
# ratios. A second table gives the 5th, 25th and 50th percentiles of
# 10^5 single round trips (testdata/rttpct; under MAIN built from this
# tree's source with go build -overlay), medians over the rounds: on a
# loaded machine the best repetition's mean still takes in preemptions,
# the low percentiles show the path. Run from the repository root:
#
#	bash devices/via/testdata/latency.sh
#	MAIN=/path/to/other/tree ROUNDS=7 bash devices/via/testdata/latency.sh
set -eu
rounds=${ROUNDS:-5}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
go build -o "$dir/mpirun" ./cmd/mpirun
go build -o "$dir/mpibench" ./cmd/mpibench
go build -o "$dir/rttpct" ./devices/via/testdata/rttpct
targets="via netvm"
if [ -n "${MAIN:-}" ]; then
	(cd "$MAIN" && go build -o "$dir/mpibench-main" ./cmd/mpibench)
	printf '{"Replace":{"%s":"%s"}}' "$(cd "$MAIN" && pwd)/devices/via/testdata/rttpct/main.go" "$(pwd)/devices/via/testdata/rttpct/main.go" >"$dir/overlay.json"
	(cd "$MAIN" && go build -overlay "$dir/overlay.json" -o "$dir/rttpct-main" ./devices/via/testdata/rttpct)
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
		rbin=$dir/rttpct
		if [ "$t" = via-main ]; then rbin=$dir/rttpct-main; fi
		timeout 60 "$dir/mpirun" -device "$dev" -np 2 "$rbin" -label "$t" >>"$dir/pct" 2>&1 ||
			echo "round $r: $t rttpct failed: $(tail -1 "$dir/pct")" >&2
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
echo
awk '
function median(s,   n, i, j, t, a) {
	n = split(s, a, " ")
	for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
	return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
NF == 4 && $2 ~ /^[0-9.]+$/ { p5[$1] = p5[$1] " " $2; p25[$1] = p25[$1] " " $3; p50[$1] = p50[$1] " " $4; seen[$1] = 1 }
END {
	printf "| target | 8 B one-way p5 (us) | p25 | p50 |\n|---|---:|---:|---:|\n"
	for (t in seen) { m[t] = median(p25[t]); printf "| %s | %.3f | %.3f | %.3f |\n", t, median(p5[t]), m[t], median(p50[t]) }
	if ("netvm" in seen) printf "\nvia / netvm (p25): %.2fx\n", m["via"] / m["netvm"]
	if ("via-main" in seen) printf "via / via-main (p25): %.2fx\n", m["via"] / m["via-main"]
}' "$dir/pct"
