#!/usr/bin/env bash
# Builds Shopify's Toxiproxy server from source, offline, with Debian's toolchain:
#   output: target/toxiproxy/toxiproxy-server  (`toxiproxy-server -version` -> "toxiproxy-server version 2.8.0")
#
# Tag: v2.8.0 -- the newest release whose go.mod says `go 1.19` (v2.9.0 and later need Go >= 1.22).
# Toolchain and libraries: Debian bookworm only, no Go module proxy. GOPATH mode (GO111MODULE=off)
# with GOPATH = <build dir>:/usr/share/gocode, the source copied to src/github.com/Shopify/toxiproxy/v2.
# Packages (apt-get pulls in their dependencies, e.g. rs/xid, prometheus client_model/common/procfs,
# beorn7/perks, cespare/xxhash, golang/protobuf, google.golang.org/protobuf):
#   golang-go (1.19), golang-github-gorilla-mux-dev (1.8.0), golang-github-prometheus-client-golang-dev
#   (1.14.0), golang-github-rs-zerolog-dev (1.26.1), golang-gopkg-tomb.v1-dev (git20141024.dd63297)
# Only the server is built (cmd/server); the CLI (cmd/cli, urfave/cli v2.25 + x/term) is not needed.
# Patches (applied to the build copy, never to TOXIPROXY_SRC):
#   1. cmd/server/server.go: zerolog.CallerMarshalFunc takes (file string, line int) in zerolog < 1.28
#      (Debian has 1.26.1); toxiproxy v2.8.0 assigns a func(pc uintptr, file string, line int). The
#      unused `pc uintptr, ` parameter is dropped. Applied only if Debian's zerolog has the old signature.
# The version string is set as upstream's release does: -X github.com/Shopify/toxiproxy/v2.Version=2.8.0.
#
# Usage: scripts/build-toxiproxy.sh (clones tag v2.8.0 from GitHub), or, offline,
#        TOXIPROXY_SRC=/path/to/toxiproxy-v2.8.0-source scripts/build-toxiproxy.sh
# Idempotent: exits at once if the binary exists and reports the expected version.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
repo_root=$(pwd)

version=2.8.0
out_dir="$repo_root/target/toxiproxy"
bin="$out_dir/toxiproxy-server"
expected="toxiproxy-server version $version"

if [ -x "$bin" ] && [ "$("$bin" -version 2>/dev/null || true)" = "$expected" ]; then
  echo "build-toxiproxy: $bin is already $version; nothing to do"
  exit 0
fi

src="${TOXIPROXY_SRC:-}"
if [ -z "$src" ]; then
  # Where GitHub is reachable, fetch the tag; this machine's sandbox may not reach it.
  src="$out_dir/src-v$version"
  if [ ! -f "$src/go.mod" ]; then
    rm -rf "$src"
    echo "build-toxiproxy: cloning Toxiproxy v$version into $src"
    timeout 120 git clone -q --depth 1 --branch "v$version" https://github.com/Shopify/toxiproxy "$src" || rm -rf "$src"
  fi
fi
if [ ! -f "$src/go.mod" ] || [ ! -f "$src/cmd/server/server.go" ]; then
  cat >&2 <<EOF
build-toxiproxy: the Toxiproxy v$version source is needed and could not be cloned from GitHub.
  Set TOXIPROXY_SRC to a directory holding the source tree of tag v$version, for example:
    git clone --depth 1 --branch v$version https://github.com/Shopify/toxiproxy /tmp/toxiproxy-src
    TOXIPROXY_SRC=/tmp/toxiproxy-src $0
  or, from a bare mirror:  mkdir /tmp/toxiproxy-src && git --git-dir=MIRROR archive v$version | tar -x -C /tmp/toxiproxy-src
  (looked in '$src'; it must contain go.mod and cmd/server/server.go)
EOF
  exit 2
fi
if ! grep -q '^module github.com/Shopify/toxiproxy/v2$' "$src/go.mod"; then
  echo "build-toxiproxy: $src/go.mod is not github.com/Shopify/toxiproxy/v2" >&2
  exit 2
fi
src_version=$(sed -n 's/^# \[\([0-9][0-9.]*\)\].*/\1/p' "$src/CHANGELOG.md" 2>/dev/null | head -n1 || true)
if [ "$src_version" != "$version" ]; then
  echo "build-toxiproxy: $src is version '${src_version:-unknown}' (CHANGELOG.md), expected $version (tag v$version)" >&2
  exit 2
fi

packages=(golang-go golang-github-gorilla-mux-dev golang-github-prometheus-client-golang-dev
  golang-github-rs-zerolog-dev golang-gopkg-tomb.v1-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "build-toxiproxy: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -q
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
fi

go_bin=/usr/lib/go-1.19/bin/go
[ -x "$go_bin" ] || go_bin=$(command -v go)
echo "build-toxiproxy: using $("$go_bin" version)"

build="$out_dir/build"
pkg_dir="$build/gopath/src/github.com/Shopify/toxiproxy/v2"
rm -rf "$build/gopath"
mkdir -p "$pkg_dir"
tar -C "$src" --exclude=.git -cf - . | tar -C "$pkg_dir" -xf -

# Patch 1 (see header): zerolog < 1.28 has CallerMarshalFunc func(file string, line int) string.
zerolog_globals=/usr/share/gocode/src/github.com/rs/zerolog/globals.go
if ! grep -q 'CallerMarshalFunc = func(pc uintptr' "$zerolog_globals"; then
  echo "build-toxiproxy: patch 1: Debian's zerolog has the pre-1.28 CallerMarshalFunc; adapting cmd/server/server.go"
  sed -i 's/zerolog\.CallerMarshalFunc = func(pc uintptr, file string, line int) string {/zerolog.CallerMarshalFunc = func(file string, line int) string {/' \
    "$pkg_dir/cmd/server/server.go"
  if ! grep -q 'zerolog.CallerMarshalFunc = func(file string, line int) string {' "$pkg_dir/cmd/server/server.go"; then
    echo "build-toxiproxy: patch 1 did not apply: cmd/server/server.go has no CallerMarshalFunc to adapt" >&2
    exit 1
  fi
fi

mkdir -p "$build/gocache"
tmp_bin="$bin.tmp.$$"
(
  cd "$pkg_dir"
  env GO111MODULE=off GOPATH="$build/gopath:/usr/share/gocode" GOPROXY=off GOFLAGS= \
    GOCACHE="$build/gocache" CGO_ENABLED=0 \
    "$go_bin" build -trimpath \
    -ldflags "-s -w -X github.com/Shopify/toxiproxy/v2.Version=$version" \
    -o "$tmp_bin" ./cmd/server
)
got=$("$tmp_bin" -version)
if [ "$got" != "$expected" ]; then
  rm -f "$tmp_bin"
  echo "build-toxiproxy: built binary reports '$got', expected '$expected'" >&2
  exit 1
fi
mv -f "$tmp_bin" "$bin"
echo "build-toxiproxy: built $bin ($got)"
