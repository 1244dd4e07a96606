package valkyrie.clients;

import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import javax.net.ssl.SSLParameters;

import redis.clients.jedis.DefaultJedisClientConfig;
import redis.clients.jedis.HostAndPort;
import redis.clients.jedis.Jedis;
import redis.clients.jedis.JedisPubSub;
import redis.clients.jedis.JedisSentinelPool;

/**
 * Jedis: {@link JedisSentinelPool} for the master; the replica path is a
 * {@link Jedis} to the first usable replica of SENTINEL REPLICAS asked
 * through Jedis's sentinel commands.
 *
 * The pool itself runs one MasterListener thread per sentinel, each
 * subscribed to {@code +switch-master} (re-reading
 * SENTINEL GET-MASTER-ADDR-BY-NAME whenever it (re)subscribes); the
 * subscription made here is a separate one through the same API.
 */
final class JedisClient extends Client {

    /**
     * RESP2 without auto-negotiation: the Jedis class does not negotiate
     * and assumes RESP2 anyway, but warns on every connection when asked to.
     * Over TLS ({@link Tls}): ssl(true) with an SSLSocketFactory from the
     * PEM files and host name checking, for the sentinels and the data
     * nodes alike (the pool's master and sentinel configs are this one).
     */
    private DefaultJedisClientConfig config;

    private JedisSentinelPool pool;
    private Jedis replica;
    private volatile int writePort = -1;
    private volatile Jedis subscriber;
    private volatile JedisPubSub pubSub;

    JedisClient(String name, List<Integer> sentinels) {
        super(name, sentinels);
    }

    @Override
    void start() throws Exception {
        DefaultJedisClientConfig.Builder b = DefaultJedisClientConfig.builder().autoNegotiateProtocol(false);
        if (Tls.on()) {
            // Jedis checks the server's name only when told to: HTTPS
            // endpoint identification (127.0.0.1, an IP SAN here).
            SSLParameters params = new SSLParameters();
            params.setEndpointIdentificationAlgorithm("HTTPS");
            b.ssl(true).sslSocketFactory(Tls.sslContext().getSocketFactory()).sslParameters(params);
        }
        config = b.build();
        Set<HostAndPort> set = new LinkedHashSet<>();
        for (int p : sentinels) {
            set.add(new HostAndPort(HOST, p));
        }
        pool = new JedisSentinelPool(MASTER, set, config, config);
    }

    @Override
    void set(String key) {
        try (Jedis j = pool.getResource()) {
            j.set(key, "1");
            // The address of the connection that took the write.
            writePort = j.getConnection().getHostAndPort().getPort();
        }
    }

    @Override
    int masterPort() {
        return writePort;
    }

    private List<Map<String, String>> sentinelReplicas() {
        RuntimeException last = null;
        for (int p : sentinels) {
            try (Jedis s = new Jedis(new HostAndPort(HOST, p), config)) {
                return s.sentinelReplicas(MASTER);
            } catch (RuntimeException e) {
                last = e;
            }
        }
        throw last;
    }

    @Override
    List<Integer> replicaPorts() {
        List<Map<String, String>> replicas = usable(sentinelReplicas());
        if (replicas.isEmpty()) {
            throw new IllegalStateException("SENTINEL REPLICAS is empty");
        }
        Map<String, String> first = replicas.get(0);
        replica = new Jedis(new HostAndPort(first.get("ip"), Integer.parseInt(first.get("port"))), config);
        return ports(replicas);
    }

    @Override
    String replicaGet(String key) {
        return replica.get(key);
    }

    @Override
    String replicaRole() {
        return infoField(replica.info("replication"), "role");
    }

    @Override
    void subscribeSwitch(int port) throws Exception {
        CompletableFuture<Void> subscribed = new CompletableFuture<>();
        JedisPubSub ps = new JedisPubSub() {
            @Override
            public void onMessage(String channel, String message) {
                onSwitch(channel, message);
            }

            @Override
            public void onSubscribe(String channel, int subscribedChannels) {
                subscribed.complete(null);
            }
        };
        pubSub = ps;
        Jedis j = new Jedis(new HostAndPort(HOST, port), config);
        subscriber = j;
        Thread t = new Thread(() -> {
            try {
                j.subscribe(ps, SWITCH_CHANNEL);
            } catch (Throwable e) {
                subscribed.completeExceptionally(e);
            }
        }, name + "-switch-subscriber");
        t.setDaemon(true);
        t.start();
        subscribed.get(10, TimeUnit.SECONDS);
    }

    @Override
    void close() {
        JedisPubSub ps = pubSub;
        if (ps != null) {
            try {
                ps.unsubscribe();
            } catch (RuntimeException ignored) {
                // already gone
            }
        }
        Jedis s = subscriber;
        if (s != null) {
            s.close();
        }
        if (replica != null) {
            replica.close();
        }
        if (pool != null) {
            pool.close();
        }
    }
}
