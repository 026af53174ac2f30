#!/bin/bash
# Installs the fleetq agent into a worker image: the binary given, checked
# against its SHA-256, at /usr/local/bin/fleetq. The boot script of the
# stack still fetches and verifies the stack's own agent at every launch;
# the baked one is there for images that serve their own agent_url.
#
# usage: install-agent.sh BINARY SHA256
# FLEETQ_IMAGE_ROOT (default empty: /) prefixes every path it writes.
set -euo pipefail
root=${FLEETQ_IMAGE_ROOT:-}
bin=${1:?usage: install-agent.sh BINARY SHA256}
sum=${2:?usage: install-agent.sh BINARY SHA256}

echo "$sum  $bin" | sha256sum -c --quiet - || {
  echo "install-agent: $bin does not have the SHA-256 $sum" >&2
  exit 1
}
mkdir -p "$root/usr/local/bin"
install -m 0755 "$bin" "$root/usr/local/bin/fleetq"
"$root/usr/local/bin/fleetq" version
