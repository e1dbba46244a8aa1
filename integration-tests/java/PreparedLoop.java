// PreparedLoop: an N+1 loop through MariaDB Connector/J's server-side prepared statements
// (useServerPrepStmts=true: COM_STMT_PREPARE once, then COM_STMT_EXECUTE by id), for
// tests/prepared.rs. The tables come from python/prepared_loops.py setup.
//
//   java -cp /usr/share/java/mariadb-java-client.jar PreparedLoop.java HOST PORT USER PASSWORD DB
//
// Prints "names=N distinct=D": the children run and the distinct author names they returned.

import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

public class PreparedLoop {
    public static void main(String[] args) throws Exception {
        if (args.length != 5) {
            System.err.println("usage: PreparedLoop HOST PORT USER PASSWORD DB");
            System.exit(2);
        }
        String url = "jdbc:mariadb://" + args[0] + ":" + args[1] + "/" + args[4]
                + "?user=" + args[2] + "&password=" + args[3] + "&useSsl=false&useServerPrepStmts=true";
        try (Connection conn = DriverManager.getConnection(url)) {
            List<Integer> authors = new ArrayList<>();
            String books = "SELECT id, author_id FROM pl_books WHERE id > ? ORDER BY id LIMIT 200";
            try (PreparedStatement ps = conn.prepareStatement(books)) {
                ps.setInt(1, 0);
                try (ResultSet rs = ps.executeQuery()) {
                    while (rs.next()) {
                        authors.add(rs.getInt(2));
                    }
                }
            }
            Set<String> names = new HashSet<>();
            int children = 0;
            try (PreparedStatement ps = conn.prepareStatement("SELECT name FROM pl_authors WHERE id = ?")) {
                for (int author : authors) {
                    ps.setInt(1, author);
                    try (ResultSet rs = ps.executeQuery()) {
                        while (rs.next()) {
                            names.add(rs.getString(1));
                        }
                    }
                    children++;
                }
            }
            System.out.println("names=" + children + " distinct=" + names.size());
        }
    }
}
