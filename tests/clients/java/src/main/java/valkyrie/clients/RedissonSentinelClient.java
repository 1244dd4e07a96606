package valkyrie.clients;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import org.redisson.Redisson;
import org.redisson.api.RScript;
import org.redisson.api.RedissonClient;
import org.redisson.api.redisnode.RedisNodes;
import org.redisson.api.redisnode.RedisSentinel;
import org.redisson.api.redisnode.RedisSentinelMasterSlave;
import org.redisson.api.redisnode.RedisSlave;
import org.redisson.client.ChannelName;
import org.redisson.client.RedisClient;
import org.redisson.client.RedisClientConfig;
import org.redisson.client.RedisPubSubConnection;
import org.redisson.client.RedisPubSubListener;
import org.redisson.client.codec.StringCodec;
import org.redisson.client.protocol.pubsub.PubSubType;
import org.redisson.config.Config;
import org.redisson.config.ReadMode;

/**
 * Redisson with {@code useSentinelServers()}, {@link ReadMode#SLAVE}. Its
 * SentinelConnectionManager subscribes to nothing: every scanInterval
 * (1 s by default) it asks one sentinel SENTINEL GET-MASTER-ADDR-BY-NAME,
 * SENTINEL REPLICAS and SENTINEL SENTINELS and applies the differences.
 * With {@code checked}, Redisson's default check that SENTINEL SENTINELS
 * yields at least two sentinels applies; without it
 * (setCheckSentinelsList(false)) one sentinel is enough.
 *
 * The master and the replicas are Redisson's own view (its RedisNodes API).
 * The replica role is read by a read-only script, which Redisson routes
 * like the GET (to a replica, ReadMode.SLAVE); the subscription uses
 * Redisson's low-level client (org.redisson.client.RedisClient).
 *
 * Over TLS ({@link Tls}): rediss:// addresses, and trust and key manager
 * factories built from the PEM files.
 */
final class RedissonSentinelClient extends Client {

    private static final String ROLE_SCRIPT =
            "return string.match(redis.call('INFO', 'replication'), 'role:(%a+)')";

    private final boolean checked;
    private RedissonClient redisson;
    private RedisClient subClient;

    RedissonSentinelClient(String name, List<Integer> sentinels, boolean checked) {
        super(name, sentinels);
        this.checked = checked;
    }

    /** redis:// or, over TLS ({@link Tls}), rediss://. */
    private static String address(int port) {
        return (Tls.on() ? "rediss://" : "redis://") + HOST + ":" + port;
    }

    @Override
    void start() throws Exception {
        Config config = new Config();
        config.setCodec(StringCodec.INSTANCE);
        var sentinelConfig = config.useSentinelServers()
                .setMasterName(MASTER)
                .setReadMode(ReadMode.SLAVE);
        for (int p : sentinels) {
            sentinelConfig.addSentinelAddress(address(p));
        }
        if (Tls.on()) {
            // rediss:// sentinel addresses: Redisson connects to the master
            // and the replicas it finds with the sentinels' scheme. The
            // stores are set on the Config (the per-server setters are
            // deprecated in Redisson 4).
            config.setSslTrustManagerFactory(Tls.trustManagers());
            config.setSslKeyManagerFactory(Tls.keyManagers());
        }
        if (!checked) {
            sentinelConfig.setCheckSentinelsList(false);
        }
        redisson = Redisson.create(config);
    }

    @Override
    void set(String key) {
        redisson.getBucket(key, StringCodec.INSTANCE).set("1");
    }

    private RedisSentinelMasterSlave nodes() {
        return redisson.getRedisNodes(RedisNodes.SENTINEL_MASTER_SLAVE);
    }

    @Override
    int masterPort() {
        return nodes().getMaster().getAddr().getPort();
    }

    private List<Integer> slavePorts() {
        List<Integer> ports = new ArrayList<>();
        for (RedisSlave s : nodes().getSlaves()) {
            ports.add(s.getAddr().getPort());
        }
        return ports;
    }

    /**
     * How many replicas a sentinel offers that Redisson will use: it skips
     * those flagged s_down or disconnected and, by default
     * (checkSlaveStatusWithSyncing), those whose master-link-status is not
     * ok, so a replica still syncing when Redisson starts joins at a later
     * scan. -1 if no sentinel answers.
     */
    private int usableBySentinel() {
        for (RedisSentinel s : nodes().getSentinels()) {
            try {
                int n = 0;
                for (Map<String, String> r : s.getSlaves(MASTER)) {
                    if (!down(r) && !r.getOrDefault("master-link-status", "").contains("err")) {
                        n++;
                    }
                }
                return n;
            } catch (RuntimeException e) {
                // the next sentinel
            }
        }
        return -1;
    }

    @Override
    List<Integer> replicaPorts() throws InterruptedException {
        // Redisson's own view, once it has caught up with what the
        // sentinels offer (its scan runs every second), for up to 5 s.
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
        List<Integer> ports = slavePorts();
        while (System.nanoTime() < deadline && (ports.isEmpty() || ports.size() < usableBySentinel())) {
            Thread.sleep(100);
            ports = slavePorts();
        }
        return ports;
    }

    @Override
    String replicaGet(String key) {
        return (String) redisson.getBucket(key, StringCodec.INSTANCE).get();
    }

    @Override
    String replicaRole() {
        Object role = redisson.getScript(StringCodec.INSTANCE).eval("before:" + name, RScript.Mode.READ_ONLY,
                ROLE_SCRIPT, RScript.ReturnType.VALUE, Collections.singletonList("before:" + name));
        return String.valueOf(role);
    }

    @Override
    void subscribeSwitch(int port) throws Exception {
        RedisClientConfig cfg = new RedisClientConfig();
        cfg.setAddress(address(port));
        if (Tls.on()) {
            cfg.setSslTrustManagerFactory(Tls.trustManagers());
            cfg.setSslKeyManagerFactory(Tls.keyManagers());
        }
        subClient = RedisClient.create(cfg);
        RedisPubSubConnection ps = subClient.connectPubSub();
        ChannelName channel = new ChannelName(SWITCH_CHANNEL);
        // The confirmation comes as a status message; the promise given to
        // subscribe() only ever fails.
        CompletableFuture<Void> subscribed = new CompletableFuture<>();
        ps.addListener(channel, new RedisPubSubListener<Object>() {
            @Override
            public void onStatus(PubSubType type, CharSequence ch) {
                if (type == PubSubType.SUBSCRIBE) {
                    subscribed.complete(null);
                }
            }

            @Override
            public void onMessage(CharSequence ch, Object message) {
                onSwitch(ch.toString(), message);
            }
        });
        CompletableFuture<Void> failed = new CompletableFuture<>();
        failed.whenComplete((r, e) -> {
            if (e != null) {
                subscribed.completeExceptionally(e);
            }
        });
        ps.subscribe(failed, StringCodec.INSTANCE, channel);
        subscribed.get(10, TimeUnit.SECONDS);
    }

    @Override
    void close() {
        if (subClient != null) {
            subClient.shutdownAsync();
        }
        if (redisson != null) {
            redisson.shutdown(0, 2, TimeUnit.SECONDS);
        }
    }
}
