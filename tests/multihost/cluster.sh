# Two "hosts" on this machine, for the two-host test and bench (sourced by
# POSIX sh scripts; root only): network namespaces ${GSL_MH_NS}1 and
# ${GSL_MH_NS}2 joined by a veth pair named gsl0 in each, with the
# addresses 10.77.0.1/24 and 10.77.0.2/24 and no other route. Host names
# gslnode1 and gslnode2 (tests/multihost/netns_rsh.sh runs commands there).
#
#   mh_up      creates them (GSL_MH_NS: a prefix unique to this process)
#   mh_down    removes them (safe to call twice, or after a failed mh_up)
#   mh_on HOST PROG ARG...   runs PROG on HOST
#   MH_MPIRUN_ARGS           what mpirun needs to launch into them: the
#                            agent, root, oversubscription, the interface

# The caller sets MH_DIR to this directory (tests/multihost) first.
: "${MH_DIR:?set MH_DIR to tests/multihost before sourcing cluster.sh}"
GSL_MH_NS=${GSL_MH_NS:-gslmh$$x}
export GSL_MH_NS

# Prints a reason and returns 1 when the namespaces cannot be made here.
mh_can_run() {
  if [ "$(id -u)" != 0 ]; then echo "needs root (ip netns, veth, unshare)"; return 1; fi
  for c in ip unshare mpirun; do
    command -v $c > /dev/null 2>&1 || { echo "needs '$c' (iproute2, util-linux, openmpi-bin)"; return 1; }
  done
  if ! ip netns add "${GSL_MH_NS}probe" 2> /dev/null; then
    echo "cannot create network namespaces here (ip netns add failed)"
    return 1
  fi
  ip netns del "${GSL_MH_NS}probe" 2> /dev/null
  return 0
}

mh_up() {
  ip netns add "${GSL_MH_NS}1" || return 1
  ip netns add "${GSL_MH_NS}2" || return 1
  # Unique names while both ends are in this namespace; gsl0 inside.
  ip link add "${GSL_MH_NS}v1" netns "${GSL_MH_NS}1" type veth peer name "${GSL_MH_NS}v2" netns "${GSL_MH_NS}2" ||
    return 1
  for i in 1 2; do
    ip -n "${GSL_MH_NS}$i" link set "${GSL_MH_NS}v$i" name gsl0 || return 1
    ip -n "${GSL_MH_NS}$i" addr add "10.77.0.$i/24" dev gsl0 || return 1
    ip -n "${GSL_MH_NS}$i" link set gsl0 up || return 1
    ip -n "${GSL_MH_NS}$i" link set lo up || return 1
  done
}

mh_down() {
  for i in 1 2; do
    # Any process still in the namespace (a rank that outlived the test).
    for p in $(ip netns pids "${GSL_MH_NS}$i" 2> /dev/null); do kill -9 "$p" 2> /dev/null; done
    ip netns del "${GSL_MH_NS}$i" 2> /dev/null
  done
  return 0
}

mh_on() {
  "$MH_DIR/netns_rsh.sh" --argv "$@"
}

MH_MPIRUN_ARGS="--mca plm_rsh_agent $MH_DIR/netns_rsh.sh --allow-run-as-root --oversubscribe --mca btl_tcp_if_include gsl0 --mca oob_tcp_if_include gsl0 --mca btl_vader_single_copy_mechanism none"
