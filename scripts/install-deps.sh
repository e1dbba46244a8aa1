#!/usr/bin/env bash
# Installs the system packages the tests need, only those that are missing. Idempotent; needs
# root or sudo only when something is missing. Debian/Ubuntu (apt-get).
set -euo pipefail

# One check a line: "COMMAND-OR-PATH PACKAGE". The package is installed when the command is not
# found (on PATH or in /usr/sbin, /usr/bin) or the absolute path does not exist. Add lines here.
CHECKS=(
  "mariadbd mariadb-server"
  "mariadb-install-db mariadb-server"
  "/usr/lib/mysql/plugin/auth_ed25519.so mariadb-server"
  "mariadb mariadb-client"
  "ip iproute2"
)

present() {
  case "$1" in
    /*) [ -e "$1" ] ;;
    *) command -v "$1" >/dev/null 2>&1 || [ -x "/usr/sbin/$1" ] || [ -x "/usr/bin/$1" ] ;;
  esac
}

missing=()
for check in "${CHECKS[@]}"; do
  read -r what pkg <<<"$check"
  if ! present "$what" && [[ " ${missing[*]} " != *" $pkg "* ]]; then
    missing+=("$pkg")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all test dependencies present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
if ! command -v apt-get >/dev/null 2>&1; then
  echo "install-deps: no apt-get here; install these yourself: ${missing[*]}" >&2
  exit 1
fi
sudo=()
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    sudo=(sudo)
  else
    echo "install-deps: need root (or sudo) to install ${missing[*]}" >&2
    exit 1
  fi
fi

# The tests start private servers of their own, so keep the packages' maintainer scripts from
# starting system services: a policy-rc.d that answers 101 ("action forbidden") is Debian's way.
# An existing one (Docker images ship one) is left as it is.
policy=/usr/sbin/policy-rc.d
if [ ! -e "$policy" ]; then
  "${sudo[@]}" sh -c "printf '#!/bin/sh\nexit 101\n' > $policy && chmod +x $policy"
  trap '"${sudo[@]}" rm -f "$policy"' EXIT
fi

export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -q
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
echo "install-deps: installed ${missing[*]}"
