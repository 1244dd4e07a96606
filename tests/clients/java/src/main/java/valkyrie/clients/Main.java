package valkyrie.clients;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * Runs Java Sentinel client libraries through a failover.
 *
 * <pre>java -jar valkyrie-java-clients.jar &lt;sentinel-ports&gt; &lt;clients&gt;</pre>
 *
 * Phase 1 (each client in its own thread): write through the master path,
 * print what the library found, read through the replica path, subscribe to
 * {@code +switch-master}, print "ready". Then one line is read from stdin:
 * the master has just been killed. Phase 2 (same client objects): write until
 * a write is acknowledged, print the time it took and the master followed,
 * the {@code +switch-master} payload, "done". Every stdout line starts with
 * the client's name; "done" alone ends the run (exit 1 if a client failed).
 */
public final class Main {

    static final String USAGE = "usage: java -jar valkyrie-java-clients.jar <sentinel-ports> <clients>\n"
            + "  sentinel-ports: comma-separated ports on 127.0.0.1 (master name: VALKYRIE_MASTER_NAME,\n"
            + "                  mymaster by default)\n"
            + "  clients: comma-separated, from jedis, lettuce-resp3, lettuce-resp2,\n"
            + "           lettuce-master-replica, redisson, redisson-unchecked, spring\n"
            + "  TLS to the sentinels and the data nodes when VALKYRIE_CLIENT_TLS_CA names a PEM CA file;\n"
            + "  VALKYRIE_CLIENT_TLS_CERT and VALKYRIE_CLIENT_TLS_KEY then name the client certificate and key";

    static final long REPLICA_READ_NANOS = TimeUnit.SECONDS.toNanos(5);
    static final long RECOVER_NANOS = TimeUnit.SECONDS.toNanos(60);
    static final long SWITCH_WAIT_MS = 15_000;

    private static final PrintStream OUT = new PrintStream(
            new java.io.FileOutputStream(java.io.FileDescriptor.out), true, StandardCharsets.UTF_8);

    private static volatile long goNanos;

    static void out(String line) {
        synchronized (OUT) {
            OUT.println(line);
            OUT.flush();
        }
    }

    static String oneLine(Throwable t) {
        StringBuilder sb = new StringBuilder(t.toString());
        Throwable cause = t.getCause();
        for (int depth = 0; cause != null && cause != t && depth < 4; depth++) {
            sb.append(" <- ").append(cause);
            t = cause;
            cause = cause.getCause();
        }
        return sb.toString().replaceAll("[\\r\\n]+", " ");
    }

    static Client create(String name, List<Integer> sentinels) {
        switch (name) {
            case "jedis":
                return new JedisClient(name, sentinels);
            case "lettuce-resp3":
                return new LettuceClient(name, sentinels, false);
            case "lettuce-resp2":
                return new LettuceClient(name, sentinels, true);
            case "lettuce-master-replica":
                return new LettuceMasterReplicaClient(name, sentinels);
            case "redisson":
                return new RedissonSentinelClient(name, sentinels, true);
            case "redisson-unchecked":
                return new RedissonSentinelClient(name, sentinels, false);
            case "spring":
                return new SpringClient(name, sentinels);
            default:
                return null;
        }
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 2) {
            System.err.println(USAGE);
            System.exit(2);
        }
        List<Integer> sentinels = new ArrayList<>();
        for (String p : args[0].split(",")) {
            if (!p.isBlank()) {
                sentinels.add(Integer.parseInt(p.trim()));
            }
        }
        List<Client> clients = new ArrayList<>();
        for (String n : args[1].split(",")) {
            if (n.isBlank()) {
                continue;
            }
            Client c = create(n.trim(), sentinels);
            if (c == null) {
                System.err.println("unknown client: " + n + "\n" + USAGE);
                System.exit(2);
            }
            clients.add(c);
        }
        if (sentinels.isEmpty() || clients.isEmpty()) {
            System.err.println(USAGE);
            System.exit(2);
        }

        Tls.check();
        // Logging set up once before the threads start (else slf4j replays
        // the calls made during its initialization, with a warning).
        org.slf4j.LoggerFactory.getLogger(Main.class);
        CountDownLatch phase1 = new CountDownLatch(clients.size());
        CountDownLatch go = new CountDownLatch(1);
        AtomicBoolean failed = new AtomicBoolean(false);
        List<Thread> threads = new ArrayList<>();
        for (Client c : clients) {
            Thread t = new Thread(() -> {
                boolean ok = false;
                try {
                    ok = phase1(c);
                } finally {
                    phase1.countDown();
                }
                if (!ok) {
                    failed.set(true);
                    return;
                }
                try {
                    go.await();
                } catch (InterruptedException e) {
                    return;
                }
                if (!phase2(c)) {
                    failed.set(true);
                }
            }, "client-" + c.name);
            t.setDaemon(true);
            threads.add(t);
        }
        for (Thread t : threads) {
            t.start();
        }

        phase1.await();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line = in.readLine();
        goNanos = System.nanoTime();
        if (line == null) {
            System.err.println("stdin closed before the go line");
        }
        go.countDown();
        for (Thread t : threads) {
            t.join();
        }
        out("done");
        shutdown(clients);
        System.exit(failed.get() || line == null ? 1 : 0);
    }

    /** Closes every client in parallel, giving them 5 s in all. */
    static void shutdown(List<Client> clients) {
        List<Thread> closers = new ArrayList<>();
        for (Client c : clients) {
            Thread t = new Thread(() -> {
                try {
                    c.close();
                } catch (Throwable ignored) {
                    // the JVM exits anyway
                }
            }, "close-" + c.name);
            t.setDaemon(true);
            t.start();
            closers.add(t);
        }
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
        for (Thread t : closers) {
            long left = TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime());
            if (left <= 0) {
                break;
            }
            try {
                t.join(left);
            } catch (InterruptedException e) {
                break;
            }
        }
    }

    static boolean phase1(Client c) {
        try {
            c.start();
            c.set("before:" + c.name);
            c.out("master " + c.masterPort());
            StringBuilder replicas = new StringBuilder("replicas");
            for (int p : c.replicaPorts()) {
                replicas.append(' ').append(p);
            }
            c.out(replicas.toString());
            String key = "before:" + c.name;
            long deadline = System.nanoTime() + REPLICA_READ_NANOS;
            String value;
            for (;;) {
                Exception error = null;
                value = null;
                try {
                    value = c.replicaGet(key);
                } catch (Exception e) {
                    error = e;
                }
                if ("1".equals(value)) {
                    break;
                }
                if (System.nanoTime() > deadline) {
                    if (error != null) {
                        throw error;
                    }
                    break;
                }
                Thread.sleep(50);
            }
            c.out("replica-read " + value);
            c.out("replica-role " + c.replicaRole());
            if (c.subscribes()) {
                c.subscribeSwitch(c.lastSentinel());
            }
            c.out("ready");
            return true;
        } catch (Throwable t) {
            t.printStackTrace();
            c.out("failed " + oneLine(t));
            return false;
        }
    }

    static boolean phase2(Client c) {
        long start = goNanos;
        Throwable last = null;
        // Each attempt runs on its own thread so that a library call that
        // blocks (Lettuce queues commands while it reconnects, up to its
        // 60 s command timeout) cannot hold the client past the 60 s.
        ExecutorService attempts = Executors.newSingleThreadExecutor(r -> {
            Thread t = new Thread(r, "write-" + c.name);
            t.setDaemon(true);
            return t;
        });
        try {
            for (;;) {
                long left = RECOVER_NANOS - (System.nanoTime() - start);
                if (left <= 0) {
                    c.out("failed " + (last == null ? "no write acknowledged within 60 s" : oneLine(last)));
                    return false;
                }
                Future<?> attempt = attempts.submit(() -> {
                    c.set("after:" + c.name);
                    return null;
                });
                try {
                    attempt.get(left, TimeUnit.NANOSECONDS);
                    break;
                } catch (ExecutionException e) {
                    last = e.getCause();
                } catch (TimeoutException e) {
                    c.out("failed no write acknowledged within 60 s (an attempt still blocked"
                            + (last == null ? ")" : "; before it: " + oneLine(last) + ")"));
                    return false;
                }
                Thread.sleep(20);
            }
        } catch (InterruptedException e) {
            return false;
        } finally {
            attempts.shutdown();
        }
        c.out("recovered-ms " + TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start));
        try {
            c.out("followed " + c.masterPort());
        } catch (Throwable t) {
            t.printStackTrace();
            c.out("failed " + oneLine(t));
            return false;
        }
        if (c.subscribes()) {
            try {
                c.out("switch " + c.switchMessage.get(SWITCH_WAIT_MS, TimeUnit.MILLISECONDS));
            } catch (TimeoutException e) {
                c.out("switch none");
            } catch (Exception e) {
                c.out("switch none " + oneLine(e));
            }
        }
        c.out("done");
        return true;
    }
}
