#!/usr/bin/env bash
# What the test suite needs besides Python packages, on Debian (as root): a real nsys
# (Debian's 2023.4, unpacked into /opt/gpugap-nsys by install-nsys.sh) and headless
# Chromium (the HTML timeline is tested in a real browser). Idempotent. Prints nothing on
# success; a step that fails prints everything it said.
set -euo pipefail
here=$(dirname "$0")

# "$@" with its output held back: shown, with the command, only if it fails.
quietly() {
  local log rc=0
  log=$(mktemp)
  "$@" >"$log" 2>&1 || rc=$?
  if [ "$rc" -ne 0 ]; then
    echo "install-test-deps: '$*' failed (exit $rc):" >&2
    cat "$log" >&2
  fi
  rm -f "$log"
  return "$rc"
}

# fonts-dejavu-core: without recommends chromium has no fonts and PNG text renders blank.
if ! command -v chromium >/dev/null || [ ! -d /usr/share/fonts/truetype/dejavu ]; then
  export DEBIAN_FRONTEND=noninteractive
  install=(apt-get install -y -q --no-install-recommends chromium fonts-dejavu-core)
  # Stale package lists make the first try fail: then update and try again (that one's
  # output is shown if it fails too).
  "${install[@]}" >/dev/null 2>&1 || { quietly apt-get update -q && quietly "${install[@]}"; }
fi
quietly bash "$here/install-nsys.sh"
