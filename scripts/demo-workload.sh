#!/usr/bin/env bash
# rttscope's demo workload: a small shop application's requests, with the problems
# rttscope finds in them. Sourced by scripts/demo.sh and docker/demo.sh, so the local demo,
# the docker demo and the README's sample report run the same statements.
#
# The application keeps one connection open (as a pooled app does) and reads every result
# before it sends the next statement; the statements it builds come from those results.
# Callers define nothing but pass the client command: the `mariadb` CLI with its connection
# options (host, port, user, password), e.g.
#   demo_setup  mariadb --host=db --user=root ...      # once, straight to the database
#   demo_app    mariadb --host=rttscope --port=6033 ...  # the requests, through rttscope
#
# The problems it contains:
#   - the customer page: 80 customers, then one orders query per customer (N+1 loop);
#   - the audit log: one INSERT per customer shown (one row at a time writes);
#   - the export: orders paged through with LIMIT/OFFSET (pagination loop).

DEMO_SCHEMA=rttscope_demo

# Creates the demo schema and its data (idempotent: replaces what an earlier run left).
demo_setup() {
	# The sequence engine's seq_1_to_N tables need a current database: hence the USE
	# (without it MariaDB 10.11 says ERROR 1046 "No database selected").
	"$@" --batch <<-SQL
		CREATE DATABASE IF NOT EXISTS $DEMO_SCHEMA;
		USE $DEMO_SCHEMA;
		CREATE OR REPLACE TABLE customers (id INT PRIMARY KEY, name VARCHAR(40), region VARCHAR(10));
		CREATE OR REPLACE TABLE orders (id INT PRIMARY KEY, customer_id INT, total DECIMAL(10,2),
		  KEY (customer_id));
		CREATE OR REPLACE TABLE audit_log (id INT AUTO_INCREMENT PRIMARY KEY, customer_id INT,
		  event VARCHAR(20));
		INSERT INTO customers SELECT seq, CONCAT('customer ', seq), IF(seq % 3 = 0, 'north', 'south')
		  FROM seq_1_to_240;
		INSERT INTO orders SELECT seq, 1 + seq % 240, 10 + seq % 97 FROM seq_1_to_480;
	SQL
}

# Runs the application's requests on one connection of the client "$@".
demo_app() {
	# The CLI as a coprocess: statements go in on its stdin; after each one the client's own
	# `system echo` (run by the client, never sent to the server) marks where the result ends.
	coproc DEMO_SQL { "$@" --batch --skip-column-names --unbuffered --database="$DEMO_SCHEMA"; }
	local ids id offset page=50

	# The customer page: the north region's customers, then each one's orders.
	demo_query "SELECT id, name FROM customers WHERE region = 'north' ORDER BY id"
	ids=$(printf '%s' "$DEMO_ROWS" | cut -f1)
	for id in $ids; do
		demo_query "SELECT count(*), sum(total) FROM orders WHERE customer_id = $id"
	done

	# The audit log: one INSERT per customer on the page's first screen.
	for id in $(printf '%s\n' $ids | head -n 30); do
		demo_query "INSERT INTO audit_log (customer_id, event) VALUES ($id, 'viewed')"
	done

	# The export: every order, a page at a time, until a short page.
	offset=0
	while :; do
		demo_query "SELECT id, customer_id, total FROM orders ORDER BY id LIMIT $page OFFSET $offset"
		[ "$(printf '%s' "$DEMO_ROWS" | grep -c .)" -lt "$page" ] && break
		offset=$((offset + page))
	done

	exec {DEMO_SQL[1]}>&-
	wait "$DEMO_SQL_PID"
}

# Sends one statement to the coprocess and leaves its result rows in DEMO_ROWS (a
# variable, not stdout: a command substitution's subshell cannot use the coprocess).
demo_query() {
	printf '%s;\nsystem echo __demo_end__\n' "$1" >&"${DEMO_SQL[1]}"
	local line
	DEMO_ROWS=
	while IFS= read -r line <&"${DEMO_SQL[0]}"; do
		[ "$line" = __demo_end__ ] && return 0
		DEMO_ROWS+="$line"$'\n'
	done
	echo "demo: the client ended during: $1" >&2
	return 1
}
