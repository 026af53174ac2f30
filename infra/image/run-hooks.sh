#!/bin/bash
# Runs the image's hooks: each executable file in DIR (default
# /opt/fleetq/image.d), in name order, with the runner's paths in the
# environment (COMFYUI_DIR, COMFYUI_PIP). Hooks put the user's models and
# custom nodes into the image; each must leave the same result when run
# twice. A failing hook fails the build.
#
# usage: run-hooks.sh [DIR]
# FLEETQ_IMAGE_ROOT (default empty: /) prefixes every path.
set -euo pipefail
root=${FLEETQ_IMAGE_ROOT:-}
dir=${1:-$root/opt/fleetq/image.d}
export COMFYUI_DIR=$root/opt/comfyui
export COMFYUI_PIP=$COMFYUI_DIR/venv/bin/pip
[ -d "$dir" ] || { echo "run-hooks: no hooks in $dir"; exit 0; }
for hook in "$dir"/*; do
  if [ ! -f "$hook" ] || [ ! -x "$hook" ]; then continue; fi
  echo "run-hooks: $(basename "$hook")"
  "$hook" || { echo "run-hooks: $(basename "$hook") failed" >&2; exit 1; }
done
