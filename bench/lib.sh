# shellcheck shell=bash
# bench/lib.sh: what the comparison scripts (compare.sh, compare-coll.sh,
# compare-overlap.sh) share. Source it after setting OUT; it leaves
# $OUT/logs, $RESULTS (a fresh CSV with its header), and these:
#
#   note TEXT...                   a progress line
#   detect_mpis                    sets have_mpich / have_ompi, saying what to install
#   build_tools                    builds $OUT/mpibench and, unless MPIRUN is set, $OUT/mpirun (sets MPIRUN)
#   build_c SRC NAME               compiles bench/c/SRC with each MPI into $OUT/NAME-mpich, $OUT/NAME-openmpi
#   run_bench LABEL SECS PATTERN CMD...
#                                  runs CMD under a time limit, keeps its output in $OUT/logs/LABEL.*,
#                                  appends its CSV rows matching PATTERN to $RESULTS; a failure is
#                                  recorded in the array failures

mkdir -p "$OUT/logs"
RESULTS=$OUT/results.csv
echo "bench,device,np,size,value,unit" >"$RESULTS"
failures=()
SECONDS=0
me=$(basename "$0")

note() { printf '== %s\n' "$*"; }

if ! command -v go >/dev/null; then
	echo "$me: go is not on PATH" >&2
	exit 1
fi

detect_mpis() {
	have_mpich=1 have_ompi=1
	local missing=()
	if ! command -v mpicc.mpich >/dev/null || ! command -v mpiexec.mpich >/dev/null; then
		have_mpich=0
		missing+=(mpich libmpich-dev)
	fi
	if ! command -v mpicc.openmpi >/dev/null || ! command -v mpiexec.openmpi >/dev/null; then
		have_ompi=0
		missing+=(openmpi-bin libopenmpi-dev)
	fi
	if ((${#missing[@]})); then
		note "missing, skipped: apt-get install -y ${missing[*]}"
	fi
}

build_tools() {
	note "building mpirun and mpibench into $OUT/"
	if [ -z "${MPIRUN:-}" ]; then
		MPIRUN=$OUT/mpirun
		go build -o "$MPIRUN" ./cmd/mpirun || { echo "$me: cmd/mpirun does not build" >&2; exit 1; }
	fi
	go build -o "$OUT/mpibench" ./cmd/mpibench || { echo "$me: cmd/mpibench does not build" >&2; exit 1; }
}

build_c() {
	local src=$1 name=$2
	if ((have_mpich)); then
		mpicc.mpich -O2 -o "$OUT/$name-mpich" "bench/c/$src" || { have_mpich=0; note "$src does not build with MPICH; skipped"; }
	fi
	if ((have_ompi)); then
		mpicc.openmpi -O2 -o "$OUT/$name-openmpi" "bench/c/$src" || { have_ompi=0; note "$src does not build with Open MPI; skipped"; }
	fi
}

run_bench() {
	local label=$1 limit=$2 pattern=$3
	shift 3
	local t0=$SECONDS rc=0
	timeout -k 10 "$limit" "$@" >"$OUT/logs/$label.csv" 2>"$OUT/logs/$label.err" || rc=$?
	if ((rc == 0)); then
		grep -v '^bench,' "$OUT/logs/$label.csv" | grep -e "$pattern" >>"$RESULTS"
		printf '   %-28s %3ds\n' "$label" $((SECONDS - t0))
		return 0
	fi
	failures+=("$label (exit $rc)")
	printf '   %-28s FAILED (exit %d%s) after %ds: %s\n' "$label" "$rc" \
		"$([ "$rc" = 124 ] && echo ', time limit')" $((SECONDS - t0)) "$*"
	tail -n 5 "$OUT/logs/$label.err" | sed 's/^/      /'
	return 1
}
