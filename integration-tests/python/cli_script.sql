-- Fed to the mariadb CLI on stdin (batch mode, --table --force) by tests/clients.rs; @DATA@ is
-- replaced by the path of a tab-separated file to upload.
SELECT 1 AS one, 'text' AS t, NULL AS n, 1.5e10 AS f, CAST(123.456 AS DECIMAL(10,3)) AS d,
  DATE'2024-01-02' AS dt, TIME'12:34:56.789' AS tm, X'00FF' AS bin, _utf8mb4'ü😀' AS emoji,
  18446744073709551615 AS big, -9223372036854775808 AS small, 0.1 + 0.2 AS sum, JSON_OBJECT('k', 1) AS j;
CREATE OR REPLACE TABLE cli_t (id INT PRIMARY KEY, name VARCHAR(20), day DATE);
LOAD DATA LOCAL INFILE '@DATA@' INTO TABLE cli_t;
SELECT * FROM cli_t ORDER BY id\G
DELIMITER //
CREATE OR REPLACE PROCEDURE cli_proc(n INT)
BEGIN
  SELECT n AS first_result;
  SELECT id, name FROM cli_t WHERE id <= n ORDER BY id;
END//
DELIMITER ;
CALL cli_proc(2);
SELECT 'a' AS multi1; SELECT 'b' AS multi2;
INSERT IGNORE INTO cli_t VALUES (1, 'duplicate', NULL), (4, 'this name is much too long', '2024-13-45');
SHOW WARNINGS;
use information_schema
SELECT DATABASE();
SELECT TABLE_NAME, COLUMN_NAME, DATA_TYPE FROM COLUMNS WHERE TABLE_SCHEMA = 'rttscope_test' AND TABLE_NAME = 'cli_t' ORDER BY ORDINAL_POSITION;
use rttscope_test
SELECT * FROM no_such_table;
SELECT 'after the error' AS still_running;
status
SELECT seq, REPEAT('x', seq % 1000) AS filler FROM seq_1_to_5000 WHERE seq % 1000 = 0;
SELECT COUNT(*), SUM(LENGTH(REPEAT('y', seq))) FROM seq_1_to_20000;
