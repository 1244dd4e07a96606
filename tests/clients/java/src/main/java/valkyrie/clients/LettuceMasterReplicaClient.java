package valkyrie.clients;

import java.util.List;
import java.util.Map;

import io.lettuce.core.ReadFrom;
import io.lettuce.core.codec.StringCodec;
import io.lettuce.core.masterreplica.MasterReplica;
import io.lettuce.core.masterreplica.StatefulRedisMasterReplicaConnection;

/**
 * Lettuce {@link MasterReplica} on the Sentinel URI with
 * {@link ReadFrom#REPLICA_PREFERRED}: one connection object, writes routed
 * to the master, read-only commands to a replica. Its topology comes from
 * SENTINEL MASTER and SENTINEL REPLICAS and is refreshed on messages of a
 * {@code PSUBSCRIBE *} that Lettuce itself keeps on every sentinel.
 *
 * Lettuce does not expose that topology, so the master's port is CONFIG GET
 * port (tls-port over TLS) through the connection (CONFIG is not a read-only command for
 * Lettuce, so it goes where writes go; INFO is read-only and would go to a
 * replica), and the replicas are SENTINEL REPLICAS through Lettuce's
 * sentinel API. INFO replication is read-only and routed like the GET.
 */
final class LettuceMasterReplicaClient extends LettuceClient {

    private StatefulRedisMasterReplicaConnection<String, String> conn;

    LettuceMasterReplicaClient(String name, List<Integer> sentinels) {
        super(name, sentinels, false);
    }

    @Override
    void start() {
        createClient();
        conn = MasterReplica.connect(client, StringCodec.UTF8, sentinelUri);
        conn.setReadFrom(ReadFrom.REPLICA_PREFERRED);
    }

    @Override
    void set(String key) {
        conn.sync().set(key, "1");
    }

    @Override
    int masterPort() {
        Map<String, String> config = conn.sync().configGet(PORT_PARAM);
        return Integer.parseInt(config.get(PORT_PARAM));
    }

    @Override
    List<Integer> replicaPorts() {
        return ports(usable(sentinelReplicas()));
    }

    @Override
    String replicaGet(String key) {
        return conn.sync().get(key);
    }

    @Override
    String replicaRole() {
        return infoField(conn.sync().info("replication"), "role");
    }
}
