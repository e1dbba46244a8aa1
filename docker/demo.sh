#!/bin/sh
# The background article's loop, small: one employee list, then one salary
# query per employee, through rttscope. Its report then shows the N+1 loop,
# its parent, and what it would cost 15 ms away.
set -eu
DB="mariadb --host=rttscope --port=6033 --user=root --password=demo --skip-ssl --batch --skip-column-names"
until $DB -e "SELECT 1" >/dev/null 2>&1; do sleep 1; done
$DB -e "CREATE DATABASE IF NOT EXISTS demo;
  CREATE OR REPLACE TABLE demo.employees (emp_no INT PRIMARY KEY, name VARCHAR(20));
  CREATE OR REPLACE TABLE demo.salaries (emp_no INT PRIMARY KEY, salary INT);
  INSERT INTO demo.employees SELECT 10000 + seq, CONCAT('emp', seq) FROM seq_1_to_200;
  INSERT INTO demo.salaries SELECT 10000 + seq, 40000 + seq FROM seq_1_to_200;"
while true; do
  for emp in $($DB -e "SELECT emp_no FROM demo.employees"); do
    $DB -e "SELECT salary FROM demo.salaries WHERE emp_no = $emp" >/dev/null
  done
  sleep 5
done
