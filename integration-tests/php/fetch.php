<?php
// Reads a result through mysqli (mysqlnd) the ways rttscope's fix for an undersized fetch
// talks about: php fetch.php MODE HOST PORT USER PASSWORD DB ROWS
//   cursor    a READ_ONLY server-side cursor: mysqlnd fetches a row per round trip
//   prefetch  the cursor with MYSQLI_STMT_ATTR_PREFETCH_ROWS set (the advice mysqlnd refuses)
//   get       the advice: no cursor, $stmt->get_result()
//   store     the advice: no cursor, $stmt->store_result() and bound results
//   stream    the advice: $mysqli->query($sql, MYSQLI_USE_RESULT)
// Prints "rows=N", or "error=CLASS: MESSAGE" when mysqli throws.
mysqli_report(MYSQLI_REPORT_ERROR | MYSQLI_REPORT_STRICT);
[$self, $mode, $host, $port, $user, $password, $db, $rows] = $argv;
$sql = "SELECT seq FROM seq_1_to_$rows WHERE seq > ?";
try {
    $mysqli = new mysqli($host, $user, $password, $db, (int) $port);
    $n = 0;
    if ($mode === 'stream') {
        $result = $mysqli->query("SELECT seq FROM seq_1_to_$rows", MYSQLI_USE_RESULT);
        while ($result->fetch_row()) {
            $n++;
        }
        $result->free();
    } else {
        $stmt = $mysqli->prepare($sql);
        $min = 0;
        $stmt->bind_param('i', $min);
        if ($mode === 'cursor' || $mode === 'prefetch') {
            $stmt->attr_set(MYSQLI_STMT_ATTR_CURSOR_TYPE, MYSQLI_CURSOR_TYPE_READ_ONLY);
        }
        if ($mode === 'prefetch') {
            $stmt->attr_set(MYSQLI_STMT_ATTR_PREFETCH_ROWS, 2000);
        }
        $stmt->execute();
        if ($mode === 'get') {
            $result = $stmt->get_result();
            while ($result->fetch_row()) {
                $n++;
            }
        } else {
            if ($mode === 'store') {
                $stmt->store_result();
            }
            $stmt->bind_result($seq);
            while ($stmt->fetch()) {
                $n++;
            }
        }
        $stmt->close();
    }
    $mysqli->close();
    echo "rows=$n\n";
} catch (Throwable $e) {
    echo 'error=', get_class($e), ': ', $e->getMessage(), "\n";
}
