#!/bin/sh
# netcluster-agent.sh: the remote shell through which Open MPI's mpirun
# (--mca plm_rsh_agent) and MPICH's Hydra (-launcher ssh -launcher-exec)
# start their daemons on the simulated hosts of cmd/netcluster, as ssh would
# on a cluster. "mpibench compare --hosts" uses it.
#
#   NETCLUSTER=/path/to/netcluster NETCLUSTER_DIR=D netcluster-agent.sh [-x ...] HOST COMMAND...
#
# Options before HOST (ssh's -x and the like) are ignored; HOST is a host
# name (h2) or its address (198.18.0.2); COMMAND is run by sh -c on that
# host, as ssh runs a remote command.
set -eu
while [ $# -gt 0 ]; do
	case $1 in
	-*) shift ;;
	*) break ;;
	esac
done
if [ $# -lt 2 ]; then
	echo "usage: netcluster-agent.sh [ssh options] HOST COMMAND..." >&2
	exit 2
fi
host=$1
shift
case $host in
198.18.0.*) host=h${host##*.} ;;
esac
exec "${NETCLUSTER:?NETCLUSTER is not set}" exec -dir "${NETCLUSTER_DIR:?NETCLUSTER_DIR is not set}" "$host" -- sh -c "$*"
