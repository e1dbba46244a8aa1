// Mysql8Login: MariaDB Connector/J (Debian's libmariadb-java 2.7.x) logs in to the MySQL-8-style
// test server (integration-tests/python/mysql8_server.py), directly or through rttscope, and runs
// SELECT CURRENT_USER(). Driven by mysql8_login.py (driver "connector-j").
//
//   java -cp /usr/share/java/mariadb-java-client.jar Mysql8Login.java HOST PORT tls|plain USER PASSWORD
//
// Over a plain connection the driver may fetch the server's RSA key for a full authentication
// (allowPublicKeyRetrieval), as an application configured for caching_sha2_password does; over
// TLS it sends the password in clear, the certificate (self-signed) trusted as it is.
// Prints the answer, or "error CODE MESSAGE".

import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;

public class Mysql8Login {
    public static void main(String[] args) {
        boolean tls = args[2].equals("tls");
        String url = "jdbc:mariadb://" + args[0] + ":" + args[1] + "/?user=" + args[3] + "&password=" + args[4]
                + (tls ? "&useSsl=true&trustServerCertificate=true" : "&useSsl=false&allowPublicKeyRetrieval=true");
        try (Connection conn = DriverManager.getConnection(url);
                Statement st = conn.createStatement();
                ResultSet rs = st.executeQuery("SELECT CURRENT_USER()")) {
            rs.next();
            System.out.println(rs.getString(1));
        } catch (SQLException e) {
            System.out.println("error " + e.getErrorCode() + " " + e.getMessage().replace('\n', ' '));
        }
    }
}
