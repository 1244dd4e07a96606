// ioredis and node-redis v5 Sentinel clients for tests/clients/peers.rs and
// tests/clients/master_name.rs.
// argv: ioredis-sentinel-ports node-redis-sentinel-ports (comma-separated, in
// list order) ioredis-pubsub-port node-redis-pubsub-port.
// The master name is VALKYRIE_MASTER_NAME (default mymaster).
// Prints discovery lines and "ready", waits for a line on stdin, then the
// same client objects write until the new master takes their writes.
// Before "ready", a second node-redis object with a replica pool reads the
// node-redis write back from a replica (node-redis-replica-*), then closes.
const Redis = require('ioredis');
const { createSentinel, createClient } = require('redis');
const readline = require('readline');
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const list = (s) => s.split(',').map((p) => ({ host: '127.0.0.1', port: Number(p) }));
const [ioPorts, nrPorts, ioSub, nrSub] = process.argv.slice(2);
const name = process.env.VALKYRIE_MASTER_NAME || 'mymaster';
async function retry(f) {
  const deadline = Date.now() + 30000;
  for (;;) {
    try { return await f(); } catch (e) { if (Date.now() > deadline) throw e; await sleep(100); }
  }
}
const port = (info) => info.match(/tcp_port:(\d+)/)[1];
(async () => {
  const sentinels = list(ioPorts);
  const m = new Redis({ sentinels, name });
  const r = new Redis({ sentinels, name, role: 'slave' });
  for (const c of [m, r]) c.on('error', () => {});
  await m.set('before:ioredis', '1');
  console.log('ioredis-master', port(await m.info('server')));
  await retry(async () => { if ((await r.get('before:ioredis')) !== '1') throw new Error('not yet'); });
  console.log('ioredis-replica-read', /role:slave/.test(await r.info('replication')));
  console.log('ioredis-replica-port', port(await r.info('server')));
  const sub = new Redis({ host: '127.0.0.1', port: Number(ioSub) });
  sub.on('error', () => {});
  let switches = 0;
  sub.on('message', (ch, msg) => { switches++; console.log('ioredis-switch', msg); });
  await sub.subscribe('+switch-master');
  // RedisSentinel emits 'error' for each root node it cannot reach: an
  // EventEmitter without a listener would throw it.
  const ns = createSentinel({ name, sentinelRootNodes: list(nrPorts) });
  ns.on('error', () => {});
  await ns.connect();
  await ns.set('before:node-redis', '1');
  console.log('node-redis-master', port(await ns.info('server')));
  const nr = createSentinel({ name, sentinelRootNodes: list(nrPorts), replicaPoolSize: 1 });
  nr.on('error', () => {});
  await nr.connect();
  // With a replica pool, node-redis sends read-only commands to replicas only.
  await retry(async () => { if ((await nr.get('before:node-redis')) !== '1') throw new Error('not yet'); });
  console.log('node-redis-replica-read', await nr.get('before:node-redis'));
  console.log('node-redis-replica-role', (await nr.role()).role);
  const nodes = [...nr.getReplicaNodes().keys()].map((n) => n.port).sort((a, b) => a - b);
  console.log('node-redis-replicas', nodes.join(' '));
  await nr.close();
  const nsub = createClient({ socket: { host: '127.0.0.1', port: Number(nrSub) } });
  nsub.on('error', () => {});
  await nsub.connect();
  await nsub.subscribe('+switch-master', (msg) => { switches++; console.log('node-redis-switch', msg); });
  console.log('ready');
  const rl = readline.createInterface({ input: process.stdin });
  await new Promise((res) => rl.once('line', res));
  await retry(() => m.set('after:ioredis', '1'));
  console.log('followed-ioredis', port(await m.info('server')));
  await retry(() => ns.set('after:node-redis', '1'));
  console.log('followed-node-redis', port(await ns.info('server')));
  const until = Date.now() + 10000;
  while (switches < 2 && Date.now() < until) await sleep(50);
  process.exit(0);
})().catch((e) => { console.error(e); process.exit(1); });
