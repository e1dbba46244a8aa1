#!/usr/bin/env bash
# The end-to-end benchmark: MariaDB directly vs through the release rttscope binary (and
# HAProxy, the peer), in one run, side by side; and rttscope's instructions per round trip
# under callgrind. Flags go to rttscope-bench (`scripts/bench.sh --help`; `--quick` for a
# smoke run). Prints the table and writes target/bench/latest.md and latest.json.
# `scripts/bench.sh --matrix [FLAGS]` runs the link matrix instead (link-matrix --help);
# `scripts/bench.sh --confusion [FLAGS]` the link-verdict confusion matrix (link-confusion --help);
# `scripts/bench.sh --whatif [--quick]` the what-if accuracy suite (whatif-accuracy --help).
# `scripts/bench.sh --cpu [--quick]` CPU per query against HAProxy at paced rates (cpu-per-query --help).
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

# The link matrix (buffers × network conditions over the WAN emulator, each cell's verdict):
# a command of its own; needs root and TUN, not HAProxy or valgrind. Built like the link tests
# (the dev profile), whose figures docs/benchmarks.md quotes beside it.
if [ "${1:-}" = "--matrix" ]; then
  shift
  echo "==> running the link matrix" >&2
  export RTTSCOPE_BENCH_COMMAND="scripts/bench.sh --matrix${*:+ $*}"
  exec cargo run --quiet -p rttscope-benches --bin link-matrix -- "$@"
fi

# `scripts/bench.sh --confusion [FLAGS]` runs the link-verdict confusion matrix: six injected
# causes × RTT × result size over the WAN emulator, each verdict against its cause
# (link-confusion --help). Root and TUN, like the matrix; the dev profile, like the link tests.
if [ "${1:-}" = "--confusion" ]; then
  shift
  echo "==> running the link-verdict confusion matrix" >&2
  export RTTSCOPE_BENCH_COMMAND="scripts/bench.sh --confusion${*:+ $*}"
  exec cargo run --quiet -p rttscope-benches --bin link-confusion -- "$@"
fi

# `scripts/bench.sh --whatif [--quick]` runs the what-if accuracy suite instead: rttscope's
# projections against runs measured over emulated links (whatif-accuracy --help). Built for
# release: the measured runs stand for a far link, and in a dev build the emulated link's own
# CPU (a 40 MB read's 1,300 chunks through the delay line) slowed them by 10-40 ms.
if [ "${1:-}" = "--whatif" ]; then
  shift
  echo "==> running the what-if accuracy suite" >&2
  exec cargo run --release --quiet -p rttscope-benches --bin whatif-accuracy -- "$@"
fi

# The bench's own tools, kept out of install-deps.sh so the tests' dependencies stay lean:
# HAProxy (the peer in a to d) and valgrind (f, instructions per round trip). Installed when
# missing and apt-get can; otherwise rttscope-bench says what is missing when it needs it
# (leave them out with --no-haproxy, or --only without f).
bench_missing=()
for check in "haproxy haproxy" "valgrind valgrind" "vgdb valgrind" "callgrind_annotate valgrind"; do
  read -r what pkg <<<"$check"
  if ! command -v "$what" >/dev/null 2>&1 && [ ! -x "/usr/sbin/$what" ] \
    && [[ " ${bench_missing[*]} " != *" $pkg "* ]]; then
    bench_missing+=("$pkg")
  fi
done
if [ ${#bench_missing[@]} -gt 0 ]; then
  sudo=()
  [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1 && sudo=(sudo)
  if command -v apt-get >/dev/null 2>&1 && { [ "$(id -u)" -eq 0 ] || [ ${#sudo[@]} -gt 0 ]; }; then
    echo "bench.sh: installing ${bench_missing[*]}" >&2
    # No service may start: HAProxy's package would start one on port 80 otherwise.
    # (Removed again right after, not in an EXIT trap: the script ends in `exec`.)
    policy=/usr/sbin/policy-rc.d
    made_policy=false
    if [ ! -e "$policy" ]; then
      "${sudo[@]}" sh -c "printf '#!/bin/sh\nexit 101\n' > $policy && chmod +x $policy"
      made_policy=true
    fi
    installed=true
    "${sudo[@]}" apt-get update -q >&2 \
      && "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
        "${bench_missing[@]}" >&2 || installed=false
    if $made_policy; then "${sudo[@]}" rm -f "$policy"; fi
    $installed || echo "bench.sh: could not install ${bench_missing[*]}" >&2
  else
    echo "bench.sh: ${bench_missing[*]} missing and cannot be installed here; the runs that need them" \
      "will fail (leave HAProxy out with --no-haproxy, f out with --only a,b,c,d)" >&2
  fi
fi

echo "==> building the release rttscope binary" >&2
cargo build --release --quiet -p rttscope --bin rttscope
# `scripts/bench.sh --cpu [--quick]`: rttscope's CPU per query against HAProxy's, one
# connection paced at 100, 1,000 and 10,000 queries/s, eight saturating, and both behind an
# upstream 2 ms away (cpu-per-query --help). Release builds: it measures a cost.
if [ "${1:-}" = "--cpu" ]; then
  shift
  echo "==> running CPU per query" >&2
  exec cargo run --release --quiet -p rttscope-benches --bin cpu-per-query -- "$@"
fi
echo "==> running the benchmark" >&2
# Recorded in the report, so docs/benchmarks.md's table says how it was made.
export RTTSCOPE_BENCH_COMMAND="scripts/bench.sh${*:+ $*}"
exec cargo run --release --quiet -p rttscope-benches --bin rttscope-bench -- "$@"
