#!/usr/bin/env bash
# The demo application of docker-compose.yml: the shop workload of scripts/demo-workload.sh
# (mounted at /demo-workload.sh; scripts/demo.sh runs the same one without docker), through
# rttscope every 5 seconds, on one connection per round as a pooled application would.
#
# Where things are (compose's services by default; a test points them elsewhere):
# DEMO_DB and DEMO_PROXY (host:port), DEMO_USER and DEMO_PASSWORD, DEMO_ROUNDS (default:
# forever), DEMO_WORKLOAD (the workload file).
set -euo pipefail
db=${DEMO_DB:-mariadb:3306}
proxy=${DEMO_PROXY:-rttscope:6033}
user=${DEMO_USER:-root}
password=${DEMO_PASSWORD-demo} # set but empty: no password
rounds=${DEMO_ROUNDS:-0}

# shellcheck source=scripts/demo-workload.sh
. "${DEMO_WORKLOAD:-/demo-workload.sh}"

login=(--user="$user" --password="$password" --skip-ssl)
direct=(mariadb --protocol=TCP --host="${db%:*}" --port="${db##*:}" "${login[@]}")
proxied=(mariadb --protocol=TCP --host="${proxy%:*}" --port="${proxy##*:}" "${login[@]}")

# Wait for the database, then for rttscope's port (a bare TCP connect: no statement lands in
# the report).
until "${direct[@]}" --batch -e "SELECT 1" >/dev/null 2>&1; do sleep 1; done
until (exec 3<>"/dev/tcp/${proxy%:*}/${proxy##*:}") 2>/dev/null; do sleep 1; done

demo_setup "${direct[@]}"
round=0
while [ "$rounds" -eq 0 ] || [ "$round" -lt "$rounds" ]; do
	demo_app "${proxied[@]}"
	round=$((round + 1))
	[ "$rounds" -ne 0 ] && [ "$round" -ge "$rounds" ] || sleep 5
done
