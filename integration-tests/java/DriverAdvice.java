// DriverAdvice: the patterns whose fix rttscope words for MariaDB Connector/J (Debian's
// libmariadb-java 2.7.x), and each fix as advised, for tests/driver_advice.rs: the advised code
// must give the same rows and no finding.
//
// Run as a single source file (Java 11+), the driver on the class path:
//   java -cp /usr/share/java/mariadb-java-client.jar DriverAdvice.java MODE HOST PORT USER PASSWORD DB
//
// Modes (the tables come from python/driver_fixes.py setup):
//   loop           an N+1 loop: the orders, then one PreparedStatement execution per order
//   loop-advised   one PreparedStatement with `IN (?, ?, ...)` for all the keys
//   batch          addBatch()/executeBatch() of 40 INSERTs, neither rewritten nor bulk
//   batch-bulk     the same with `useBulkStmts=true` in the URL
//   batch-rewrite  the same with `rewriteBatchedStatements=true` in the URL
//   churn          40 queries, each on a DriverManager.getConnection() of its own
//   churn-advised  the same with `pool=true&maxPoolSize=10` in the URL (the driver's own pool)
//   chatty         60 requests on one connection, each setting time_zone and wait_timeout again
//   chatty-advised the same requests, both in `sessionVariables=` of the URL instead
// Each prints a line the test checks, read back from the server.

import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;

public class DriverAdvice {
    static final int ROWS = 40;

    public static void main(String[] args) throws Exception {
        if (args.length != 6) {
            System.err.println("usage: DriverAdvice MODE HOST PORT USER PASSWORD DB");
            System.exit(2);
        }
        String mode = args[0];
        // Pinned so that the pattern is the pattern: no TLS, no batch rewriting or bulk, one
        // command at a time; the advised modes add only what the advice says.
        String url = "jdbc:mariadb://" + args[1] + ":" + args[2] + "/" + args[5] + "?user=" + args[3]
                + "&password=" + args[4] + "&useSsl=false&useBatchMultiSend=false";
        if (mode.equals("churn") || mode.equals("churn-advised")) {
            churn(mode.equals("churn-advised") ? url + "&pool=true&maxPoolSize=10" : url);
            return;
        }
        if (mode.equals("chatty") || mode.equals("chatty-advised")) {
            boolean advised = mode.equals("chatty-advised");
            try (Connection conn = DriverManager.getConnection(advised ? url + "&sessionVariables=time_zone='+00:00',wait_timeout=600" : url)) {
                chatty(conn, advised);
            }
            return;
        }
        String batching = "&rewriteBatchedStatements=false&useBulkStmts=false";
        if (mode.equals("batch-bulk")) {
            batching = "&rewriteBatchedStatements=false&useBulkStmts=true";
        } else if (mode.equals("batch-rewrite")) {
            batching = "&rewriteBatchedStatements=true&useBulkStmts=false";
        }
        try (Connection conn = DriverManager.getConnection(url + batching)) {
            if (mode.startsWith("loop")) {
                loop(conn, mode.equals("loop-advised"));
            } else if (mode.startsWith("batch")) {
                batch(conn);
            } else {
                throw new IllegalArgumentException("unknown mode " + mode);
            }
        }
    }

    static void loop(Connection conn, boolean advised) throws Exception {
        List<Integer> keys = new ArrayList<>();
        try (Statement st = conn.createStatement();
             ResultSet rs = st.executeQuery("SELECT id, customer FROM df_orders ORDER BY id")) {
            while (rs.next()) {
                keys.add(rs.getInt(2));
            }
        }
        List<String> names = new ArrayList<>();
        if (advised) {
            String marks = String.join(", ", java.util.Collections.nCopies(keys.size(), "?"));
            try (PreparedStatement ps = conn.prepareStatement("SELECT id, name FROM df_customers WHERE id IN (" + marks + ")")) {
                for (int i = 0; i < keys.size(); i++) {
                    ps.setInt(i + 1, keys.get(i));
                }
                try (ResultSet rs = ps.executeQuery()) {
                    while (rs.next()) {
                        names.add(rs.getString(2));
                    }
                }
            }
        } else {
            try (PreparedStatement ps = conn.prepareStatement("SELECT name FROM df_customers WHERE id = ?")) {
                for (int key : keys) {
                    ps.setInt(1, key);
                    try (ResultSet rs = ps.executeQuery()) {
                        rs.next();
                        names.add(rs.getString(1));
                    }
                }
            }
        }
        System.out.println("names=" + names.size() + " distinct=" + new HashSet<>(names).size());
    }

    static void batch(Connection conn) throws Exception {
        try (Statement st = conn.createStatement()) {
            st.execute("DELETE FROM df_writes");
        }
        // In one transaction, as an application writes a batch; opened by START TRANSACTION, which
        // rttscope reads as one unit of work (setAutoCommit(false) sends no such boundary).
        try (Statement st = conn.createStatement()) {
            st.execute("START TRANSACTION");
        }
        try (PreparedStatement ps = conn.prepareStatement("INSERT INTO df_writes (id, name) VALUES (?, ?)")) {
            for (int i = 0; i < ROWS; i++) {
                ps.setInt(1, i);
                ps.setString(2, "w" + i);
                ps.addBatch();
            }
            ps.executeBatch();
        }
        try (Statement st = conn.createStatement()) {
            st.execute("COMMIT");
        }
        try (Statement st = conn.createStatement();
             ResultSet rs = st.executeQuery("SELECT COUNT(*), SUM(id), MAX(name) FROM df_writes")) {
            rs.next();
            System.out.println("inserted=" + rs.getLong(1) + " sum=" + rs.getLong(2) + " max=" + rs.getString(3));
        }
    }

    static void chatty(Connection conn, boolean advised) throws Exception {
        int names = 0;
        try (Statement st = conn.createStatement()) {
            for (int i = 0; i < 60; i++) {
                if (!advised) {
                    st.execute("SET time_zone = '+00:00'");
                    st.execute("SET wait_timeout = 600");
                }
                try (ResultSet rs = st.executeQuery("SELECT name FROM df_customers WHERE id = " + (i % 50 + 1))) {
                    while (rs.next()) {
                        names++;
                    }
                }
            }
            try (ResultSet rs = st.executeQuery("SELECT @@time_zone, @@wait_timeout")) {
                rs.next();
                System.out.println("requests=60 names=" + names + " time_zone=" + rs.getString(1) + " wait_timeout=" + rs.getString(2));
            }
        }
    }

    static void churn(String url) throws Exception {
        long total = 0;
        for (int i = 1; i <= ROWS; i++) {
            try (Connection conn = DriverManager.getConnection(url);
                 PreparedStatement ps = conn.prepareStatement("SELECT ? AS v")) {
                ps.setInt(1, i);
                try (ResultSet rs = ps.executeQuery()) {
                    rs.next();
                    total += rs.getLong(1);
                }
            }
        }
        System.out.println("queries=" + ROWS + " sum=" + total);
    }
}
