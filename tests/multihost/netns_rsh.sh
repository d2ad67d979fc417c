#!/bin/sh
# OpenMPI's remote-shell agent for the two-host test (--mca plm_rsh_agent):
# runs a command "on a host" that is a network namespace of this machine.
#
#   netns_rsh.sh HOST COMMAND...          as ssh does: COMMAND joined and run
#                                         by sh (what mpirun passes)
#   netns_rsh.sh --argv HOST PROG ARG...  PROG with its arguments as given
#
# HOST is gslnode1 or gslnode2; the command runs in the namespace
# ${GSL_MH_NS}1 or ${GSL_MH_NS}2 (tests/multihost/cluster.sh creates them),
# with a UTS namespace of its own whose host name is HOST (so gethostname()
# and OpenMPI's node names tell the hosts apart), and a mount namespace of
# its own. When GSL_MH_PRIVATE names a directory, gslnode2 sees an empty
# tmpfs there instead of the real one: the hosts share every other file
# (the gsl binary, the sources) but not that directory, as two machines
# with a shared home and local scratch disks would.
set -eu
argv=""
if [ "${1:-}" = "--argv" ]; then
  argv=1
  shift
fi
if [ $# -lt 2 ]; then
  echo "usage: netns_rsh.sh [--argv] HOST COMMAND..." >&2
  exit 255
fi
host=$1
shift
case $host in
  gslnode1) ns=${GSL_MH_NS:?GSL_MH_NS is not set}1 ;;
  gslnode2) ns=${GSL_MH_NS:?GSL_MH_NS is not set}2 ;;
  *) echo "netns_rsh.sh: unknown host '$host' (gslnode1 or gslnode2)" >&2; exit 255 ;;
esac
private=""
[ "$host" = gslnode2 ] && private=${GSL_MH_PRIVATE:-}
# In the new UTS and mount namespaces: the host name, the private
# directory, then the network namespace.
setup='hostname "$1"; if [ -n "$2" ]; then mount -t tmpfs -o size=64m gsl-private "$2"; fi; ns=$3; shift 3'
if [ -n "$argv" ]; then
  exec unshare --uts --mount --propagation private \
    sh -c "$setup"'; exec ip netns exec "$ns" "$@"' netns_rsh "$host" "$private" "$ns" "$@"
fi
exec unshare --uts --mount --propagation private \
  sh -c "$setup"'; exec ip netns exec "$ns" sh -c "$*"' netns_rsh "$host" "$private" "$ns" "$@"
