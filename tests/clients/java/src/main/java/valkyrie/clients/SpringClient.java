package valkyrie.clients;

import java.util.ArrayList;
import java.util.List;
import java.util.Properties;

import io.lettuce.core.ClientOptions;
import io.lettuce.core.ReadFrom;
import org.springframework.data.redis.connection.RedisConnection;
import org.springframework.data.redis.connection.RedisNode;
import org.springframework.data.redis.connection.RedisSentinelConfiguration;
import org.springframework.data.redis.connection.RedisSentinelConnection;
import org.springframework.data.redis.connection.RedisServer;
import org.springframework.data.redis.connection.lettuce.LettuceClientConfiguration;
import org.springframework.data.redis.connection.lettuce.LettuceConnectionFactory;
import org.springframework.data.redis.core.RedisCallback;
import org.springframework.data.redis.core.StringRedisTemplate;

/**
 * Spring Data Redis: {@link RedisSentinelConfiguration} on a
 * {@link LettuceConnectionFactory} with readFrom(REPLICA_PREFERRED), used
 * through a {@link StringRedisTemplate}. With a readFrom, Spring opens a
 * Lettuce MasterReplica connection on the Sentinel URI, so it follows a
 * failover the way {@link LettuceMasterReplicaClient} does (Lettuce's own
 * PSUBSCRIBE * on the sentinels). Spring does not take part in the
 * +switch-master check.
 *
 * The master's port is CONFIG GET port (tls-port over TLS) through the template (Lettuce routes
 * CONFIG where writes go); the replicas are Spring's sentinel API
 * (RedisSentinelConnection.replicas); the replica role is INFO replication
 * through the template, routed like the GET.
 *
 * Over TLS ({@link Tls}): useSsl(), with Lettuce's SslOptions from the PEM
 * files in the client options.
 */
final class SpringClient extends Client {

    private LettuceConnectionFactory factory;
    private StringRedisTemplate template;

    SpringClient(String name, List<Integer> sentinels) {
        super(name, sentinels);
    }

    @Override
    boolean subscribes() {
        return false;
    }

    @Override
    void start() {
        RedisSentinelConfiguration sentinelConfig = new RedisSentinelConfiguration().master(MASTER);
        for (int p : sentinels) {
            sentinelConfig.sentinel(HOST, p);
        }
        LettuceClientConfiguration.LettuceClientConfigurationBuilder b = LettuceClientConfiguration.builder()
                .readFrom(ReadFrom.REPLICA_PREFERRED);
        if (Tls.on()) {
            // useSsl() turns SSL on for the sentinels and the data nodes;
            // the CA and the client certificate go in Lettuce's SslOptions.
            b.useSsl();
            b.clientOptions(ClientOptions.builder().sslOptions(LettuceClient.sslOptions()).build());
        }
        LettuceClientConfiguration clientConfig = b.build();
        factory = new LettuceConnectionFactory(sentinelConfig, clientConfig);
        factory.afterPropertiesSet();
        factory.start();
        template = new StringRedisTemplate(factory);
        template.afterPropertiesSet();
    }

    @Override
    void set(String key) {
        template.opsForValue().set(key, "1");
    }

    @Override
    int masterPort() {
        Properties config = template.execute(
                (RedisCallback<Properties>) c -> c.serverCommands().getConfig(PORT_PARAM));
        return Integer.parseInt(config.getProperty(PORT_PARAM));
    }

    @Override
    List<Integer> replicaPorts() throws Exception {
        List<Integer> ports = new ArrayList<>();
        try (RedisSentinelConnection s = factory.getSentinelConnection()) {
            for (RedisServer r : s.replicas(RedisNode.newRedisNode().withName(MASTER).build())) {
                String flags = r.getFlags() == null ? "" : r.getFlags();
                if (!flags.contains("s_down") && !flags.contains("disconnected")) {
                    ports.add(r.getPort());
                }
            }
        }
        return ports;
    }

    @Override
    String replicaGet(String key) {
        return template.opsForValue().get(key);
    }

    @Override
    String replicaRole() {
        Properties info = template.execute(
                (RedisCallback<Properties>) c -> c.serverCommands().info("replication"));
        return info.getProperty("role");
    }

    @Override
    void close() {
        if (factory != null) {
            factory.destroy();
        }
    }
}
