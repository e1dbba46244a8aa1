#!/usr/bin/env bash
# Runs every test of every crate: installs missing system packages, then `cargo test`.
# Extra arguments go to cargo test. Package or target selectors (`-p rttscope`,
# `--test harness_smoke`) replace the default `--workspace --all-targets`; others
# (`-- --nocapture`) are added to it.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

echo "==> rttscope tests: system packages"
scripts/install-deps.sh

if ! command -v cargo >/dev/null 2>&1; then
  echo "test.sh: cargo not found; install Rust (https://rustup.rs), MSRV in Cargo.toml" >&2
  exit 1
fi
select=(--workspace --all-targets)
for arg in "$@"; do
  case "$arg" in
    --) break ;;
    -p | --package | --package=* | --workspace | --lib | --bin | --bin=* | --bins | --test | --test=* \
      | --tests | --bench | --bench=* | --benches | --example | --example=* | --examples \
      | --all-targets | --doc) select=() ;;
  esac
done
locked=()
if [ -f Cargo.lock ]; then
  locked=(--locked)
fi
echo "==> rttscope tests: cargo test ${select[*]} ${locked[*]} $*"
echo "    ($(cargo --version); a private MariaDB per test binary unless RTTSCOPE_TEST_MYSQL_URL is set)"
exec cargo test "${select[@]}" "${locked[@]}" "$@"
