// Valkyrie's status page: renders /api/v1/stream (server-sent events)
// into one card per group, under the planned switchovers (plans.js), and
// shows itself stale when the stream is lost.
'use strict';
(function () {
  const $ = (id) => document.getElementById(id);
  const STALE_AFTER_MS = 3500; // the stream sends something every second
  const MAX_EVENTS = 200;
  const MAX_STEPS = 40;
  let doc = null;
  let lastMessage = 0;
  let staleSince = 0;
  let lastEventId = 0;
  const events = [];
  const userOpen = new Map();

  const esc = (s) => String(s).replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c]));
  const pad = (n, w) => String(n).padStart(w, '0');
  function clock(ms) {
    const d = new Date(ms);
    return pad(d.getHours(), 2) + ':' + pad(d.getMinutes(), 2) + ':' + pad(d.getSeconds(), 2) + '.' + pad(d.getMilliseconds(), 3);
  }
  const dur = (ms) => (ms < 1000 ? Math.round(ms) + ' ms' : (ms / 1000).toFixed(2) + ' s');
  function bytes(n) {
    if (n < 1024) return n + ' B';
    if (n < 1048576) return (n / 1024).toFixed(1) + ' KiB';
    if (n < 1073741824) return (n / 1048576).toFixed(1) + ' MiB';
    return (n / 1073741824).toFixed(1) + ' GiB';
  }

  function setState(state) {
    if (state === 'stale' && document.body.dataset.state !== 'stale') staleSince = Date.now();
    document.body.dataset.state = state;
    $('conn').textContent = state === 'live' ? 'live' : state === 'stale' ? 'stale since ' + clock(staleSince) : 'connecting…';
    $('stale').hidden = state !== 'stale';
  }

  function trouble(g) {
    return g.master.state !== 'up' || g.master.link !== 'up' || g.failover !== null ||
      g.replicas.some((r) => r.state !== 'up' || r.link !== 'up') || (g.readiness !== null && !g.readiness.ready);
  }

  // The readiness verdict: what a failure now would do, or why it would
  // not; a relaxed or refused write fence is a risk worth a badge.
  function verdict(g) {
    const r = g.readiness;
    if (!r) return '';
    const kind = r.ready ? 'ok' : r.reason === 'failover_running' || r.reason === 'election_running' ? 'warn' : 'bad';
    const risk = r.fence.state === 'relaxed' ? ' ' + badge('fence relaxed ' + r.fence.replicas + ' / ' + r.fence.full, 'warn')
      : r.fence.state === 'refused' ? ' ' + badge('fence refused', 'bad') : '';
    return '<p class="verdict ' + kind + '" data-reason="' + esc(r.reason) + '">' + esc(r.text) + risk + '</p>';
  }

  function badge(text, kind) { return '<span class="badge ' + kind + '">' + esc(text) + '</span>'; }
  const stateKind = (s) => (s === 'up' ? 'ok' : s === 'sdown' || s === 'disconnected' ? 'warn' : 'bad');
  const linkKind = (l) => (l === 'up' ? 'ok' : l === 'none' ? '' : 'bad');

  // Lag on a log scale: 1 B to 1 GiB across the bar.
  function lagBar(lag) {
    const width = 120;
    const w = lag <= 0 ? 0 : Math.min(width, Math.max(2, width * Math.log10(lag + 1) / 9));
    const color = lag < 1048576 ? '#1f8b4c' : lag < 104857600 ? '#c77c02' : '#c62828';
    return '<svg class="lag" width="' + width + '" height="10" role="img" aria-label="lag ' + lag + ' bytes">' +
      '<rect width="' + width + '" height="10" fill="#eef1f4"></rect>' +
      '<rect width="' + w.toFixed(1) + '" height="10" fill="' + color + '"></rect></svg>';
  }

  // One failover: each step a row on a shared time axis, a bar from the
  // previous step to it, so where the time went is visible at a glance.
  function timeline(t) {
    const steps = t.steps.slice(0, MAX_STEPS);
    const t0 = t.start_ms;
    const end = t.end_ms !== null ? t.end_ms : Math.max(Date.now(), steps[steps.length - 1].time_ms);
    const span = Math.max(1, end - t0);
    const labelW = 250, plotW = 190, rowH = 15, top = 4;
    const x = (ms) => labelW + (ms - t0) / span * plotW;
    const h = top + steps.length * rowH + 18;
    let svg = '<svg class="timeline" data-steps="' + steps.length + '" data-outcome="' + esc(t.outcome) +
      '" width="' + (labelW + plotW + 10) + '" height="' + h + '" role="img">';
    let prev = t0;
    steps.forEach((s, i) => {
      const y = top + i * rowH;
      const x0 = x(prev), x1 = x(s.time_ms);
      svg += '<text x="0" y="' + (y + 11) + '">' + esc(s.channel) + '</text>';
      svg += '<text class="muted" x="' + (labelW - 6) + '" y="' + (y + 11) + '" text-anchor="end">+' + esc(dur(s.time_ms - t0)) + '</text>';
      svg += '<rect x="' + x0.toFixed(1) + '" y="' + (y + 3) + '" width="' + Math.max(1, x1 - x0).toFixed(1) + '" height="9" fill="#9db6e3"></rect>';
      svg += '<circle cx="' + x1.toFixed(1) + '" cy="' + (y + 7.5) + '" r="3" fill="#2f5fb3"><title>' + esc(s.payload) + '</title></circle>';
      prev = s.time_ms;
    });
    const ay = top + steps.length * rowH + 4;
    svg += '<line class="axis" x1="' + labelW + '" x2="' + (labelW + plotW) + '" y1="' + ay + '" y2="' + ay + '" stroke="#d9dee4"></line>';
    svg += '<text class="muted" x="' + labelW + '" y="' + (ay + 12) + '">0</text>';
    svg += '<text class="muted" x="' + (labelW + plotW) + '" y="' + (ay + 12) + '" text-anchor="end">' + esc(dur(span)) + '</text>';
    return svg + '</svg>';
  }

  // What each failover this daemon ran may have cost: "≥" while the old
  // master's final offset is unknown.
  function atRisk(g) {
    if (g.at_risk.length === 0) return '';
    const rows = g.at_risk.slice(-5).reverse().map((r) => '<tr data-epoch="' + r.epoch + '"><td class="num">' + r.epoch +
      '</td><td class="addr">' + esc(r.promoted) + '</td><td class="num">' + (r.complete ? '' : '≥ ') + esc(bytes(r.bytes_at_risk)) +
      '</td><td>' + esc(r.fenced) + '</td></tr>').join('');
    return '<div class="timeline-title">bytes at risk</div><table><tr><th>epoch</th><th>promoted</th><th>at risk</th><th>old master</th></tr>' +
      rows + '</table>';
  }

  function failovers(g) {
    if (g.failovers.length === 0) return '<div class="empty">no failover seen since the daemon started</div>' + atRisk(g);
    return g.failovers.slice(-5).reverse().map((t) => {
      const took = (t.end_ms !== null ? t.end_ms : Date.now()) - t.start_ms;
      return '<div class="timeline-title">' + esc(clock(t.start_ms)) + ' — ' +
        badge(t.outcome, t.outcome === 'done' ? 'ok' : t.outcome === 'running' ? 'warn' : 'bad') +
        ' took ' + esc(dur(took)) + '</div>' + timeline(t);
    }).join('') + atRisk(g);
  }

  // Config epochs over time: a step line, one point per adoption.
  function epochs(g) {
    const list = g.epochs;
    if (list.length === 0) return '';
    const w = 440, h = 46, left = 8, right = 8;
    const t0 = list[0].time_ms, t1 = Math.max(Date.now(), list[list.length - 1].time_ms);
    const e0 = list[0].epoch, e1 = list[list.length - 1].epoch;
    const x = (ms) => left + (ms - t0) / Math.max(1, t1 - t0) * (w - left - right);
    const y = (e) => (e1 === e0 ? 20 : 34 - (e - e0) / (e1 - e0) * 26);
    let path = 'M' + x(list[0].time_ms).toFixed(1) + ' ' + y(list[0].epoch).toFixed(1);
    list.slice(1).forEach((p) => {
      path += ' H' + x(p.time_ms).toFixed(1) + ' V' + y(p.epoch).toFixed(1);
    });
    path += ' H' + x(t1).toFixed(1);
    let svg = '<svg class="epochs" width="' + w + '" height="' + h + '" role="img"><path d="' + path + '" fill="none" stroke="#2f5fb3" stroke-width="2"></path>';
    list.forEach((p) => {
      svg += '<circle cx="' + x(p.time_ms).toFixed(1) + '" cy="' + y(p.epoch).toFixed(1) + '" r="3" fill="#2f5fb3"><title>epoch ' +
        p.epoch + ': ' + esc(p.master) + ' at ' + esc(clock(p.time_ms)) + '</title></circle>';
    });
    svg += '</svg>';
    const rows = list.slice(-5).reverse().map((p) => '<tr><td class="num">' + p.epoch + '</td><td class="addr">' + esc(p.master) +
      '</td><td>' + esc(clock(p.time_ms)) + '</td></tr>').join('');
    return svg + '<table><tr><th>epoch</th><th>master</th><th>seen at</th></tr>' + rows + '</table>';
  }

  function card(g, openByDefault) {
    const open = userOpen.has(g.name) ? userOpen.get(g.name) : openByDefault || g.failovers.some((t) => t.end_ms === null);
    const flags = g.flags.filter((f) => f !== 'master').map((f) => badge(f, f === 'paused' ? 'warn' : 'bad')).join(' ');
    const rows = ['<tr class="master" data-role="master" data-addr="' + esc(g.master.addr) + '"><td>master</td><td class="addr">' + esc(g.master.addr) +
      '</td><td>' + badge(g.master.state, stateKind(g.master.state)) + '</td><td>' + badge(g.master.link, linkKind(g.master.link)) +
      '</td><td class="num">' + g.master.offset + '</td><td></td><td></td></tr>'];
    g.replicas.forEach((r) => {
      rows.push('<tr data-role="replica" data-addr="' + esc(r.addr) + '"><td>' + esc(r.role) + '</td><td class="addr">' + esc(r.addr) +
        '</td><td>' + badge(r.state, stateKind(r.state)) + '</td><td>' + badge(r.link, linkKind(r.link)) +
        '</td><td class="num">' + r.offset + '</td><td>' + lagBar(r.lag) + ' <span class="num">' + esc(bytes(r.lag)) +
        '</span></td><td class="num">' + r.priority + '</td></tr>');
    });
    const labels = Object.entries(g.labels || {}).map(([k, v]) => '<span class="label">' + esc(k) + '=' + esc(v) + '</span>').join(' ');
    return '<article class="card' + (trouble(g) ? ' trouble' : '') + '" data-group="' + esc(g.name) + '">' +
      '<h2>' + esc(g.name) + ' <span class="epoch">epoch ' + g.epoch + ' · quorum ' + g.quorum + ' · ' + g.sentinels + ' peer sentinels</span> ' +
      (g.failover ? badge('failover: ' + g.failover, 'warn') : '') + ' ' + flags +
      (g.write_fence ? ' ' + badge('write fence ' + g.write_fence.replicas + ' / ' + g.write_fence.lag_secs + ' s', 'ok') : '') + '</h2>' +
      (labels ? '<div class="labels">' + labels + '</div>' : '') +
      verdict(g) +
      '<table><tr><th>role</th><th>address</th><th>state</th><th>link</th><th>offset</th><th>lag</th><th>prio</th></tr>' + rows.join('') + '</table>' +
      '<details data-group="' + esc(g.name) + '"' + (open ? ' open' : '') + '><summary>failovers (' + g.failovers.length + ') and config epochs</summary>' +
      failovers(g) + '<div class="timeline-title">config epochs</div>' + epochs(g) + '</details></article>';
  }

  function render() {
    if (!doc) return;
    const q = $('filter').value.trim().toLowerCase();
    const onlyTrouble = $('troubled').checked;
    const matches = doc.groups.filter((g) => (!q || g.name.toLowerCase().includes(q) || g.master.addr.includes(q) ||
      g.replicas.some((r) => r.addr.includes(q)) ||
      Object.entries(g.labels || {}).some(([k, v]) => (k + '=' + v).toLowerCase().includes(q))) && (!onlyTrouble || trouble(g)));
    const troubled = doc.groups.filter(trouble).length;
    $('summary').textContent = doc.groups.length + ' groups, ' + troubled + ' in trouble' +
      (matches.length !== doc.groups.length ? ', ' + matches.length + ' shown' : '');
    $('tilt').hidden = !doc.tilt;
    const plans = window.valkyriePlans(doc.plans, { esc, badge, dur, clock });
    $('plans').innerHTML = plans;
    $('plans').hidden = plans === '';
    const openByDefault = matches.length <= 12;
    $('groups').innerHTML = matches.map((g) => card(g, openByDefault)).join('') || '<div class="empty">no group matches</div>';
  }

  function renderEvents() {
    $('events').innerHTML = events.slice().reverse().map((e) => '<li><span>' + esc(clock(e.time_ms)) + '</span> <span class="ch">' +
      esc(e.channel) + '</span> ' + esc(e.payload) + '</li>').join('');
  }

  function addEvent(e) {
    if (e.id <= lastEventId) return;
    lastEventId = e.id;
    events.push(e);
    if (events.length > MAX_EVENTS) events.shift();
  }

  function connect() {
    const source = new EventSource('/api/v1/stream');
    const seen = () => { lastMessage = Date.now(); };
    source.addEventListener('groups', (m) => {
      seen();
      doc = JSON.parse(m.data);
      setState('live');
      render();
    });
    source.addEventListener('event', (m) => {
      seen();
      addEvent(JSON.parse(m.data));
      renderEvents();
    });
    source.addEventListener('ping', seen);
    source.onerror = () => {
      // EventSource reconnects by itself; until a new document arrives,
      // what is on screen is not current.
      if (doc !== null) setState('stale');
    };
  }

  function watchdog() {
    if (document.body.dataset.state === 'live' && Date.now() - lastMessage > STALE_AFTER_MS) setState('stale');
    if (document.body.dataset.state === 'connecting' && doc === null && Date.now() - started > STALE_AFTER_MS) setState('stale');
  }

  const started = Date.now();
  $('filter').addEventListener('input', render);
  $('troubled').addEventListener('change', render);
  $('groups').addEventListener('toggle', (e) => {
    const g = e.target.dataset && e.target.dataset.group;
    if (g !== undefined) userOpen.set(g, e.target.open);
  }, true);
  fetch('/api/v1/events').then((r) => (r.ok ? r.json() : null)).then((body) => {
    if (body) { body.events.forEach(addEvent); renderEvents(); }
  }).catch(() => {});
  connect();
  setInterval(watchdog, 500);
}());
