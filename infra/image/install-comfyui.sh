#!/bin/bash
# Installs ComfyUI into a worker image for the comfyui runner: the
# repository at a pinned ref in /opt/comfyui, its Python environment in
# /opt/comfyui/venv, and the systemd unit comfyui.service serving it on
# 127.0.0.1:8188 (the fleet's agent.comfyui_url by default), enabled.
# Running it again leaves the same result: an existing checkout is moved to
# the ref, the environment is kept and its requirements installed again.
#
# Settings (environment):
#   COMFYUI_REPO    the repository (default https://github.com/comfyanonymous/ComfyUI.git)
#   COMFYUI_REF     the commit or tag to check out (required)
#   TORCH_INDEX_URL the wheel index of PyTorch for the image's CUDA (default cu128)
#   COMFYUI_PORT    the port of the unit (default 8188)
#   FLEETQ_IMAGE_ROOT (default empty: /) prefixes every path it writes
set -euo pipefail
root=${FLEETQ_IMAGE_ROOT:-}
repo=${COMFYUI_REPO:-https://github.com/comfyanonymous/ComfyUI.git}
ref=${COMFYUI_REF:?COMFYUI_REF must name the ComfyUI commit or tag to install}
torch_index=${TORCH_INDEX_URL:-https://download.pytorch.org/whl/cu128}
port=${COMFYUI_PORT:-8188}
dir=$root/opt/comfyui
python=${PYTHON:-python3}

if [ ! -d "$dir/.git" ]; then
  git clone --quiet "$repo" "$dir"
fi
git -C "$dir" fetch --quiet --tags origin
git -C "$dir" checkout --quiet --force "$ref"
commit=$(git -C "$dir" rev-parse HEAD)
echo "$commit" > "$dir/.fleetq-commit"

if [ ! -x "$dir/venv/bin/python" ]; then
  "$python" -m venv "$dir/venv"
fi
"$dir/venv/bin/pip" install --quiet --upgrade pip
"$dir/venv/bin/pip" install --quiet torch torchvision torchaudio --index-url "$torch_index"
"$dir/venv/bin/pip" install --quiet -r "$dir/requirements.txt"
mkdir -p "$dir/models" "$dir/custom_nodes" "$dir/input" "$dir/output"

mkdir -p "$root/etc/systemd/system"
cat > "$root/etc/systemd/system/comfyui.service" <<UNIT
[Unit]
Description=ComfyUI for the fleetq comfyui runner
After=network-online.target
Wants=network-online.target
Before=fleetq-worker.service

[Service]
WorkingDirectory=/opt/comfyui
ExecStart=/opt/comfyui/venv/bin/python main.py --listen 127.0.0.1 --port $port
Restart=always
RestartSec=5

[Install]
WantedBy=multi-user.target
UNIT
systemctl daemon-reload
systemctl enable comfyui.service
echo "install-comfyui: ComfyUI $ref ($commit) in /opt/comfyui, comfyui.service on 127.0.0.1:$port"
