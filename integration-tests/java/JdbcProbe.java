// JdbcProbe: MariaDB Connector/J (Debian's libmariadb-java 2.7.x) driven as an application would,
// printing digests so that a run straight to the server and one through rttscope compare line by line.
//
// Run as a single source file (Java 11+, so no newer syntax), the driver on the class path:
//   java -cp /usr/share/java/mariadb-java-client.jar JdbcProbe.java MODE HOST PORT USER PASSWORD DB TABLE
//
// Modes:
//   setup   (re)create TABLE with 20,000 rows of mixed types, NULLs and multi-byte text
//   stream  read TABLE with Statement.setFetchSize(10): Connector/J 2.x streams the result of one
//           COM_QUERY, reading 10 rows at a time from the socket; it never opens a server cursor
//   batch   (re)create TABLE, then one executeBatch() of 1,000 single-row INSERTs from a
//           client-side PreparedStatement with useBatchMultiSend (pipelined, 100 before reading)
//
// Every connection reports how many COM_STMT_FETCH and COM_QUERY the server saw from it, so the
// test can tell what went over the wire without trusting rttscope's own account of it.

import java.security.MessageDigest;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.Statement;
import java.util.Arrays;

public class JdbcProbe {
    static final int ROWS = 20_000;
    static final int BATCH = 1_000;

    public static void main(String[] args) throws Exception {
        if (args.length != 7) {
            System.err.println("usage: JdbcProbe setup|stream|batch HOST PORT USER PASSWORD DB TABLE");
            System.exit(2);
        }
        String mode = args[0], table = args[6];
        // Pinned rather than left to defaults, so the wire traffic is what the test expects:
        // no TLS (rttscope forwards plain packets), client-side prepared statements (COM_QUERY),
        // no rewriting of batches into one multi-row INSERT, no COM_STMT_BULK_EXECUTE, and
        // pipelined batches of 100 commands before the driver reads their answers.
        String url = "jdbc:mariadb://" + args[1] + ":" + args[2] + "/" + args[5]
                + "?user=" + args[3] + "&password=" + args[4]
                + "&useSsl=false&useServerPrepStmts=false&rewriteBatchedStatements=false"
                + "&useBulkStmts=false&useBatchMultiSend=true&useBatchMultiSendNumber=100";
        try (Connection conn = DriverManager.getConnection(url)) {
            long fetchesBefore = status(conn, "Com_stmt_fetch");
            long insertsBefore = status(conn, "Com_insert");
            if (mode.equals("setup")) {
                setup(conn, table);
            } else if (mode.equals("stream")) {
                stream(conn, table);
            } else if (mode.equals("batch")) {
                batch(conn, table);
            } else {
                throw new IllegalArgumentException("unknown mode " + mode);
            }
            System.out.println("server saw COM_STMT_FETCH: " + (status(conn, "Com_stmt_fetch") - fetchesBefore));
            System.out.println("server saw INSERT: " + (status(conn, "Com_insert") - insertsBefore));
        }
    }

    static void setup(Connection conn, String table) throws Exception {
        try (Statement st = conn.createStatement()) {
            st.execute("CREATE OR REPLACE TABLE " + table + " (id INT PRIMARY KEY, name VARCHAR(40), "
                    + "amount DECIMAL(12,2), at DATETIME(6), note TEXT NULL) CHARACTER SET utf8mb4");
            st.execute("INSERT INTO " + table + " SELECT seq, CONCAT('name-', seq, SUBSTRING('äöü€😀', 1, seq % 6)), "
                    + "seq * 12.34, TIMESTAMP'2024-01-01 00:00:00' + INTERVAL seq * 37 SECOND + INTERVAL seq MICROSECOND, "
                    + "IF(seq % 7 = 0, NULL, REPEAT('x', seq % 300)) FROM seq_1_to_" + ROWS);
            try (ResultSet rs = st.executeQuery("SELECT COUNT(*) FROM " + table)) {
                rs.next();
                System.out.println("setup rows=" + rs.getLong(1));
            }
        }
    }

    static void stream(Connection conn, String table) throws Exception {
        try (Statement st = conn.createStatement()) {
            st.setFetchSize(10);
            try (ResultSet rs = st.executeQuery("SELECT id, name, amount, at, note FROM " + table + " ORDER BY id")) {
                System.out.println("stream fetchSize=" + rs.getFetchSize() + " " + digest(rs));
            }
        }
    }

    static void batch(Connection conn, String table) throws Exception {
        try (Statement st = conn.createStatement()) {
            st.execute("CREATE OR REPLACE TABLE " + table + " (id INT PRIMARY KEY, name VARCHAR(40), amount DECIMAL(12,2)) CHARACTER SET utf8mb4");
        }
        int[] counts;
        try (PreparedStatement ps = conn.prepareStatement("INSERT INTO " + table + " (id, name, amount) VALUES (?, ?, ?)")) {
            for (int i = 1; i <= BATCH; i++) {
                ps.setInt(1, i);
                ps.setString(2, "row-" + i + "-ü€");
                ps.setBigDecimal(3, new java.math.BigDecimal(i).movePointLeft(2));
                ps.addBatch();
            }
            counts = ps.executeBatch();
        }
        long ones = Arrays.stream(counts).filter(c -> c == 1).count();
        System.out.println("batch update counts=" + counts.length + " of which 1: " + ones);
        try (Statement st = conn.createStatement();
             ResultSet rs = st.executeQuery("SELECT id, name, amount FROM " + table + " ORDER BY id")) {
            System.out.println("table " + digest(rs));
        }
    }

    /** Row count and SHA-256 over every column's string form, NULLs marked. */
    static String digest(ResultSet rs) throws Exception {
        MessageDigest sha = MessageDigest.getInstance("SHA-256");
        int columns = rs.getMetaData().getColumnCount();
        long n = 0;
        while (rs.next()) {
            n++;
            StringBuilder row = new StringBuilder();
            for (int i = 1; i <= columns; i++) {
                String v = rs.getString(i);
                row.append(v == null ? "\\N" : v).append('\u0001');
            }
            sha.update(row.append('\n').toString().getBytes(java.nio.charset.StandardCharsets.UTF_8));
        }
        StringBuilder hex = new StringBuilder();
        for (byte b : sha.digest()) {
            hex.append(String.format("%02x", b));
        }
        return "rows=" + n + " sha256=" + hex;
    }

    static long status(Connection conn, String name) throws Exception {
        try (Statement st = conn.createStatement();
             ResultSet rs = st.executeQuery("SHOW SESSION STATUS LIKE '" + name + "'")) {
            return rs.next() ? rs.getLong(2) : -1;
        }
    }
}
