#!/usr/bin/env bash
# Build the simulated cluster's components from source: scripts/kube_build.py holds the recipe
# (the cache layout, the toolchain, the flags, where each source comes from).
#
#   scripts/build-kube.sh [COMPONENT...]      (default: every component)
exec python3 "$(dirname "$0")/kube_build.py" "$@"
