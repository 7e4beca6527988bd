#!/usr/bin/env bash
# compare-fm.sh: one run, on this machine, of the fm device against netvm and
# against raw FM (fmbench, the FM API without MPI):
#
#   bash bench/compare-fm.sh            # from anywhere; output in fm-bench-out/
#
# It prints: MPI 0-byte latency over fm / raw FM 0-byte latency (best of the
# rounds, and round by round with the median); fm / netvm
# for pingpong latency and bw at every size; and the VIRTUS strided /
# contiguous bandwidth ratio for both devices; then (BCAST=0 skips it) fm's
# Bcast with its multidestination streams against the core's algorithms at
# np 4, 8, 16. The whole set runs ROUNDS
# times (default 3), interleaved, and each figure is the best of the rounds
# (least latency, most bandwidth): on a shared machine the other rounds
# are mostly someone else's load. All CSV rows are in $OUT/results.csv.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
OUT=${OUT:-fm-bench-out}
mkdir -p "$OUT"
go build -o "$OUT/mpirun" ./cmd/mpirun || exit 1
go build -o "$OUT/mpibench" ./cmd/mpibench || exit 1
go build -o "$OUT/fmbench" ./cmd/fmbench || exit 1
CSV="$OUT/results.csv"
echo "bench,device,np,size,value,unit" >"$CSV"
# Every row also gets its round's number (a 7th column), so that figures
# measured back to back can be paired.
run() { timeout 300 "$@" | grep -v '^bench,' | sed "s/\$/,$round/" >>"$CSV" || echo "compare-fm.sh: $* failed" >&2; }
for ((round = 0; round < ${ROUNDS:-3}; round++)); do
	run "$OUT/mpirun" -np 2 "$OUT/fmbench" --csv
	run "$OUT/mpirun" -np 2 -device fm "$OUT/fmbench" --mpi --csv
	for dev in fm netvm; do
		run "$OUT/mpirun" -np 2 -device "$dev" "$OUT/mpibench" pingpong --csv --max-size 1048576
		run "$OUT/mpirun" -np 2 -device "$dev" "$OUT/mpibench" bw --csv --max-size 4194304
		run "$OUT/mpirun" -np 2 -device "$dev" "$OUT/mpibench" virtus --csv
	done
done
# Bcast on fm with the device's multidestination streams (where the core
# takes them: from 8 processes, up to 256 KiB) against the core's own
# algorithms (ADIMPI_NATIVE_COLL=off, rows renamed fm-core), once, at np 4,
# 8 and 16 (BCAST=0 skips it).
if [ "${BCAST:-1}" != 0 ]; then
	round=0
	for np in 4 8 16; do
		run "$OUT/mpirun" -np "$np" -device fm "$OUT/mpibench" bcast --csv --max-size 2097152
		ADIMPI_NATIVE_COLL=off timeout 300 "$OUT/mpirun" -np "$np" -device fm "$OUT/mpibench" bcast --csv --max-size 2097152 |
			grep -v '^bench,' | sed 's/^bcast,fm,/bcast,fm-core,/; s/$/,0/' >>"$CSV" || echo "compare-fm.sh: core-only bcast at np $np failed" >&2
	done
fi
awk -F, '
	NR > 1 {
		key = $1 "," $2 "," $4
		if ($6 == "us") { if (!(key in v) || $5 < v[key]) v[key] = $5 } else if (!(key in v) || $5 > v[key]) v[key] = $5
		if (!(($1 "," $4) in seen)) { seen[$1 "," $4] = 1; order[n++] = $1 "," $4 }
		if ($1 == "pingpong" && $4 == 0) lat[$2 "," $7] = $5
		if ($1 == "bcast") bc[$2 "," $3 "," $4] = $5 }
	END {
		raw = v["pingpong,fm-raw,0"]; mpi = v["pingpong,fm,0"]
		if (raw > 0) printf "0-byte latency: MPI over fm %.3f us, raw FM %.3f us, ratio %.2f (netvm %.3f us)\n", mpi, raw, mpi / raw, v["pingpong,netvm,0"]
		# The same ratio round by round (raw FM and MPI measured back to
		# back, so in the same state of the machine), and its median.
		nr = 0
		for (r = 0; ("fm-raw," r) in lat; r++)
			if (("fm," r) in lat) { q[nr++] = lat["fm," r] / lat["fm-raw," r]; printf "%s%.2f", (nr == 1 ? "  per round: " : " "), q[nr - 1] }
		if (nr > 0) {
			for (i = 0; i < nr; i++) for (j = i + 1; j < nr; j++) if (q[j] < q[i]) { t = q[i]; q[i] = q[j]; q[j] = t }
			printf "; median %.2f\n", (nr % 2 ? q[int(nr / 2)] : (q[nr / 2 - 1] + q[nr / 2]) / 2)
		}
		printf "\n"
		printf "packet boundaries (1536-byte packets, 1512 payload, 32-byte MPI header):\n"
		for (i = 0; i < n; i++) {
			split(order[i], k, ",")
			if (k[1] == "pingpong-mpi") printf "  MPI over fm %5d B: %.3f us\n", k[2], v["pingpong-mpi,fm," k[2]]
		}
		for (i = 0; i < n; i++) {
			split(order[i], k, ",")
			if (k[1] == "pingpong" && v["pingpong,fm-raw," k[2]] != "") printf "  raw FM %5d B: %.3f us\n", k[2], v["pingpong,fm-raw," k[2]]
		}
		printf "\n%-16s %9s %12s %12s %8s\n", "bench", "size", "fm", "netvm", "fm/netvm"
		for (i = 0; i < n; i++) {
			split(order[i], k, ",")
			if (k[1] ~ /^virtus/) continue
			a = v[k[1] ",fm," k[2]]; b = v[k[1] ",netvm," k[2]]
			if (a != "" && b != "") printf "%-16s %9d %12.4f %12.4f %8.2f\n", k[1], k[2], a, b, a / b
		}
		printf "\n%-10s %14s %14s\n", "block", "fm strided/c", "netvm strided/c"
		for (i = 0; i < n; i++) {
			split(order[i], k, ",")
			if (k[1] != "virtus_strided") continue
			fs = v["virtus_strided,fm," k[2]]; fc = v["virtus_contig,fm," k[2]]
			ns = v["virtus_strided,netvm," k[2]]; nc = v["virtus_contig,netvm," k[2]]
			if (fc > 0 && nc > 0) printf "%-10d %14.2f %14.2f\n", k[2], fs / fc, ns / nc
		}
		hdr = 0
		for (np = 4; np <= 16; np *= 2)
			for (sz = 8; sz <= 2097152; sz *= 8) {
				a = bc["fm," np "," sz]; b = bc["fm-core," np "," sz]
				if (a == "" || b == "") continue
				if (!hdr++) printf "\nBcast on fm, us per call (native: multidestination streams from np 8 up to 256 KiB):\n%-4s %9s %12s %12s %8s\n", "np", "size", "native", "core only", "ratio"
				printf "%-4d %9d %12.2f %12.2f %8.2f\n", np, sz, a, b, a / b
			}
	}' "$CSV" | tee "$OUT/summary.txt"
