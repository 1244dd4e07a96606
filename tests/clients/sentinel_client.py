# One Python Sentinel client (redis-py or valkey-py) for
# tests/clients/peers.rs and tests/clients/master_name.rs.
# argv: module resp tag sentinel-ports(comma-separated, in list order) pubsub-port
# The master name is VALKYRIE_MASTER_NAME (default mymaster).
# Prints: master, replicas, replica-read, replica-role, ready; waits for a
# line on stdin;
# then the same master handle writes until the new master takes it:
# followed, and (RESP2) the +switch-master message from pubsub-port: switch.
import importlib, os, sys, time

module, resp, tag, ports, sub_port = sys.argv[1:6]
resp, sub_port = int(resp), int(sub_port)
name = os.environ.get('VALKYRIE_MASTER_NAME', 'mymaster')
lib = importlib.import_module(module)
Sentinel = importlib.import_module(module + '.sentinel').Sentinel
sentinels = [('127.0.0.1', int(p)) for p in ports.split(',')]
s = Sentinel(sentinels, socket_timeout=1, sentinel_kwargs={'protocol': resp})
m = s.master_for(name, socket_timeout=1, protocol=resp)
r = s.slave_for(name, socket_timeout=1, protocol=resp)
m.set('before:' + tag, '1')
print('master', s.discover_master(name)[1], flush=True)
print('replicas', ' '.join(str(p) for _, p in s.discover_slaves(name)), flush=True)
for _ in range(100):
    if r.get('before:' + tag) == b'1':
        break
    time.sleep(0.05)
print('replica-read', r.get('before:' + tag).decode(), flush=True)
print('replica-role', r.info('replication')['role'], flush=True)
if resp == 2:
    p = lib.Redis(host='127.0.0.1', port=sub_port).pubsub()
    p.subscribe('+switch-master')
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
if resp == 2:
    deadline = time.time() + 10
    while time.time() < deadline:
        msg = p.get_message(timeout=1)
        if msg and msg['type'] == 'message':
            print('switch', msg['data'].decode(), flush=True)
            break
