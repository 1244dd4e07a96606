// ioredis over TLS for tests/clients/tls.rs: sentinelTLS to the Sentinel
// port, tls (with enableTLSForSentinelMode) to the data nodes, both with the
// test CA and the test client certificate.
// argv: sentinel-tls-port pki-dir (holding ca.crt, client.crt, client.key).
// With port 0 a node's tcp_port is 0: the node a connection reached is told
// by its tls-port (CONFIG GET).
// Prints ioredis-master (the node the master object wrote to),
// ioredis-replica-read, ioredis-replica-role and ready; waits for a line on
// stdin, then the same master object writes until the new master takes its
// writes: followed-ioredis.
const fs = require('fs');
const Redis = require('ioredis');
const readline = require('readline');
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const [port, pki] = process.argv.slice(2);
const name = 'mymaster';
const tls = {
  ca: fs.readFileSync(pki + '/ca.crt'),
  cert: fs.readFileSync(pki + '/client.crt'),
  key: fs.readFileSync(pki + '/client.key'),
};
async function retry(f) {
  const deadline = Date.now() + 30000;
  for (;;) {
    try { return await f(); } catch (e) { if (Date.now() > deadline) throw e; await sleep(100); }
  }
}
const node = async (c) => (await c.config('GET', 'tls-port'))[1];
(async () => {
  const options = {
    sentinels: [{ host: '127.0.0.1', port: Number(port) }],
    name,
    sentinelTLS: tls,
    tls,
    enableTLSForSentinelMode: true,
  };
  const m = new Redis(options);
  const r = new Redis({ ...options, role: 'slave' });
  for (const c of [m, r]) c.on('error', () => {});
  await m.set('before:ioredis', '1');
  console.log('ioredis-master', await node(m));
  await retry(async () => { if ((await r.get('before:ioredis')) !== '1') throw new Error('not yet'); });
  console.log('ioredis-replica-read', await r.get('before:ioredis'));
  console.log('ioredis-replica-role', (await r.info('replication')).match(/role:(\w+)/)[1]);
  console.log('ready');
  const rl = readline.createInterface({ input: process.stdin });
  await new Promise((res) => rl.once('line', res));
  await retry(() => m.set('after:ioredis', '1'));
  console.log('followed-ioredis', await node(m));
  process.exit(0);
})().catch((e) => { console.error(e); process.exit(1); });
