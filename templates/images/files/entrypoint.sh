#!/bin/sh
# trainops image entrypoint: run the start hooks, then exec the command.
#
# Hooks are the executable files in $TRAINOPS_HOOKS_DIR (default /opt/trainops/entrypoint.d),
# run in name order before the command, with the container's environment: site-specific
# start steps (warm a cache, check the fabric). The checkpoint restore is not a hook: pods
# run it as an init container and sbatch scripts as an srun step (`trainops ckpt pull
# --latest`), so it also works for images without this entrypoint. A failing
# hook stops the container. TRAINOPS_SKIP_HOOKS=1 skips them all (debugging).
set -eu

hooks="${TRAINOPS_HOOKS_DIR:-/opt/trainops/entrypoint.d}"
if [ "${TRAINOPS_SKIP_HOOKS:-0}" != "1" ] && [ -d "$hooks" ]; then
    for hook in "$hooks"/*; do
        [ -f "$hook" ] && [ -x "$hook" ] || continue
        if ! "$hook"; then
            echo "trainops-entrypoint: start hook $hook failed; the command was not run" >&2
            exit 70
        fi
    done
fi

if [ "$#" -eq 0 ]; then
    echo "trainops-entrypoint: no command given; pass one (train.command in trainops.yaml)" >&2
    exit 64
fi
exec "$@"
