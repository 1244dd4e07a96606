# One Python Sentinel client (redis-py or valkey-py) over TLS, for
# tests/clients/tls.rs: TLS (ssl=True, the test CA, the test client
# certificate) both to the Sentinel port (sentinel_kwargs) and to the data
# nodes.
# argv: module tag sentinel-tls-port pki-dir
# The PKI directory holds ca.crt, client.crt and client.key.
# With port 0 a node's tcp_port is 0: the node a connection reached is told
# by its tls-port (CONFIG GET).
# Prints: master (the address Sentinel gives), master-node (the tls-port of
# the node the master handle wrote to), replica-read, replica-role, ready;
# waits for a line on stdin; then the same master handle writes until the
# new master takes it: followed (what Sentinel gives), followed-node.
import importlib, sys, time

module, tag, port, pki = sys.argv[1:5]
name = 'mymaster'
Sentinel = importlib.import_module(module + '.sentinel').Sentinel
tls = {
    'ssl': True,
    'ssl_ca_certs': pki + '/ca.crt',
    'ssl_certfile': pki + '/client.crt',
    'ssl_keyfile': pki + '/client.key',
}
s = Sentinel([('127.0.0.1', int(port))], socket_timeout=2,
             sentinel_kwargs=dict(socket_timeout=2, **tls))
m = s.master_for(name, socket_timeout=2, **tls)
r = s.slave_for(name, socket_timeout=2, **tls)


def node(c):
    return c.config_get('tls-port')['tls-port']


m.set('before:' + tag, '1')
print('master', s.discover_master(name)[1], flush=True)
print('master-node', node(m), flush=True)
for _ in range(100):
    if r.get('before:' + tag) == b'1':
        break
    time.sleep(0.05)
print('replica-read', (r.get('before:' + tag) or b'').decode(), flush=True)
print('replica-role', r.info('replication')['role'], flush=True)
print('ready', flush=True)
sys.stdin.readline()
deadline = time.time() + 30
while True:
    try:
        m.set('after:' + tag, '1')
        break
    except Exception:
        if time.time() > deadline:
            raise
        time.sleep(0.1)
print('followed', s.discover_master(name)[1], flush=True)
print('followed-node', node(m), flush=True)
