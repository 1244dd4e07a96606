package valkyrie.clients;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;

/**
 * One Sentinel client library, driven through both phases by {@link Main}.
 * Each implementation keeps the same library objects from {@link #start()}
 * to {@link #close()}.
 */
abstract class Client {

    /** The master name: VALKYRIE_MASTER_NAME, "mymaster" by default. */
    static final String MASTER = masterName();
    static final String HOST = "127.0.0.1";
    static final String SWITCH_CHANNEL = "+switch-master";
    /**
     * The CONFIG parameter holding the port the clients reach a node on:
     * over TLS the nodes listen on their tls-port only ({@code port 0}).
     */
    static final String PORT_PARAM = Tls.on() ? "tls-port" : "port";

    final String name;
    final List<Integer> sentinels;
    /** The first {@code +switch-master} payload seen by {@link #subscribeSwitch(int)}. */
    final CompletableFuture<String> switchMessage = new CompletableFuture<>();

    Client(String name, List<Integer> sentinels) {
        this.name = name;
        this.sentinels = sentinels;
    }

    /** Builds the library's client objects (connects). */
    abstract void start() throws Exception;

    /** {@code SET key 1} through the master path. */
    abstract void set(String key) throws Exception;

    /** The port of the master the master path writes to. */
    abstract int masterPort() throws Exception;

    /** The replicas' ports as the library found them. */
    abstract List<Integer> replicaPorts() throws Exception;

    /** {@code GET key} through the replica path. */
    abstract String replicaGet(String key) throws Exception;

    /** The role of the node serving the replica path, or "unknown". */
    abstract String replicaRole() throws Exception;

    /** Whether this client takes part in the {@code +switch-master} check. */
    boolean subscribes() {
        return true;
    }

    /**
     * Subscribes to {@code +switch-master} on the sentinel at {@code port}
     * through the library's API, completing {@link #switchMessage}; returns
     * once the subscription is confirmed.
     */
    void subscribeSwitch(int port) throws Exception {
    }

    /** Releases every library object; may be slow, never needed for correctness. */
    abstract void close();

    void out(String text) {
        Main.out(name + " " + text);
    }

    void onSwitch(String channel, Object message) {
        if (SWITCH_CHANNEL.equals(channel) && message != null) {
            switchMessage.complete(message.toString());
        }
    }

    static String masterName() {
        String name = System.getenv("VALKYRIE_MASTER_NAME");
        return name == null || name.isEmpty() ? "mymaster" : name;
    }

    /** {@code key:value} from an INFO reply, or null. */
    static String infoField(String info, String key) {
        for (String line : info.split("\r?\n")) {
            if (line.startsWith(key + ":")) {
                return line.substring(key.length() + 1).trim();
            }
        }
        return null;
    }

    static int tcpPort(String info) {
        String p = infoField(info, "tcp_port");
        if (p == null) {
            throw new IllegalStateException("no tcp_port in INFO server");
        }
        return Integer.parseInt(p);
    }

    /** True for a SENTINEL REPLICAS entry that Sentinel considers unusable. */
    static boolean down(Map<String, String> replica) {
        String flags = replica.getOrDefault("flags", "");
        return flags.contains("s_down") || flags.contains("o_down") || flags.contains("disconnected");
    }

    /** The usable replicas of a SENTINEL REPLICAS reply (all of them if none is usable). */
    static List<Map<String, String>> usable(List<Map<String, String>> replicas) {
        List<Map<String, String>> up = new ArrayList<>();
        for (Map<String, String> r : replicas) {
            if (!down(r)) {
                up.add(r);
            }
        }
        return up.isEmpty() ? replicas : up;
    }

    static List<Integer> ports(List<Map<String, String>> replicas) {
        List<Integer> ports = new ArrayList<>();
        for (Map<String, String> r : replicas) {
            ports.add(Integer.parseInt(r.get("port")));
        }
        return ports;
    }

    int lastSentinel() {
        return sentinels.get(sentinels.size() - 1);
    }
}
