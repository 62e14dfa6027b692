#!/usr/bin/env bash
# Install Debian's Nsight Systems CLI (non-free, 2023.4.x from trixie) into a
# private prefix on a CPU-only Debian machine, for gpugap's end-to-end tests.
# Usage (as root): .ci/install-nsys.sh [PREFIX]   (default /opt/gpugap-nsys)
# Last line of stdout: absolute path of a working nsys. Everything else: stderr.
# Set NSYS_DEB_VERSION (e.g. 2023.4.4.54~12.4.1-2) to pin the package version.
set -euo pipefail

PREFIX=$(realpath -m "${1:-/opt/gpugap-nsys}")
NSYS="$PREFIX/target-linux-x64/nsys"
log() { echo "install-nsys: $*" >&2; }

# Idempotent: an existing working install (incl. the fixes below) is reused.
if [ -e "$PREFIX/host-linux-x64/libssh.so" ] &&
   [ -e "$PREFIX/host-linux-x64/python/lib/nsysstats.py" ] &&
   [ -x "$NSYS" ] && "$NSYS" --version >&2; then
  echo "$NSYS"; exit 0
fi
[ "$(id -u)" = 0 ] || { log "must run as root"; exit 1; }
[ "$(dpkg --print-architecture)" = amd64 ] || { log "amd64 only"; exit 1; }

# The importer (host-linux-x64/QdstrmImporter) links against libssh.so.
LIBSSH=/usr/lib/x86_64-linux-gnu/libssh.so.4
if [ ! -e "$LIBSSH" ]; then
  log "installing libssh-4"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q --no-install-recommends libssh-4 >&2 ||
    { apt-get update -q >&2 && apt-get install -y -q --no-install-recommends libssh-4 >&2; }
fi

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# A private apt configuration that sees only the non-free components: the
# system's sources stay untouched (adding trixie to a bookworm system's own
# sources would let later apt-get installs pull trixie packages).
# `apt-get install nsight-systems` would drag in a Qt/GUI stack, so we only
# download the two .debs and unpack them with dpkg -x.
mkdir -p "$TMP/lists/partial" "$TMP/cache/archives/partial" "$TMP/debs"
KEY=/usr/share/keyrings/debian-archive-keyring.gpg
for suite in trixie bookworm; do
  echo "deb [signed-by=$KEY] http://deb.debian.org/debian $suite non-free"
done >"$TMP/sources.list"
APT=(-q -o Dir::Etc::SourceList="$TMP/sources.list" -o Dir::Etc::SourceParts=/dev/null
     -o Dir::State::Lists="$TMP/lists" -o Dir::Cache="$TMP/cache"
     -o Dir::State::status=/dev/null -o APT::Sandbox::User=root)
log "fetching non-free package lists"
apt-get "${APT[@]}" update >&2
VER=${NSYS_DEB_VERSION:-$(apt-cache "${APT[@]}" policy nsight-systems-target |
                         awk '/Candidate:/ {print $2}')}
[ -n "$VER" ] && [ "$VER" != "(none)" ] || { log "nsight-systems not found"; exit 1; }
log "downloading nsight-systems{,-target} $VER (~190 MB)"
(cd "$TMP/debs" && apt-get "${APT[@]}" download \
  "nsight-systems-target=$VER" "nsight-systems=$VER" >&2)
for deb in "$TMP"/debs/*.deb; do dpkg -x "$deb" "$TMP/root"; done

# nsys finds its importer at <dir of nsys>/../host-linux-x64/QdstrmImporter,
# so lay both folders side by side (the package does so through a symlink).
rm -rf "$PREFIX/target-linux-x64" "$PREFIX/host-linux-x64"
mkdir -p "$PREFIX"
mv "$TMP/root/usr/lib/x86_64-linux-gnu/nsight-systems/target-linux-x64" "$PREFIX/"
mv "$TMP/root/usr/lib/nsight-systems/host-linux-x64" "$PREFIX/"
# The package's libssh.so.4 link is relative to /usr/lib; point it at the system's.
ln -sfn "$LIBSSH" "$PREFIX/host-linux-x64/libssh.so.4"
ln -sfn libssh.so.4 "$PREFIX/host-linux-x64/libssh.so"
# `nsys analyze`/`nsys stats` run their rules in nsys's embedded Python, which
# imports from host-linux-x64/python/lib only (PYTHONPATH is ignored); Debian
# moved nsysstats/gpustats out of there, but target-linux-x64 keeps copies.
for m in nsysstats gpustats; do
  ln -sfn "../../../target-linux-x64/python/lib/$m.py" "$PREFIX/host-linux-x64/python/lib/$m.py"
done

# Fail here, not at the first import, if the importer misses a library.
if ldd "$PREFIX/host-linux-x64/QdstrmImporter" | grep 'not found' >&2; then
  log "QdstrmImporter has unresolved libraries"; exit 1
fi
"$NSYS" --version >&2
echo "$NSYS"
