package valkyrie.clients;

import java.time.Duration;
import java.util.List;
import java.util.Map;

import io.lettuce.core.ClientOptions;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import io.lettuce.core.SslOptions;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.codec.StringCodec;
import io.lettuce.core.protocol.ProtocolVersion;
import io.lettuce.core.pubsub.RedisPubSubAdapter;
import io.lettuce.core.pubsub.StatefulRedisPubSubConnection;
import io.lettuce.core.sentinel.api.StatefulRedisSentinelConnection;

/**
 * Lettuce {@link RedisClient} on a Sentinel {@link RedisURI}: the master
 * connection is looked up through the sentinels (SENTINEL
 * GET-MASTER-ADDR-BY-NAME) at connect and again at every reconnect; RESP3
 * (HELLO 3, toward the sentinels too) unless {@code resp2}. The replica
 * path is a connection from the same client to the first usable replica of
 * SENTINEL REPLICAS asked through Lettuce's sentinel API. Such a connection
 * subscribes to nothing by itself.
 *
 * Over TLS ({@link Tls}): every URI (the sentinels', the Sentinel URI
 * itself, the replica's, the subscription's) has SSL on with full peer
 * verification, and the client's SslOptions read the PEM files.
 */
class LettuceClient extends Client {

    final boolean resp2;
    RedisClient client;
    RedisURI sentinelUri;
    private StatefulRedisConnection<String, String> master;
    private StatefulRedisConnection<String, String> replica;
    private StatefulRedisPubSubConnection<String, String> pubSub;

    LettuceClient(String name, List<Integer> sentinels, boolean resp2) {
        super(name, sentinels);
        this.resp2 = resp2;
    }

    /**
     * A node's URI: over TLS ({@link Tls}) with SSL on and the peer fully
     * verified (the certificates name 127.0.0.1).
     */
    static RedisURI node(String host, int port) {
        return RedisURI.builder().withHost(host).withPort(port).withSsl(Tls.on()).build();
    }

    /**
     * The client's options: RESP2 when asked; over TLS, SslOptions reading
     * the PEM CA, certificate and key (Lettuce builds the stores itself).
     */
    static ClientOptions.Builder options(boolean resp2) {
        ClientOptions.Builder o = ClientOptions.builder();
        if (resp2) {
            o.protocolVersion(ProtocolVersion.RESP2);
        }
        if (Tls.on()) {
            o.sslOptions(sslOptions());
        }
        return o;
    }

    static SslOptions sslOptions() {
        return SslOptions.builder().jdkSslProvider().trustManager(Tls.CA).keyManager(Tls.CERT, Tls.KEY, null).build();
    }

    /**
     * The Sentinel URI; over TLS every sentinel's URI has SSL on, and so
     * has the URI itself (Lettuce connects to the master it finds with the
     * URI's SSL setting).
     */
    static RedisURI sentinelUri(List<Integer> sentinels) {
        if (!Tls.on()) {
            RedisURI.Builder b = RedisURI.Builder.sentinel(HOST, sentinels.get(0), MASTER);
            for (int p : sentinels.subList(1, sentinels.size())) {
                b.withSentinel(HOST, p);
            }
            return b.build();
        }
        RedisURI.Builder b = RedisURI.builder().withSentinelMasterId(MASTER).withSsl(true);
        for (int p : sentinels) {
            b.withSentinel(node(HOST, p));
        }
        return b.build();
    }

    void createClient() {
        sentinelUri = sentinelUri(sentinels);
        client = RedisClient.create(sentinelUri);
        if (resp2 || Tls.on()) {
            client.setOptions(options(resp2).build());
        }
    }

    @Override
    void start() {
        createClient();
        master = client.connect(StringCodec.UTF8);
    }

    @Override
    void set(String key) {
        master.sync().set(key, "1");
    }

    @Override
    int masterPort() {
        if (Tls.on()) {
            return Integer.parseInt(master.sync().configGet(PORT_PARAM).get(PORT_PARAM));
        }
        return tcpPort(master.sync().info("server"));
    }

    List<Map<String, String>> sentinelReplicas() {
        try (StatefulRedisSentinelConnection<String, String> s = client.connectSentinel(StringCodec.UTF8, sentinelUri)) {
            return s.sync().replicas(MASTER);
        }
    }

    @Override
    List<Integer> replicaPorts() {
        List<Map<String, String>> replicas = usable(sentinelReplicas());
        if (replicas.isEmpty()) {
            throw new IllegalStateException("SENTINEL REPLICAS is empty");
        }
        Map<String, String> first = replicas.get(0);
        replica = client.connect(StringCodec.UTF8,
                node(first.get("ip"), Integer.parseInt(first.get("port"))));
        return ports(replicas);
    }

    @Override
    String replicaGet(String key) {
        return replica.sync().get(key);
    }

    @Override
    String replicaRole() {
        return infoField(replica.sync().info("replication"), "role");
    }

    @Override
    void subscribeSwitch(int port) {
        pubSub = client.connectPubSub(StringCodec.UTF8, node(HOST, port));
        pubSub.addListener(new RedisPubSubAdapter<String, String>() {
            @Override
            public void message(String channel, String message) {
                onSwitch(channel, message);
            }
        });
        pubSub.sync().subscribe(SWITCH_CHANNEL);
    }

    @Override
    void close() {
        if (client != null) {
            client.shutdown(Duration.ZERO, Duration.ofSeconds(2));
        }
    }
}
