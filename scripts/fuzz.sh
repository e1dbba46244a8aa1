#!/usr/bin/env bash
# Fuzzes rttscope's decoders with cargo-fuzz: scripts/fuzz.sh [--long] [target|all] [seconds]
# (default: every target, 60 s each, one after another). --long runs a fixed
# number of inputs instead of a time (FUZZ_RUNS, default 10,000,000 per target,
# the bar issue 14 sets) and prints each target's executions and wall time;
# run it under `nice -n 19`, it takes a while. Targets: framing,
# handshake, packets, binary, session, fingerprint, compress, and admin_inject
# (the admin API's PUT /inject body and Host check) (fuzz/fuzz_targets/).
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

all=(framing handshake packets binary session fingerprint compress admin_inject)
long=0
if [ "${1:-}" = --long ]; then
  long=1
  shift
fi
runs="${FUZZ_RUNS:-10000000}"
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

if [ "$long" = 1 ]; then
  # A count, not a time: -runs is what "10^7 inputs per target" means, and
  # the time limit would cut a slow target short of it.
  limit=(-runs="$runs")
  what="$runs runs"
else
  limit=(-max_total_time="$seconds")
  what="${seconds}s"
fi

failed=()
for t in "${targets[@]}"; do
  echo "==> fuzzing $t for $what" >&2
  # Executions are in the final stats, coverage ("cov:") in the DONE line.
  # cargo-fuzz builds in fuzz/target: its RUSTFLAGS differ from a normal
  # build's, and sharing a CARGO_TARGET_DIR would rebuild both every time.
  start=$(date +%s)
  # Input size: libFuzzer's own bound (4096 bytes with these small seeds) except for
  # compress, held to 2048 — still streams of many frames, cut into reads and output
  # buffers of up to 256 bytes each way — because its round trip deflates the whole
  # input, and zlib-rs's deflate, instrumented, took 70 % of a run at 3.4 KB inputs.
  max_len=()
  if [ "$t" = compress ]; then
    max_len=(-max_len=2048)
  fi
  if ! (cd fuzz && env -u CARGO_TARGET_DIR cargo fuzz run --sanitizer "${FUZZ_SANITIZER:-none}" "$t" "corpus/$t" -- \
    "${limit[@]}" "${max_len[@]}" -print_final_stats=1); then
    echo "fuzz.sh: $t crashed; input under fuzz/artifacts/$t/ (reproduce: cd fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz run -s none $t <file>)" >&2
    failed+=("$t")
  fi
  # The wall time includes the (first-time) build of the target.
  echo "fuzz.sh: $t done in $(($(date +%s) - start))s" >&2
done
if [ "${#failed[@]}" -gt 0 ]; then
  echo "fuzz.sh: crashes in: ${failed[*]}" >&2
  exit 1
fi
echo "fuzz.sh: no crashes in ${targets[*]} ($what each)" >&2
