#!/usr/bin/env bash
# The end-to-end benchmark: MariaDB directly vs through the release rttscope binary, in one
# run, side by side. Flags go to rttscope-bench (`scripts/bench.sh --help`; `--quick` for a
# smoke run). Prints the table and writes target/bench/latest.md and latest.json.
# Starts a private MariaDB unless RTTSCOPE_TEST_MYSQL_URL names one.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

if ! command -v cargo >/dev/null 2>&1; then
  echo "bench.sh: cargo not found; install Rust (https://rustup.rs), MSRV in Cargo.toml" >&2
  exit 1
fi
if [ -z "${RTTSCOPE_TEST_MYSQL_URL:-}" ]; then
  scripts/install-deps.sh >&2
fi

echo "==> building the release rttscope binary" >&2
cargo build --release --quiet -p rttscope --bin rttscope
echo "==> running the benchmark" >&2
# Recorded in the report, so the README's table says how it was made.
export RTTSCOPE_BENCH_COMMAND="scripts/bench.sh${*:+ $*}"
exec cargo run --release --quiet -p rttscope-benches --bin rttscope-bench -- "$@"
