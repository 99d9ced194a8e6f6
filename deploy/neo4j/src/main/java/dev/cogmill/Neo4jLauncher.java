package dev.cogmill;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.CountDownLatch;

import org.neo4j.dbms.api.DatabaseManagementService;
import org.neo4j.dbms.api.DatabaseManagementServiceBuilder;
import org.neo4j.graphdb.GraphDatabaseService;
import org.neo4j.server.CommunityBootstrapper;

/**
 * Neo4j Community as a plain process with Bolt, for tests and CI where there is no Docker.
 *
 * Usage: Neo4jLauncher --port 7697 --data DIR [--host 127.0.0.1] [--http-port 7484]
 *                      [--pagecache 256m] [--set key=value ...]
 *
 * DIR is the Neo4j home: data/ and logs/ (debug.log) go under it and a leftover DIR from an
 * earlier run is reused (Neo4j recovers it). With --http-port, Neo4j's HTTP API (the
 * transactional Cypher endpoint, /db/neo4j/tx) is served there too. When the environment
 * holds PASSWORD_ENV, authentication is on and user neo4j gets that password (not an
 * argument: a command line is visible to every user of the machine). Prints one line starting
 * with READY_MARKER once a TCP connect to Bolt succeeds; deploy/services.sh waits for it.
 */
public final class Neo4jLauncher {
    static final String READY_MARKER = "COGMILL_NEO4J_READY";
    static final String PASSWORD_ENV = "COGMILL_NEO4J_LAUNCH_PASSWORD";

    public static void main(String[] args) throws Exception {
        String host = "127.0.0.1";
        int port = 7687;
        int httpPort = 0;
        Path home = null;
        String password = System.getenv(PASSWORD_ENV);
        boolean auth = password != null && !password.isEmpty();
        // Raw setting names, as in neo4j.conf, so the file written below reads like the docs.
        Map<String, String> conf = new LinkedHashMap<>();
        conf.put("server.bolt.enabled", "true");
        conf.put("server.bolt.tls_level", "DISABLED");
        conf.put("dbms.security.auth_enabled", Boolean.toString(auth));
        conf.put("server.https.enabled", "false");
        conf.put("server.memory.pagecache.size", "256m");
        // A vector index keeps up to 50 Lucene segments a level by default, and a query
        // searches every one: at 7,560 passages written batch by batch, 41 segments an index
        // and ~100 ms of Neo4j CPU per search; 10 merges them down (README, Search latency).
        conf.put("internal.dbms.index.vector.standard_merge_factor", "10");
        // Defaults preallocate 256 MiB per transaction log and database (system + neo4j).
        conf.put("db.tx_log.rotation.size", "16m");
        conf.put("db.tx_log.preallocate", "false");
        conf.put("db.tx_log.rotation.retention_policy", "1 files");
        // A bound on the heap one transaction may hold (collect, sort, distinct, the rows of a
        // query): over it Neo4j stops that transaction instead of running out of heap for all.
        // Caller-supplied Cypher is also ended by its transaction timeout (the driver's).
        conf.put("db.memory.transaction.max", "256m");
        // Tests have no business phoning home, and the network is closed anyway.
        conf.put("dbms.usage_report.enabled", "false");
        // Netty waits a 5 s quiet period per Bolt event loop group on shutdown (~10 s in all).
        conf.put("internal.dbms.bolt.netty_server_shutdown_quiet_period", "0");

        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            String v = i + 1 < args.length ? args[i + 1] : null;
            if (v == null) usage("missing value for " + a);
            switch (a) {
                case "--port" -> port = Integer.parseInt(v);
                case "--host" -> host = v;
                case "--http-port" -> httpPort = Integer.parseInt(v);
                case "--data" -> home = Path.of(v).toAbsolutePath();
                case "--pagecache" -> conf.put("server.memory.pagecache.size", v);
                case "--set" -> {
                    int eq = v.indexOf('=');
                    if (eq < 1) usage("--set wants key=value, got " + v);
                    conf.put(v.substring(0, eq), v.substring(eq + 1));
                }
                default -> usage("unknown argument " + a);
            }
            i++;
        }
        if (home == null) usage("--data DIR is required");
        conf.put("server.bolt.listen_address", host + ":" + port);
        conf.put("server.bolt.advertised_address", host + ":" + port);
        conf.put("server.http.enabled", Boolean.toString(httpPort > 0));
        if (httpPort > 0) {
            conf.put("server.http.listen_address", host + ":" + httpPort);
            conf.put("server.http.advertised_address", host + ":" + httpPort);
        }

        // The embedded builder has no raw-string setter; a conf file keeps names as documented,
        // goes through Neo4j's strict validation (typos fail startup) and shows what ran.
        Path confFile = home.resolve("conf/neo4j.conf");
        Files.createDirectories(confFile.getParent());
        StringBuilder text = new StringBuilder("# written by dev.cogmill.Neo4jLauncher at each start\n");
        conf.forEach((k, val) -> text.append(k).append('=').append(val).append('\n'));
        Files.writeString(confFile, text);

        long t0 = System.nanoTime();
        DatabaseManagementService dbms;
        Runnable shutdown;
        try {
            if (httpPort > 0) {
                // The HTTP connector is the server's (Jetty), which only the bootstrapper starts.
                CommunityBootstrapper server = new CommunityBootstrapper();
                if (server.start(home, confFile, Map.of(), false, false) != 0) {
                    System.err.println("Neo4j server failed to start; see " + home + "/logs");
                    System.exit(1);
                }
                dbms = server.getDatabaseManagementService();
                shutdown = server::stop;
            } else {
                dbms = new DatabaseManagementServiceBuilder(home).loadPropertiesFromFile(confFile)
                        .build();
                shutdown = dbms::shutdown;
            }
        } catch (RuntimeException e) {
            System.err.println("Neo4j failed to start: " + e);
            e.printStackTrace();
            System.exit(1);
            return;
        }

        CountDownLatch stopped = new CountDownLatch(1);
        // SIGTERM/SIGINT run shutdown hooks: checkpoint and close the store so the next start
        // needs no recovery.
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            long s0 = System.nanoTime();
            System.out.println("Neo4j shutting down");
            shutdown.run();
            System.out.println("Neo4j stopped in " + (System.nanoTime() - s0) / 1_000_000 + " ms");
            stopped.countDown();
        }, "neo4j-shutdown"));

        GraphDatabaseService db = dbms.database("neo4j");
        if (!db.isAvailable(60_000)) {
            System.err.println("Neo4j database 'neo4j' did not become available");
            System.exit(1);
        }
        if (auth) {
            // In-process transactions need no login; clients get in only with this password.
            dbms.database("system").executeTransactionally(
                    "ALTER USER neo4j SET PASSWORD $password CHANGE NOT REQUIRED",
                    Map.of("password", password));
        }
        waitForBolt(host, port, 30_000);
        long ms = (System.nanoTime() - t0) / 1_000_000;
        String http = httpPort > 0 ? " http://" + host + ":" + httpPort : "";
        System.out.println(READY_MARKER + " bolt://" + host + ":" + port + http + " auth=" + auth
                + " home=" + home + " started_in_ms=" + ms);
        stopped.await();
    }

    private static void waitForBolt(String host, int port, long timeoutMs) throws InterruptedException {
        long deadline = System.currentTimeMillis() + timeoutMs;
        while (true) {
            try (Socket s = new Socket()) {
                s.connect(new InetSocketAddress(host, port), 1000);
                return;
            } catch (IOException e) {
                if (System.currentTimeMillis() > deadline) {
                    System.err.println("Bolt not accepting on " + host + ":" + port + ": " + e);
                    System.exit(1);
                }
                Thread.sleep(100);
            }
        }
    }

    private static void usage(String why) {
        System.err.println(why);
        System.err.println("usage: Neo4jLauncher --port P --data DIR [--host H] [--http-port P]"
                + " [--pagecache 256m] [--set key=value ...]");
        System.exit(2);
    }
}
