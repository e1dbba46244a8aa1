#!/usr/bin/env bash
# Fuzzes rttscope's decoders with cargo-fuzz: scripts/fuzz.sh [target|all] [seconds]
# (default: every target, 60 s each, one after another). Targets: framing,
# handshake, packets, binary, session, fingerprint (fuzz/fuzz_targets/).
#
# cargo-fuzz needs nightly-only flags (sanitizers, coverage passes); the
# stable toolchain accepts them with RUSTC_BOOTSTRAP=1, so no nightly is
# needed. Seeds are written into fuzz/corpus/<target>/ first (the corpus
# grows across runs and is not committed). A crash stops that target with
# the input in fuzz/artifacts/<target>/: fix it, then keep the input as a
# regression case in proxy/tests/fuzz_cases/<target>/ (replayed by
# `cargo test -p rttscope --test fuzz_regressions`).
#
# Built with overflow checks and debug assertions (cargo-fuzz's default) but
# without AddressSanitizer unless FUZZ_SANITIZER=address: the decoders are
# safe Rust (the one unsafe module, sys.rs, is not fuzzed), so ASAN would
# catch nothing a panic does not, at a fifth of the executions per second.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

all=(framing handshake packets binary session fingerprint)
target="${1:-all}"
seconds="${2:-60}"
if [ "$target" = all ]; then
  targets=("${all[@]}")
elif [[ " ${all[*]} " == *" $target "* ]]; then
  targets=("$target")
else
  echo "fuzz.sh: unknown target '$target'; one of: all ${all[*]}" >&2
  exit 2
fi

if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "==> installing cargo-fuzz" >&2
  cargo install --locked cargo-fuzz
fi
export RUSTC_BOOTSTRAP=1

echo "==> writing seeds into fuzz/corpus/" >&2
FUZZ_SEED_DIR="$PWD/fuzz/corpus" cargo test --quiet -p rttscope --test fuzz_regressions -- --ignored write_seeds >/dev/null

failed=()
for t in "${targets[@]}"; do
  echo "==> fuzzing $t for ${seconds}s" >&2
  # Executions are in the final stats, coverage ("cov:") in the DONE line.
  # cargo-fuzz builds in fuzz/target: its RUSTFLAGS differ from a normal
  # build's, and sharing a CARGO_TARGET_DIR would rebuild both every time.
  if ! (cd fuzz && env -u CARGO_TARGET_DIR cargo fuzz run --sanitizer "${FUZZ_SANITIZER:-none}" "$t" "corpus/$t" -- \
    -max_total_time="$seconds" -print_final_stats=1); then
    echo "fuzz.sh: $t crashed; input under fuzz/artifacts/$t/ (reproduce: cd fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz run -s none $t <file>)" >&2
    failed+=("$t")
  fi
done
if [ "${#failed[@]}" -gt 0 ]; then
  echo "fuzz.sh: crashes in: ${failed[*]}" >&2
  exit 1
fi
echo "fuzz.sh: no crashes in ${targets[*]} (${seconds}s each)" >&2
