// valkyrie-go-clients drives go-redis v9 Sentinel clients through a master
// failover, for tests/clients/java_go.rs, tests/clients/tls_java_go.rs
// (over TLS) and tests/clients/master_name.rs.
//
// Usage: valkyrie-go-clients <sentinel-ports> <clients>
//
//	<sentinel-ports>  comma-separated ports of sentinels on 127.0.0.1, in the
//	                  order given to the clients
//	<clients>         comma-separated names: goredis-resp3, goredis-resp2,
//	                  goredis-cluster
//
// The master name is VALKYRIE_MASTER_NAME, "mymaster" by default.
//
// TLS: when VALKYRIE_CLIENT_TLS_CA names a PEM CA file, every connection
// (to the sentinels and to the data nodes) is TLS, trusting that CA and
// presenting the client certificate VALKYRIE_CLIENT_TLS_CERT with its key
// VALKYRIE_CLIENT_TLS_KEY (PEM). go-redis has one TLSConfig for the
// sentinels and the nodes; its ServerName is left empty, so each dial
// verifies the address it dials (127.0.0.1, an IP SAN of the test
// certificates), except for goredis-cluster (see newClusterDriver).
//
// Every client runs in its own goroutine. Each stdout line starts with the
// client name (except the final "done"); logs, go-redis's included, go to
// stderr.
//
// Phase 1, per client:
//
//	<client> master <port>          after SET before:<client> 1 on the master path
//	<client> replicas <p1> <p2>     replicas as go-redis sees them
//	<client> replica-read <value>   GET before:<client> on the replica path
//	<client> replica-role <role>    ROLE of the node that served that GET
//	<client> ready                  after subscribing to +switch-master on the
//	                                last sentinel of the list
//
// Then one line is read from stdin ("go", sent right after the master is
// killed). Phase 2, all clients in parallel with the same client objects:
//
//	<client> recovered-ms <n>       first acknowledged SET after:<client> 1
//	<client> followed <port>        master the client now writes to
//	<client> switch <payload>       the +switch-master message
//	<client> done
//
// A client that gives up prints "<client> failed <error>" instead. Last line:
// "done"; exit status 1 if any client failed.
//
// Timeouts: DialTimeout, ReadTimeout and WriteTimeout are 1 s (go-redis's
// defaults are 5 s and 3 s), and go-redis's own command retries are off
// (MaxRetries -1): the driver retries a failed write itself every 20 ms, so
// the time measured is the time go-redis needs to find the new master, not
// its retry backoff. Dial retries stay at go-redis's default (5 attempts,
// 100 ms apart).
package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// masterName is the name the clients ask the sentinels for.
var masterName = func() string {
	if name := os.Getenv("VALKYRIE_MASTER_NAME"); name != "" {
		return name
	}
	return "mymaster"
}()

const (
	ioTimeout    = time.Second
	phase1Limit  = 30 * time.Second
	replicaLimit = 5 * time.Second
	writeLimit   = 60 * time.Second
	writePause   = 20 * time.Millisecond
	switchLimit  = 15 * time.Second
)

// out serializes stdout: one Write per line, so lines never interleave.
var outMu sync.Mutex

func emit(format string, args ...any) {
	line := fmt.Sprintf(format, args...) + "\n"
	outMu.Lock()
	defer outMu.Unlock()
	_, _ = os.Stdout.WriteString(line)
}

var (
	logMu     sync.Mutex
	logRecent = map[string]time.Time{}
)

// logf writes a line to stderr; the same message is written at most once a
// second (retry loops repeat theirs every few milliseconds).
func logf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	now := time.Now()
	logMu.Lock()
	defer logMu.Unlock()
	if last, ok := logRecent[msg]; ok && now.Sub(last) < time.Second {
		return
	}
	logRecent[msg] = now
	fmt.Fprintf(os.Stderr, "%s valkyrie-go-clients: %s\n", now.Format("15:04:05.000"), msg)
}

type stderrLogger struct{}

func (stderrLogger) Printf(_ context.Context, format string, v ...interface{}) {
	logf("go-redis: "+format, v...)
}

func oneLine(err error) string {
	s := strings.Join(strings.Fields(err.Error()), " ")
	if s == "" {
		return "error"
	}
	return s
}

// driver is one named client: a master path and a replica path.
type driver interface {
	// set writes key=1 through the master path.
	set(ctx context.Context, key string) error
	// masterPort is the port of the master the master path writes to.
	masterPort(ctx context.Context) (string, error)
	// replicas lists the replica ports as go-redis sees them.
	replicas(ctx context.Context) ([]string, error)
	// replicaRead reads key through the replica path; it returns the value
	// and the role of the node that served it.
	replicaRead(ctx context.Context, key string) (string, string, error)
	// protocol is the RESP version for the explicit sentinel subscription.
	protocol() int
}

// tlsConfig is nil (plain connections) unless VALKYRIE_CLIENT_TLS_CA is set.
var tlsConfig *tls.Config

// loadTLS reads the TLS settings from the environment (see the top).
func loadTLS() (*tls.Config, error) {
	ca := os.Getenv("VALKYRIE_CLIENT_TLS_CA")
	if ca == "" {
		return nil, nil
	}
	pem, err := os.ReadFile(ca)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s: no PEM certificate", ca)
	}
	certFile, keyFile := os.Getenv("VALKYRIE_CLIENT_TLS_CERT"), os.Getenv("VALKYRIE_CLIENT_TLS_KEY")
	if certFile == "" || keyFile == "" {
		return nil, errors.New("VALKYRIE_CLIENT_TLS_CA is set: VALKYRIE_CLIENT_TLS_CERT and VALKYRIE_CLIENT_TLS_KEY are needed too")
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	return &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}

func failoverOptions(sentinels []string, protocol int) *redis.FailoverOptions {
	return &redis.FailoverOptions{
		MasterName:    masterName,
		SentinelAddrs: sentinels,
		Protocol:      protocol,
		DialTimeout:   ioTimeout,
		ReadTimeout:   ioTimeout,
		WriteTimeout:  ioTimeout,
		MaxRetries:    -1,
		TLSConfig:     tlsConfig,
	}
}

// sentinelOptions are the options of a SentinelClient to addr.
func sentinelOptions(addr string, protocol int) *redis.Options {
	return &redis.Options{
		Addr: addr, Protocol: protocol,
		DialTimeout: ioTimeout, ReadTimeout: ioTimeout, WriteTimeout: ioTimeout,
		TLSConfig: tlsConfig,
	}
}

func tcpPort(info string) (string, error) {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "tcp_port:"); ok {
			return v, nil
		}
	}
	return "", errors.New("no tcp_port in INFO server")
}

// nodePort is the port clients reach the node of c on: INFO server's
// tcp_port, or over TLS its tls-port (the nodes listen on TLS only, port 0).
func nodePort(ctx context.Context, c *redis.Client) (string, error) {
	if tlsConfig != nil {
		conf, err := c.ConfigGet(ctx, "tls-port").Result()
		if err != nil {
			return "", err
		}
		if p, ok := conf["tls-port"]; ok {
			return p, nil
		}
		return "", errors.New("no tls-port in CONFIG GET tls-port")
	}
	info, err := c.Info(ctx, "server").Result()
	if err != nil {
		return "", err
	}
	return tcpPort(info)
}

func portOf(addr string) string {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	return port
}

func roleOf(v any) (string, error) {
	parts, ok := v.([]any)
	if !ok || len(parts) == 0 {
		return "", fmt.Errorf("unexpected ROLE reply %#v", v)
	}
	role, ok := parts[0].(string)
	if !ok {
		return "", fmt.Errorf("unexpected ROLE reply %#v", v)
	}
	return role, nil
}

// ---- goredis-resp2 / goredis-resp3: NewFailoverClient ----

type failoverDriver struct {
	proto     int
	sentinels []string
	master    *redis.Client // NewFailoverClient
	replica   *redis.Client // NewFailoverClient with ReplicaOnly
}

func newFailoverDriver(sentinels []string, protocol int) *failoverDriver {
	replicaOpt := failoverOptions(sentinels, protocol)
	replicaOpt.ReplicaOnly = true
	return &failoverDriver{
		proto:     protocol,
		sentinels: sentinels,
		master:    redis.NewFailoverClient(failoverOptions(sentinels, protocol)),
		replica:   redis.NewFailoverClient(replicaOpt),
	}
}

func (d *failoverDriver) protocol() int { return d.proto }

func (d *failoverDriver) set(ctx context.Context, key string) error {
	return d.master.Set(ctx, key, "1", 0).Err()
}

func (d *failoverDriver) masterPort(ctx context.Context) (string, error) {
	return nodePort(ctx, d.master)
}

// replicas asks the sentinels, in list order, with go-redis's SentinelClient,
// and keeps the replicas go-redis itself would use (not s_down, o_down or
// disconnected).
func (d *failoverDriver) replicas(ctx context.Context) ([]string, error) {
	var lastErr error
	for _, addr := range d.sentinels {
		sc := redis.NewSentinelClient(sentinelOptions(addr, d.proto))
		nodes, err := sc.Replicas(ctx, masterName).Result()
		_ = sc.Close()
		if err != nil {
			lastErr = err
			continue
		}
		var ports []string
		for _, n := range nodes {
			if hasFlag(n["flags"], "s_down", "o_down", "disconnected") {
				continue
			}
			if n["port"] != "" {
				ports = append(ports, n["port"])
			}
		}
		sort.Strings(ports)
		return ports, nil
	}
	return nil, lastErr
}

func hasFlag(flags string, want ...string) bool {
	for _, f := range strings.Split(flags, ",") {
		for _, w := range want {
			if f == w {
				return true
			}
		}
	}
	return false
}

// replicaRead uses one connection of the ReplicaOnly client for both GET and
// ROLE, so the role is the one of the node that served the GET.
func (d *failoverDriver) replicaRead(ctx context.Context, key string) (string, string, error) {
	cn := d.replica.Conn()
	defer cn.Close()
	val, err := cn.Get(ctx, key).Result()
	if err != nil {
		return "", "", err
	}
	role, err := cn.Do(ctx, "ROLE").Result()
	if err != nil {
		return val, "", err
	}
	r, err := roleOf(role)
	return val, r, err
}

// ---- goredis-cluster: NewFailoverClusterClient ----

type clusterDriver struct {
	rw      *redis.ClusterClient // RouteRandomly
	replica *redis.ClusterClient // ReplicaOnly

	mu     sync.Mutex
	served map[string]*redis.Client // key -> node client of replica that answered its GET
}

func newClusterDriver(sentinels []string) *clusterDriver {
	rwOpt := failoverOptions(sentinels, 3)
	rwOpt.RouteRandomly = true
	replicaOpt := failoverOptions(sentinels, 3)
	replicaOpt.ReplicaOnly = true
	if tlsConfig != nil {
		// NewFailoverClusterClient builds its slot map without an origin
		// address, and so rewrites every loopback node address it gets
		// from the sentinels to an empty host (":port"; go-redis's
		// replaceLoopbackHost). A plain dial of ":port" reaches the local
		// host anyway; a TLS dial cannot infer a server name from it and
		// fails ("either ServerName or InsecureSkipVerify must be
		// specified"). The server name is given, then: every node here is
		// on 127.0.0.1, an IP SAN of the test certificates.
		named := tlsConfig.Clone()
		named.ServerName = "127.0.0.1"
		rwOpt.TLSConfig = named
		replicaOpt.TLSConfig = named
	}
	d := &clusterDriver{
		rw:      redis.NewFailoverClusterClient(rwOpt),
		replica: redis.NewFailoverClusterClient(replicaOpt),
		served:  map[string]*redis.Client{},
	}
	d.replica.OnNewNode(func(node *redis.Client) {
		node.AddHook(servedHook{d: d, node: node})
	})
	return d
}

// servedHook records which node client answered a GET.
type servedHook struct {
	d    *clusterDriver
	node *redis.Client
}

func (h servedHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h servedHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if err == nil && cmd.Name() == "get" && len(cmd.Args()) > 1 {
			h.d.mu.Lock()
			h.d.served[fmt.Sprint(cmd.Args()[1])] = h.node
			h.d.mu.Unlock()
		}
		return err
	}
}

func (h servedHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (d *clusterDriver) protocol() int { return 3 }

func (d *clusterDriver) set(ctx context.Context, key string) error {
	return d.rw.Set(ctx, key, "1", 0).Err()
}

func (d *clusterDriver) masterPort(ctx context.Context) (string, error) {
	node, err := d.rw.MasterForKey(ctx, "after")
	if err != nil {
		return "", err
	}
	return nodePort(ctx, node)
}

// replicas are the replica nodes of the ReplicaOnly cluster client's state
// (built from SENTINEL REPLICAS by go-redis).
func (d *clusterDriver) replicas(ctx context.Context) ([]string, error) {
	var mu sync.Mutex
	var ports []string
	err := d.replica.ForEachSlave(ctx, func(_ context.Context, node *redis.Client) error {
		mu.Lock()
		ports = append(ports, portOf(node.Options().Addr))
		mu.Unlock()
		return nil
	})
	sort.Strings(ports)
	return ports, err
}

func (d *clusterDriver) replicaRead(ctx context.Context, key string) (string, string, error) {
	val, err := d.replica.Get(ctx, key).Result()
	if err != nil {
		return "", "", err
	}
	d.mu.Lock()
	node := d.served[key]
	d.mu.Unlock()
	if node == nil {
		return val, "", errors.New("no node recorded for the GET")
	}
	role, err := node.Do(ctx, "ROLE").Result()
	if err != nil {
		return val, "", err
	}
	r, err := roleOf(role)
	return val, r, err
}

// ---- the run ----

type run struct {
	name      string
	d         driver
	sentinels []string
	switches  <-chan *redis.Message
	failed    bool
}

func (r *run) fail(err error) {
	r.failed = true
	emit("%s failed %s", r.name, oneLine(err))
}

// retry calls f until it succeeds or limit passes.
func retry(who string, limit, pause time.Duration, f func() error) error {
	deadline := time.Now().Add(limit)
	for {
		err := f()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		logf("%s: %v (retrying)", who, err)
		time.Sleep(pause)
	}
}

func (r *run) phase1() {
	ctx := context.Background()
	before := "before:" + r.name
	if err := retry(r.name, phase1Limit, 100*time.Millisecond, func() error { return r.d.set(ctx, before) }); err != nil {
		r.fail(fmt.Errorf("SET %s: %w", before, err))
		return
	}
	var port string
	if err := retry(r.name, phase1Limit, 100*time.Millisecond, func() (err error) {
		port, err = r.d.masterPort(ctx)
		return err
	}); err != nil {
		r.fail(fmt.Errorf("master port: %w", err))
		return
	}
	emit("%s master %s", r.name, port)

	var reps []string
	if err := retry(r.name, phase1Limit, 100*time.Millisecond, func() (err error) {
		reps, err = r.d.replicas(ctx)
		if err == nil && len(reps) == 0 {
			err = errors.New("no replicas")
		}
		return err
	}); err != nil {
		r.fail(fmt.Errorf("replicas: %w", err))
		return
	}
	emit("%s replicas %s", r.name, strings.Join(reps, " "))

	var val, role string
	if err := retry(r.name, replicaLimit, 50*time.Millisecond, func() (err error) {
		val, role, err = r.d.replicaRead(ctx, before)
		if err == nil && val != "1" {
			err = fmt.Errorf("GET %s returned %q", before, val)
		}
		if errors.Is(err, redis.Nil) {
			err = fmt.Errorf("GET %s returned nil", before)
		}
		return err
	}); err != nil {
		r.fail(fmt.Errorf("replica read: %w", err))
		return
	}
	emit("%s replica-read %s", r.name, val)
	emit("%s replica-role %s", r.name, role)

	// The failover clients subscribe to +switch-master (and
	// +replica-reconf-done) on their own; this explicit subscription on the
	// last sentinel of the list is for the test to see the message.
	sc := redis.NewSentinelClient(sentinelOptions(r.sentinels[len(r.sentinels)-1], r.d.protocol()))
	ps := sc.Subscribe(ctx, "+switch-master")
	if err := retry(r.name, 5*time.Second, 100*time.Millisecond, func() error {
		sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_, err := ps.Receive(sctx)
		return err
	}); err != nil {
		r.fail(fmt.Errorf("SUBSCRIBE +switch-master: %w", err))
		return
	}
	r.switches = ps.Channel()
	emit("%s ready", r.name)
}

func (r *run) phase2(start time.Time) {
	defer emit("%s done", r.name)
	ctx := context.Background()
	after := "after:" + r.name
	deadline := start.Add(writeLimit)
	for {
		err := r.d.set(ctx, after)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			r.fail(fmt.Errorf("SET %s: %w", after, err))
			return
		}
		logf("%s: SET %s: %v", r.name, after, err)
		time.Sleep(writePause)
	}
	emit("%s recovered-ms %d", r.name, time.Since(start).Milliseconds())

	var port string
	if err := retry(r.name, 10*time.Second, writePause, func() (err error) {
		port, err = r.d.masterPort(ctx)
		return err
	}); err != nil {
		r.fail(fmt.Errorf("master port after failover: %w", err))
		return
	}
	emit("%s followed %s", r.name, port)

	select {
	case msg, ok := <-r.switches:
		if !ok {
			r.fail(errors.New("+switch-master subscription closed"))
			return
		}
		emit("%s switch %s", r.name, msg.Payload)
	case <-time.After(switchLimit):
		r.fail(errors.New("no +switch-master message within 15 s"))
	}
}

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: valkyrie-go-clients <sentinel-ports> <clients>")
		os.Exit(2)
	}
	redis.SetLogger(stderrLogger{})
	var err error
	if tlsConfig, err = loadTLS(); err != nil {
		fmt.Fprintf(os.Stderr, "TLS settings: %v\n", err)
		os.Exit(2)
	}

	var sentinels []string
	for _, p := range strings.Split(os.Args[1], ",") {
		sentinels = append(sentinels, net.JoinHostPort("127.0.0.1", strings.TrimSpace(p)))
	}
	var runs []*run
	for _, name := range strings.Split(os.Args[2], ",") {
		var d driver
		switch name {
		case "goredis-resp3":
			d = newFailoverDriver(sentinels, 3)
		case "goredis-resp2":
			d = newFailoverDriver(sentinels, 2)
		case "goredis-cluster":
			d = newClusterDriver(sentinels)
		default:
			fmt.Fprintf(os.Stderr, "unknown client %q\n", name)
			os.Exit(2)
		}
		runs = append(runs, &run{name: name, d: d, sentinels: sentinels})
	}

	var wg sync.WaitGroup
	for _, r := range runs {
		wg.Add(1)
		go func() { defer wg.Done(); r.phase1() }()
	}
	wg.Wait()
	for _, r := range runs {
		if r.failed {
			emit("done")
			os.Exit(1)
		}
	}

	line, err := bufio.NewReader(os.Stdin).ReadString('\n')
	start := time.Now()
	if err != nil && line == "" {
		logf("stdin: %v", err)
		emit("done")
		os.Exit(1)
	}
	logf("read %q", strings.TrimSpace(line))

	for _, r := range runs {
		wg.Add(1)
		go func() { defer wg.Done(); r.phase2(start) }()
	}
	wg.Wait()
	emit("done")
	for _, r := range runs {
		if r.failed {
			os.Exit(1)
		}
	}
}
