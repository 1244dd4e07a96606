// Valkyrie's status page, the planned switchovers (`plans` of the groups
// document, newest first): the newest plan in full, one line per older
// one. Returns HTML; every string from the document goes through `h.esc`.
'use strict';
window.valkyriePlans = (function () {
  const STATE_KIND = { scheduled: 'idle', running: 'warn', stopping: 'warn', completed: 'ok', failed: 'bad', cancelled: 'idle', window_closed: 'warn' };
  const STEP_KIND = { waiting: 'idle', switching: 'warn', done: 'ok', failed: 'bad' };
  const MAX_ASKED = 8;

  function when(ms, h) {
    const d = new Date(ms), today = new Date();
    const day = d.getFullYear() + '-' + String(d.getMonth() + 1).padStart(2, '0') + '-' + String(d.getDate()).padStart(2, '0');
    const time = h.clock(ms).slice(0, 8);
    return d.toDateString() === today.toDateString() ? time : day + ' ' + time;
  }

  function counts(p) {
    const c = p.counts;
    return (c.waiting + c.switching + c.done + c.failed) + ' groups · ' + c.done + ' done · ' + c.switching +
      ' switching · ' + c.waiting + ' waiting · ' + c.failed + ' failed';
  }

  function names(list) {
    return list.slice(0, MAX_ASKED).join(', ') + (list.length > MAX_ASKED ? ' … (+' + (list.length - MAX_ASKED) + ')' : '');
  }

  // What was asked: the groups, globs and selector as sent.
  function asked(a) {
    const parts = [];
    if (a.groups && a.groups.length) parts.push('groups ' + names(a.groups));
    if (a.match && a.match.length) parts.push('match ' + names(a.match));
    if (a.selector) parts.push('selector ' + a.selector);
    return parts.join('; ') || '—';
  }

  function step(g, h) {
    const kind = STEP_KIND[g.step] || 'bad';
    let what = '';
    if (g.step === 'done') {
      what = ' <span class="addr">' + h.esc(g.from) + ' → <span class="to">' + h.esc(g.to) + '</span></span> <span class="num">' +
        h.esc(h.dur(g.took_ms)) + '</span>';
    } else if (g.step === 'switching') {
      what = ' <span class="muted">from</span> <span class="addr">' + h.esc(g.from) + '</span>';
    } else if (g.step === 'failed') {
      what = ' <span class="why">' + h.esc(g.describe) + '</span>';
    }
    return '<li class="step ' + kind + '" data-group="' + h.esc(g.name) + '" data-step="' + h.esc(g.step) + '"' +
      (g.step === 'done' ? ' data-to="' + h.esc(g.to) + '"' : '') + (g.step === 'failed' ? ' title="' + h.esc(g.describe) + '"' : '') +
      '><b>' + h.esc(g.name) + '</b> ' + h.badge(g.step, kind) + what + '</li>';
  }

  function current(p, h) {
    const w = p.window;
    const span = 'window ' + when(w.start_ms, h) + ' → ' + (w.end_ms === null ? 'no end' : when(w.end_ms, h));
    const times = 'submitted ' + when(p.submitted_ms, h) + (p.finished_ms === null ? '' : ', finished ' + when(p.finished_ms, h));
    const s = p.stopped;
    const stop = !s ? '' : '<p class="plan-stop" data-reason="' + h.esc(s.reason) + '"' + (s.group ? ' data-group="' + h.esc(s.group) + '"' : '') +
      '>stopped (' + h.esc(s.reason) + ')' + (s.group ? ' at <b>' + h.esc(s.group) + '</b>: ' + h.esc(s.describe) : '') + '</p>';
    return '<div class="plan current ' + (STATE_KIND[p.state] || 'bad') + '" data-plan="' + h.esc(p.id) + '" data-state="' + h.esc(p.state) + '">' +
      '<h2>plan ' + h.esc(p.id) + ' ' + h.badge(p.state, STATE_KIND[p.state] || 'bad') + ' <span class="counts">' + h.esc(counts(p)) + '</span></h2>' +
      '<p class="plan-meta">' + h.esc(span + ' · concurrency ' + p.concurrency + ' · asked: ' + asked(p.asked) + ' · ' + times) + '</p>' +
      stop + '<ul class="plan-groups">' + p.groups.map((g) => step(g, h)).join('') + '</ul></div>';
  }

  function older(p, h) {
    return '<li data-plan="' + h.esc(p.id) + '" data-state="' + h.esc(p.state) + '">plan ' + h.esc(p.id) + ' ' +
      h.badge(p.state, STATE_KIND[p.state] || 'bad') + ' <span class="muted">' + h.esc(counts(p) + ' · submitted ' + when(p.submitted_ms, h)) +
      (p.stopped && p.stopped.group ? ' · stopped at ' + h.esc(p.stopped.group) : '') + '</span></li>';
  }

  // The panel's HTML, or '' when there is no plan to show.
  return function panel(plans, h) {
    if (!Array.isArray(plans) || plans.length === 0) return '';
    const rest = plans.slice(1);
    return current(plans[0], h) + (rest.length ? '<ol class="older-plans">' + rest.map((p) => older(p, h)).join('') + '</ol>' : '');
  };
}());
