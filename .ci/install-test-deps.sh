#!/usr/bin/env bash
# What the test suite needs besides Python packages, on Debian (as root): a real nsys
# (Debian's 2023.4, unpacked into /opt/gpugap-nsys by install-nsys.sh) and headless
# Chromium (the HTML timeline is tested in a real browser). Idempotent, quiet on success.
set -euo pipefail
here=$(dirname "$0")
# fonts-dejavu-core: without recommends chromium has no fonts and PNG text renders blank.
if ! command -v chromium >/dev/null || [ ! -d /usr/share/fonts/truetype/dejavu ]; then
  export DEBIAN_FRONTEND=noninteractive
  pkgs=(chromium fonts-dejavu-core)
  { apt-get install -y -q --no-install-recommends "${pkgs[@]}" ||
    { apt-get update -q && apt-get install -y -q --no-install-recommends "${pkgs[@]}"; }; } >/dev/null
fi
bash "$here/install-nsys.sh" >/dev/null
