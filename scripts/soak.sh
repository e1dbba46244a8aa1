#!/usr/bin/env bash
# The soak: 1,000 connections of mixed traffic through rttscope for 10 minutes (point
# queries, prepared point selects, 2 MB results; the emulated link switched on and off
# through the admin API every 30 s), rttscope's RSS and open descriptors sampled every 10 s
# and fitted with a least-squares line after the warm-up; exits non-zero on any client error.
#
#   scripts/soak.sh                              # the defaults above
#   scripts/soak.sh --duration 1h --connections 500
#   scripts/soak.sh --help
#
# It uses a private MariaDB allowing enough connections (or the one RTTSCOPE_TEST_MYSQL_URL
# names, which must allow them). It takes both cores for its whole duration: run it under
# `nice -n 19` on a shared machine. Add --release to cargo below for release figures.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export RTTSCOPE_TEST_MYSQL_MAX_CONNECTIONS="${RTTSCOPE_TEST_MYSQL_MAX_CONNECTIONS:-1200}"
exec cargo run --quiet -p rttscope-benches --bin rttscope-soak -- "$@"
