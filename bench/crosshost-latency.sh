#!/usr/bin/env bash
# crosshost-latency.sh: the 8 B one-way latency between two simulated hosts
# (cmd/netcluster) of every device on both wires, and of Open MPI's TCP BTL,
# in interleaved rounds; per target the median over the rounds of
# pingpong's best repetition and of the per-message mean, median and 90th
# percentile (mpibench pingpong --dist), and the ratios to Open MPI's
# figure (both wires; the XDP wire's target is 0.5) and to the raw AF_XDP
# one-way time (XDP; target 1.5). Root only.
#
#   sudo bash bench/crosshost-latency.sh                # output in crosslat-out/
#   BEFORE=/path/to/old/mpibench sudo bash bench/crosshost-latency.sh
#
# BEFORE (an mpibench built from an earlier tree, with --dist) adds its rows
# as target "DEVICE before" in every round. ROUNDS (default 3), DEVICES
# (default "netvm fm bip via"), WIRES (default "tcp xdp"), MTU (the links'
# MTU; default the kernel's, 1500). The simulated
# cluster (three hosts: h3 launches Open MPI) is torn down on every path.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
OUT=${OUT:-crosslat-out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
go build -o "$OUT/" ./cmd/mpirun ./cmd/netcluster ./cmd/mpibench || exit 1
ompi=""
if mpicc.openmpi -O2 -o "$OUT/ompi-mpibench" bench/c/mpibench.c -lm 2>/dev/null; then
	ompi="$OUT/ompi-mpibench"
else
	echo "crosshost-latency.sh: no mpicc.openmpi: Open MPI left out" >&2
fi
NC="$OUT/nc"
"$OUT/netcluster" down -dir "$NC" >/dev/null 2>&1
trap '"$OUT/netcluster" down -dir "$NC" >/dev/null 2>&1' EXIT INT TERM
timeout 120 "$OUT/netcluster" up -n 3 -dir "$NC" ${MTU:+--mtu "$MTU"} >/dev/null || exit 1
h3pid=$("$OUT/netcluster" hosts -dir "$NC" | awk '$1 == "h3" { print $5 }')
CSV="$OUT/results.csv"
: >"$CSV"
uptime >"$OUT/load.txt"
args=(pingpong --min-size 8 --max-size 8 --csv --header=false --min-time 100ms)
adimpi() { # target-suffix mpibench device wire
	timeout 90 "$OUT/mpirun" -hosts h1,h2 -launcher-exec "$OUT/netcluster exec -dir $NC {host} --" \
		-np 2 -device "$3" -wire "$4" -timeout 80s "$2" "${args[@]}" --dist |
		awk -F, -v t="$3$1" -v w="$4" -v r="$round" '{ print $1 "," t "," w "," $5 "," r }' >>"$CSV" ||
		echo "crosshost-latency.sh: $3$1 on $4 failed" >&2
}
for ((round = 0; round < ${ROUNDS:-3}; round++)); do
	echo "round $((round + 1)): load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/load.txt" >&2
	for dev in ${DEVICES:-netvm fm bip via}; do
		for wire in ${WIRES:-tcp xdp}; do
			adimpi "" "$OUT/mpibench" "$dev" "$wire"
			[ -n "${BEFORE:-}" ] && adimpi " before" "$BEFORE" "$dev" "$wire"
		done
	done
	if [ -n "$ompi" ]; then
		NETCLUSTER="$OUT/netcluster" NETCLUSTER_DIR="$NC" timeout 90 nsenter --net="/proc/$h3pid/ns/net" \
			mpirun.openmpi --allow-run-as-root --oversubscribe --bind-to none --mca btl tcp,self \
			--mca plm_rsh_agent "$PWD/bench/netcluster-agent.sh" -H 198.18.0.1:1,198.18.0.2:1 -n 2 \
			"$ompi" pingpong --min-size 8 --max-size 8 --no-header --min-time 0.1 2>/dev/null |
			awk -F, -v r="$round" '$1 == "pingpong" { print "pingpong,openmpi,tcp," $5 "," r }' >>"$CSV"
	fi
	if [[ " ${WIRES:-tcp xdp} " == *" xdp "* ]]; then
		# The raw AF_XDP frame round trip (the XDP wire's floor).
		in=$(mktemp -u)
		mkfifo "$in"
		"$OUT/netcluster" exec -dir "$NC" h2 -- "$OUT/mpibench" xskping echo <"$in" >"$OUT/echo.out" 2>/dev/null &
		echo_pid=$!
		exec 4>"$in" # the echo ends when this closes
		m=""
		for ((i = 0; i < 100; i++)); do
			m=$(sed -n 's/^mac //p' "$OUT/echo.out")
			[ -n "$m" ] && break
			sleep 0.1
		done
		[ -n "$m" ] && timeout 60 "$OUT/netcluster" exec -dir "$NC" h1 -- "$OUT/mpibench" xskping ping "$m" 2000 128 |
			awk -F, -v r="$round" '$6 == "us_rtt_median" { print "pingpong,raw-af-xdp,xdp," $5 / 2 "," r }' >>"$CSV"
		exec 4>&-
		wait "$echo_pid" 2>/dev/null
		rm -f "$in"
	fi
done
uptime >>"$OUT/load.txt"
# The table: medians over the rounds per target and wire, then the ratios.
sort -t, -k2,2 -k3,3 -k1,1 -k4,4g "$CSV" | awk -F, '
function med(k,   n) { n = cnt[k]; return n % 2 ? v[k, (n + 1) / 2] : (v[k, n / 2] + v[k, n / 2 + 1]) / 2 }
{ k = $2 SUBSEP $3 SUBSEP $1; v[k, ++cnt[k]] = $4; if (!(($2, $3) in seen)) { seen[$2, $3] = 1; order[++nt] = $2 SUBSEP $3 } }
END {
	print "| target | wire | best rep (µs) | mean | p50 | p90 | best / Open MPI | best / raw AF_XDP |"
	print "|---|---|---|---|---|---|---|---|"
	om = cnt["openmpi", "tcp", "pingpong"] ? med("openmpi" SUBSEP "tcp" SUBSEP "pingpong") : 0
	rx = cnt["raw-af-xdp", "xdp", "pingpong"] ? med("raw-af-xdp" SUBSEP "xdp" SUBSEP "pingpong") : 0
	for (i = 1; i <= nt; i++) {
		split(order[i], tw, SUBSEP)
		line = "| " tw[1] " | " tw[2]
		for (j = 0; j < 4; j++) {
			m = j == 0 ? "pingpong" : j == 1 ? "pingpong_mean" : j == 2 ? "pingpong_p50" : "pingpong_p90"
			k = tw[1] SUBSEP tw[2] SUBSEP m
			line = line " | " (cnt[k] ? sprintf("%.1f", med(k)) : "—")
		}
		b = med(tw[1] SUBSEP tw[2] SUBSEP "pingpong")
		line = line " | " (om && tw[1] != "raw-af-xdp" ? sprintf("%.2f×", b / om) : "—")
		line = line " | " (rx && tw[2] == "xdp" ? sprintf("%.2f×", b / rx) : "—") " |"
		print line
	}
}' | tee "$OUT/table.md"
