#!/bin/sh
# mpirun with the flags a test run in a container needs: more ranks than
# cores (--oversubscribe), root (--allow-run-as-root, only when root), and
# shared-memory transport only (no network interfaces needed).
# Usage: mpirun.sh [mpirun args...]
flags="--oversubscribe --mca btl self,vader --mca btl_vader_single_copy_mechanism none"
if [ "$(id -u)" = 0 ]; then
  flags="$flags --allow-run-as-root"
fi
exec mpirun $flags "$@"
