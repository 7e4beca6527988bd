# netpipe-lib.sh: what netpipe-ab.sh and netpipe-peak.sh share, sourced from
# the repository root. It makes $dir (removed on exit), builds mpirun and
# adimpi's libmpich.so.12 from this tree into $dir/via, and with MAIN=DIR
# the library from the tree in DIR into $dir/via-main; $targets names the
# builds, $rounds the rounds (ROUNDS, default 5); $median is an awk
# function, median(s), of a space-separated list.
set -eu
rounds=${ROUNDS:-5}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
lib() { # tree out: adimpi's libmpich.so.12 from tree into out
	(cd "$1" && go build -buildmode=c-shared -ldflags=-extldflags=-Wl,-soname,libmpich.so.12 -o "$2/libmpich.so.12" ./cmd/libmpich)
}
go build -o "$dir/mpirun" ./cmd/mpirun
lib . "$dir/via"
targets="via"
if [ -n "${MAIN:-}" ]; then
	lib "$MAIN" "$dir/via-main"
	targets="via via-main"
fi
median='
function median(s,   n, i, j, t, a) {
	n = split(s, a, " ")
	for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
	return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}'
