package valkyrie.clients;

import java.time.Duration;
import java.util.List;
import java.util.Map;

import io.lettuce.core.ClientOptions;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
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

    void createClient() {
        RedisURI.Builder b = RedisURI.Builder.sentinel(HOST, sentinels.get(0), MASTER);
        for (int p : sentinels.subList(1, sentinels.size())) {
            b.withSentinel(HOST, p);
        }
        sentinelUri = b.build();
        client = RedisClient.create(sentinelUri);
        if (resp2) {
            client.setOptions(ClientOptions.builder().protocolVersion(ProtocolVersion.RESP2).build());
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
                RedisURI.create(first.get("ip"), Integer.parseInt(first.get("port"))));
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
        pubSub = client.connectPubSub(StringCodec.UTF8, RedisURI.create(HOST, port));
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
