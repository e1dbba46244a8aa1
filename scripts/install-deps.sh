#!/usr/bin/env bash
# Installs what the tests need, only what is missing: system packages (Debian/Ubuntu, apt-get),
# then the Python venv of the client-compatibility tests (target/test-venv) and the Node packages
# of integration-tests/node (npm ci, from its lockfile). Idempotent and quick when everything is
# present; needs root or sudo only when a system package is missing.
# `scripts/install-deps.sh --conformance` also installs MariaDB's test suite (mariadb-test) for
# scripts/conformance.sh.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# One check a line: "COMMAND-OR-PATH PACKAGE". The package is installed when the command is not
# found (on PATH or in /usr/sbin, /usr/bin), the absolute path does not exist, or (py:MODULE) the
# system python3 cannot import the module. Add lines here.
CHECKS=(
  "mariadbd mariadb-server"
  "mariadb-install-db mariadb-server"
  "/usr/lib/mysql/plugin/auth_ed25519.so mariadb-server"
  "mariadb mariadb-client"
  "mariadb-admin mariadb-client"
  "mariadb-binlog mariadb-client"
  "ip iproute2"
  # The client tests' venv: MariaDB Connector/Python compiles against libmariadb (Connector/C).
  "/usr/include/mariadb/mysql.h libmariadb-dev"
  "mariadb_config libmariadb-dev"
  "/usr/bin/python3 python3"
  "/usr/bin/python3-config python3-dev"
  "gcc gcc"
  "py:ensurepip python3-venv"
  # mysqlclient (MySQLdb) finds libmariadb through pkg-config when pip builds it.
  "pkg-config pkg-config"
  # The driver tests (tests/drivers.rs): a JDK to run the JDBC probe as a single source file,
  # MariaDB Connector/J from Debian (Maven Central is out of reach), and a headless browser
  # with a font to render the HTML report.
  "java default-jdk-headless"
  "javac default-jdk-headless"
  "/usr/share/java/mariadb-java-client.jar libmariadb-java"
  "/usr/bin/chromium chromium"
  "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf fonts-dejavu-core"
  # The findings' false-positive test (tests/sysbench.rs): a pooled OLTP workload.
  "sysbench sysbench"
  # The fleet test (tests/fleet.rs) runs Prometheus's binary itself, scraping three instances.
  "prometheus prometheus"
  # The PHP fetch advice is run against mysqlnd (tests/php_fetch.rs).
  "php php-cli"
  "/usr/share/doc/php-mysql php-mysql"
  # Node's mysql2 (tests/prepared.rs): execute() over the binary protocol.
  "node nodejs"
  "npm npm"
)

# `--conformance` adds what scripts/conformance.sh needs: MariaDB's own test suite
# (mysql-test-run.pl, mysqltest, mysql_client_test).
if [ "${1:-}" = --conformance ]; then
  CHECKS+=(
    "/usr/share/mysql/mysql-test/mysql-test-run.pl mariadb-test"
    "mariadb-test mariadb-test"
    "mysql_client_test mariadb-test"
  )
elif [ $# -gt 0 ]; then
  echo "install-deps: unknown argument $1 (the only option is --conformance)" >&2
  exit 2
fi

# Pinned client libraries for target/test-venv (PyMySQL reports itself as "2.2.8" in
# pymysql.__version__, a mysqlclient-compatible number; its release is 1.2.4). prometheus-client
# is the official Prometheus client; its text parser checks what /metrics serves. mysqlclient
# (MySQLdb) is built against libmariadb; mysql-connector-python is Oracle's Connector/Python.
# tests/driver_advice.rs runs the advice each of them gets. mysql-mimic (a Python implementation
# of the server protocol) is the MySQL-8-style server of tests/mysql8_auth.rs; cryptography gives
# it, and PyMySQL, the RSA of caching_sha2_password's and sha256_password's full authentication.
VENV="$REPO/target/test-venv"
PY_PACKAGES=("mariadb==1.1.14" "PyMySQL==1.2.4" "mysqlclient==2.2.7" "mysql-connector-python==9.1.0"
  "prometheus-client==0.26.0" "mysql-mimic==3.0.5" "cryptography==50.0.2")

system_python() {
  if [ -x /usr/bin/python3 ]; then echo /usr/bin/python3; else command -v python3; fi
}

present() {
  case "$1" in
    /*) [ -e "$1" ] ;;
    py:*) "$(system_python)" -c "import ${1#py:}" >/dev/null 2>&1 ;;
    *) command -v "$1" >/dev/null 2>&1 || [ -x "/usr/sbin/$1" ] || [ -x "/usr/bin/$1" ] ;;
  esac
}

# The venv is ready when its python imports every pinned package at its pinned version.
venv_ready() {
  [ -x "$VENV/bin/python" ] && "$VENV/bin/python" - "${PY_PACKAGES[@]}" >/dev/null 2>&1 <<'PY'
import sys
from importlib.metadata import version
for spec in sys.argv[1:]:
    name, wanted = spec.split("==")
    assert version(name) == wanted, spec
import mariadb, pymysql, MySQLdb, mysql.connector, prometheus_client.parser, mysql_mimic, cryptography
PY
}

ensure_venv() {
  if venv_ready; then
    echo "install-deps: test venv ready ($VENV)"
    return
  fi
  echo "install-deps: creating the test venv $VENV with ${PY_PACKAGES[*]}"
  "$(system_python)" -m venv "$VENV"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "${PY_PACKAGES[@]}"
  venv_ready || { echo "install-deps: the test venv is still not usable" >&2; exit 1; }
  echo "install-deps: test venv ready ($VENV)"
}

# The Node packages are ready when node_modules holds exactly what the lockfile pins.
NODE_DIR="$REPO/integration-tests/node"
node_ready() {
  [ -f "$NODE_DIR/node_modules/.package-lock.json" ] &&
    (cd "$NODE_DIR" && npm ls --depth=0 >/dev/null 2>&1)
}

ensure_node_packages() {
  if node_ready; then
    echo "install-deps: Node packages ready ($NODE_DIR/node_modules)"
    return
  fi
  echo "install-deps: npm ci in $NODE_DIR"
  (cd "$NODE_DIR" && npm ci --no-audit --no-fund --loglevel=error)
  node_ready || { echo "install-deps: the Node packages are still not usable" >&2; exit 1; }
}

missing=()
for check in "${CHECKS[@]}"; do
  read -r what pkg <<<"$check"
  if ! present "$what" && [[ " ${missing[*]} " != *" $pkg "* ]]; then
    missing+=("$pkg")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all system packages present"
  ensure_venv
  ensure_node_packages
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
ensure_venv
ensure_node_packages
