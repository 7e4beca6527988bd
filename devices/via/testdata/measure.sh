#!/bin/sh
# measure.sh — the via device's measurements, in one run on one machine:
# mpibench pingpong and bw under -device via and -device netvm, then 8 B
# latency and 1 MiB bandwidth (viabench) under each of the seed's design
# options, with TLB hit rates and the other NIC counters.
# Run from the module root: sh devices/via/testdata/measure.sh
set -e
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
go build -o "$dir/mpirun" ./cmd/mpirun
go build -o "$dir/mpibench" ./cmd/mpibench
go build -o "$dir/viabench" ./devices/via/testdata/viabench
run() { timeout 300 "$dir/mpirun" -timeout 280s "$@" || echo "measure.sh: FAILED: $*"; }
uptime
for bench in pingpong bw; do
	for dev in netvm via; do
		run -np 2 -device "$dev" "$dir/mpibench" "$bench" --max-size 1048576 --min-time 20ms
	done
done
vb() { # label np options...
	label=$1 np=$2
	shift 2
	opts="-device-opt timers=on"
	for o in "$@"; do opts="$opts -device-opt $o"; done
	# shellcheck disable=SC2086
	run -np "$np" -device via $opts "$dir/viabench" -label "$label"
}
for np in 2 8; do
	run -np "$np" -device netvm "$dir/viabench" -label netvm
	vb "via default (d1,at3/1024,desccache=on,cq1)" "$np"
	vb "doorbell=d2" "$np" doorbell=d2
	vb "cq=cq2" "$np" cq=cq2
	vb "desccache=off" "$np" desccache=off
	vb "at=at1" "$np" at=at1
	vb "at=at2" "$np" at=at2
	for t in 16 64 256 4096; do
		vb "at=at3 tlbsize=$t" "$np" at=at3 tlbsize=$t
	done
	vb "at=at3 tlbsize=1024 regcache=0" "$np" regcache=0
done
# The NIC's own costs per operation, in one process (see bench_test.go).
go test -run '^$' -bench Design -benchtime 2000x ./devices/via
uptime
