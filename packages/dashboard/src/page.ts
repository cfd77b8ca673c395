/**
 * The page: one HTML document with inline CSS and JS (no CDN, no build step, no framework). It
 * opens `/dashboard/events` (EventSource, reconnects by itself) and redraws from each snapshot;
 * charts are inline SVG built with DOM calls (text goes through `textContent`, never `innerHTML`).
 */

const CSS = `
:root{--bg:#0f1217;--panel:#171b22;--line:#2a303b;--text:#d7dce4;--dim:#8a93a3;--acc:#4ea1ff;--ok:#3fb950;--warn:#d29922;--bad:#f85149;--pred:#a371f7}
*{box-sizing:border-box}body{margin:0;background:var(--bg);color:var(--text);font:13px/1.4 system-ui,-apple-system,Segoe UI,Roboto,sans-serif}
header{display:flex;gap:16px;align-items:baseline;padding:10px 16px;border-bottom:1px solid var(--line);position:sticky;top:0;background:var(--bg);z-index:1}
header h1{font-size:16px;margin:0}header .dim{color:var(--dim)}#status.live{color:var(--ok)}#status.down{color:var(--bad)}
main{padding:12px 16px;display:flex;flex-direction:column;gap:14px}
section{background:var(--panel);border:1px solid var(--line);border-radius:6px;padding:10px 12px}
section h2{font-size:14px;margin:0 0 8px}section h3{font-size:12px;margin:10px 0 4px;color:var(--dim);font-weight:600;text-transform:uppercase;letter-spacing:.04em}
.tiles{display:flex;flex-wrap:wrap;gap:8px}.tile{background:#11151b;border:1px solid var(--line);border-radius:5px;padding:6px 10px;min-width:120px}
.tile .k{color:var(--dim);font-size:11px}.tile .v{font-size:18px;font-variant-numeric:tabular-nums}
table{border-collapse:collapse;width:100%;font-variant-numeric:tabular-nums}th,td{padding:3px 6px;border-bottom:1px solid var(--line);text-align:right;white-space:nowrap}
th{color:var(--dim);font-weight:600;font-size:11px}td.l,th.l{text-align:left}
.bar{display:inline-block;height:8px;background:var(--acc);vertical-align:middle;margin-left:6px;border-radius:2px}
.badge{padding:0 6px;border-radius:8px;font-size:11px}.b-ok{background:#12361d;color:var(--ok)}.b-busy{background:#3d1214;color:var(--bad)}.b-warn{background:#3a2a0b;color:var(--warn)}.b-dim{color:var(--dim)}
.charts{display:flex;flex-wrap:wrap;gap:14px}.chart{flex:1 1 320px}svg text{fill:var(--dim);font-size:10px}
.events{margin-top:6px;font-size:12px}.events.bad{color:var(--warn)}tr.chosen td{color:#fff;background:#1b2a3d}#decisions td{vertical-align:top}#decisions td table td{padding:0 6px;font-size:11px;border:0}.empty{color:var(--dim);padding:8px}
`;

const JS = String.raw`
'use strict';
const $ = (s) => document.querySelector(s);
const SVG = 'http://www.w3.org/2000/svg';
function h(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === 'class') e.className = v; else if (k === 'style') e.style.cssText = v; else e.setAttribute(k, v);
  }
  for (const k of kids) if (k !== null && k !== undefined) e.append(k instanceof Node ? k : String(k));
  return e;
}
function s(tag, attrs, ...kids) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
  for (const k of kids) e.append(k instanceof Node ? k : String(k));
  return e;
}
const fmt = (v, d = 0) => (v === null || v === undefined || Number.isNaN(v) ? '–' : Number(v).toFixed(d));
const pct = (v) => (v === null || v === undefined ? '–' : (100 * v).toFixed(1) + '%');
const secs = (v) => (v === null || v === undefined ? '–' : v < 1 ? (v * 1000).toFixed(v < 0.01 ? 2 : 1) + ' ms' : v.toFixed(2) + ' s');
const shortId = (id) => (id.length > 8 ? '…' + id.slice(-6) : id);
const history = new Map();
const HISTORY = 120;

function tile(k, v, title) { return h('div', { class: 'tile', title: title || '' }, h('div', { class: 'k' }, k), h('div', { class: 'v' }, v)); }

function sparkline(series, colors, labels, max) {
  const W = 420, H = 90, P = 22;
  const svg = s('svg', { width: '100%', viewBox: '0 0 ' + W + ' ' + H, role: 'img' });
  const n = Math.max(...series.map((x) => x.length), 2);
  let top = max ?? Math.max(1e-9, ...series.flat().filter((x) => x !== null));
  svg.append(s('line', { x1: P, y1: H - 14, x2: W, y2: H - 14, stroke: '#2a303b' }));
  svg.append(s('text', { x: 0, y: 10 }, max === 1 ? '100%' : fmt(top, top < 10 ? 1 : 0)));
  svg.append(s('text', { x: 0, y: H - 14 }, '0'));
  series.forEach((pts, j) => {
    let d = '';
    pts.forEach((v, i) => {
      if (v === null) return;
      const x = P + ((W - P) * i) / (n - 1), y = H - 14 - ((H - 24) * Math.min(v, top)) / top;
      d += (d ? 'L' : 'M') + x.toFixed(1) + ' ' + y.toFixed(1);
    });
    if (d) svg.append(s('path', { d, fill: 'none', stroke: colors[j], 'stroke-width': 1.6 }));
    svg.append(s('text', { x: P + 4 + j * 150, y: H - 2, fill: colors[j], style: 'fill:' + colors[j] }, labels[j]));
  });
  return svg;
}

function histogram(hs, unit) {
  const W = 420, H = 110, B = 16;
  const svg = s('svg', { width: '100%', viewBox: '0 0 ' + W + ' ' + H, role: 'img' });
  if (!hs || hs.count === 0) { svg.append(s('text', { x: 8, y: 50 }, 'no samples in the window')); return svg; }
  // Show the populated range (plus one bucket either side).
  let lo = hs.counts.findIndex((c) => c > 0), hi = hs.counts.length - 1 - [...hs.counts].reverse().findIndex((c) => c > 0);
  lo = Math.max(0, lo - 1); hi = Math.min(hs.counts.length - 1, hi + 1);
  const cs = hs.counts.slice(lo, hi + 1), peak = Math.max(...cs, 1), bw = (W - 10) / cs.length;
  cs.forEach((c, i) => {
    const bh = ((H - B - 14) * c) / peak, x = 5 + i * bw;
    const r = s('rect', { x: x + 1, y: H - B - bh, width: Math.max(1, bw - 2), height: bh, fill: '#4ea1ff' });
    const k = lo + i, up = k < hs.bounds.length ? hs.bounds[k] : Infinity, down = k === 0 ? 0 : hs.bounds[k - 1];
    r.append(s('title', {}, '(' + unit(down) + ', ' + (up === Infinity ? '+Inf' : unit(up)) + ']: ' + c));
    svg.append(r);
    // At most ~7 labels (each ~60 px wide at this size): every k-th bucket's upper bound.
    if (i % Math.ceil(cs.length / 7) === 0) svg.append(s('text', { x: x + 1, y: H - 3 }, up === Infinity ? '+Inf' : unit(up)));
  });
  svg.append(s('text', { x: 6, y: 11 }, 'n=' + hs.count + '  p50 ' + unit(hs.p50) + '  p90 ' + unit(hs.p90) + '  p99 ' + unit(hs.p99)));
  return svg;
}

function busyBadge(b) {
  if (b === null) return h('span', { class: 'badge b-dim', title: 'no busy threshold applies (e.g. --admission-control none)' }, 'n/a');
  return b ? h('span', { class: 'badge b-busy' }, 'busy') : h('span', { class: 'badge b-ok' }, 'ok');
}
function eventsCell(e) {
  if (!e) return h('span', { class: 'b-dim' }, '–');
  const cls = e.phase !== 'none' ? 'b-warn' : e.state === 'live' ? 'b-ok' : 'b-warn';
  return h('span', { class: 'badge ' + cls, title: 'cursor ' + e.state + ', recovery ' + e.phase }, e.state + (e.phase !== 'none' ? ' · ' + e.phase : '') + ' · #' + e.last_event_id);
}
function bar(v, max) { return h('span', { class: 'bar', style: 'width:' + Math.round((60 * Math.min(v, max)) / Math.max(max, 1)) + 'px' }); }

function modelSection(m) {
  const key = m.model + '|' + m.namespace + '|' + m.component + '|' + m.endpoint + '|' + m.role;
  let hist = history.get(key);
  if (!hist) history.set(key, (hist = { dps: [], pred: [], rep: [] }));
  for (const [k, v] of [['dps', m.decisions_per_sec], ['pred', m.hit_rate.predicted], ['rep', m.hit_rate.reported]]) {
    hist[k].push(v); if (hist[k].length > HISTORY) hist[k].shift();
  }
  const sec = h('section', { 'data-model': m.model, 'data-role': m.role });
  sec.append(h('h2', {}, m.model + '  ', h('span', { class: 'b-dim' }, m.role + ' · ' + m.namespace + '/' + m.component + '/' + m.endpoint + ' · mode ' + m.mode + ' · block ' + m.block_size)));
  const routable = m.workers.length;
  sec.append(h('div', { class: 'tiles' },
    tile('workers (ranks)', routable),
    tile('decisions/s', fmt(m.decisions_per_sec, 1), 'routing decisions per second over the last 5 s'),
    tile('predicted hit rate', pct(m.hit_rate.predicted), 'mean overlap blocks / prompt blocks of the routed requests (router, last 5 s)'),
    tile('reported hit rate', m.hit_rate.reported === null ? '–' : pct(m.hit_rate.reported), 'engine-reported cached tokens / prompt tokens (requests that reported, last 60 s)'),
    tile('predicted, same requests', pct(m.hit_rate.predicted_of_reported), "the router's predicted cached tokens / prompt tokens for the requests that reported"),
    tile('queue', m.queue_depth, 'requests parked in the router queue (§10)'),
    tile('KV events/s', fmt(m.events_per_sec, 0), 'events applied to the index per second (all statuses)')));
  // Events the index could not apply (status other than ok) mean its picture and the engine's disagree.
  const applied = Object.entries(m.events_applied || {});
  const total = applied.reduce((n, [, v]) => n + v, 0);
  const bad = applied.filter(([k, v]) => !k.startsWith('ok') && v > 0);
  sec.append(h('div', { class: bad.length ? 'events bad' : 'events b-dim' },
    'KV events applied since start: ' + total + (bad.length ? ' · not applied: ' + bad.map(([k, v]) => k + ' ' + v).join(', ') : ' · all ok')));
  const maxP = Math.max(1, ...m.workers.map((w) => w.active_prefill_tokens));
  const maxC = Math.max(1, ...m.workers.map((w) => w.cached_blocks || 0));
  const t = h('table', { class: 'workers' }, h('tr', {},
    h('th', { class: 'l' }, 'worker'), h('th', {}, 'dp'), h('th', {}, 'prefill tokens'), h('th', {}, 'decode blocks'),
    h('th', {}, 'requests'), h('th', {}, 'in flight'), h('th', {}, 'cached blocks'), h('th', { class: 'l' }, 'busy'), h('th', { class: 'l' }, 'KV events')));
  for (const w of m.workers) {
    const tot = w.total_kv_blocks;
    t.append(h('tr', { 'data-worker': w.worker_id },
      h('td', { class: 'l', title: w.worker_id }, w.worker_id), h('td', {}, w.dp_rank),
      h('td', { class: 'prefill' }, w.active_prefill_tokens, bar(w.active_prefill_tokens, maxP)),
      h('td', { class: 'decode' }, w.active_decode_blocks + (tot ? ' / ' + tot : ''), bar(w.active_decode_blocks, tot || Math.max(1, w.active_decode_blocks))),
      h('td', {}, w.active_requests), h('td', {}, w.inflight),
      h('td', { class: 'cached' }, w.cached_blocks === null ? '–' : w.cached_blocks, w.cached_blocks === null ? null : bar(w.cached_blocks, maxC)),
      h('td', { class: 'l' }, busyBadge(w.busy)), h('td', { class: 'l' }, eventsCell(w.events))));
  }
  if (m.workers.length === 0) t.append(h('tr', {}, h('td', { class: 'l empty', colspan: 9 }, 'no routable workers')));
  sec.append(h('h3', {}, 'workers'), t);
  const charts = h('div', { class: 'charts' },
    h('div', { class: 'chart' }, h('h3', {}, 'decisions/s'), sparkline([hist.dps], ['#4ea1ff'], ['decisions/s'])),
    h('div', { class: 'chart' }, h('h3', {}, 'hit rate: predicted vs reported'), sparkline([hist.pred, hist.rep], ['#a371f7', '#3fb950'], ['predicted', 'reported'], 1)),
    h('div', { class: 'chart' }, h('h3', {}, 'TTFT (last ' + SNAP.window_s + ' s)'), histogram(m.ttft, secs)),
    h('div', { class: 'chart' }, h('h3', {}, 'ITL (last ' + SNAP.window_s + ' s)'), histogram(m.itl, secs)));
  sec.append(charts);
  return sec;
}

function decisionsSection(ds) {
  const sec = h('section', { id: 'decisions' }, h('h2', {}, 'last decisions (sampled, ≤ 5/s while this page is open)'));
  if (ds.length === 0) { sec.append(h('div', { class: 'empty' }, 'no decision sampled yet')); return sec; }
  const t = h('table', {}, h('tr', {}, h('th', { class: 'l' }, 'time'), h('th', { class: 'l' }, 'model'), h('th', { class: 'l' }, 'reason'),
    h('th', { class: 'l' }, 'worker'), h('th', {}, 'overlap / blocks'), h('th', {}, 'queued ms'), h('th', {}, 'busy filtered'),
    h('th', { class: 'l' }, 'candidates: worker · overlap blocks · prefill term + decode blocks + new blocks = cost')));
  for (const d of ds) {
    const c = h('table', {});
    for (const x of d.candidates)
      c.append(h('tr', { class: x.worker_id === d.worker_id && x.dp_rank === d.dp_rank ? 'chosen' : '' },
        h('td', { class: 'l' }, shortId(x.worker_id) + ':' + x.dp_rank), h('td', {}, x.device_blocks),
        h('td', {}, fmt(x.prefill_term, 2)), h('td', {}, fmt(x.decode, 2)), h('td', {}, fmt(x.additional, 0)), h('td', {}, fmt(x.cost, 2))));
    t.append(h('tr', { class: 'decision' }, h('td', { class: 'l' }, new Date(d.ts).toLocaleTimeString()), h('td', { class: 'l' }, d.model || '–'),
      h('td', { class: 'l' }, d.reason), h('td', { class: 'l', title: d.worker_id }, shortId(d.worker_id) + ':' + d.dp_rank),
      h('td', {}, d.overlap_blocks + ' / ' + d.required_blocks), h('td', {}, fmt(d.queued_ms, 1)), h('td', {}, d.busy_filtered), h('td', { class: 'l' }, c)));
  }
  sec.append(t);
  return sec;
}

function signalsSection(sig) {
  if (!sig.length) return null;
  const sec = h('section', { id: 'signals' }, h('h2', {}, 'truth-check signals'));
  const t = h('table', {}, h('tr', {}, h('th', { class: 'l' }, 'metric'), h('th', { class: 'l' }, 'labels'), h('th', {}, 'value')));
  for (const f of sig) for (const x of f.series)
    t.append(h('tr', {}, h('td', { class: 'l' }, f.name), h('td', { class: 'l' }, Object.entries(x.labels).map(([k, v]) => k + '=' + v).join(' ')), h('td', {}, fmt(x.value, 3))));
  sec.append(t);
  return sec;
}

let SNAP = null;
let frames = 0;
function render(snap) {
  SNAP = snap; frames++;
  $('#app').textContent = snap.app;
  $('#ts').textContent = new Date(snap.ts).toLocaleTimeString();
  $('#frames').textContent = String(frames);
  $('#tick').textContent = snap.tick_ms === null ? '–' : snap.tick_ms.toFixed(1) + ' ms';
  const main = $('main');
  const kids = snap.models.map(modelSection);
  if (kids.length === 0) kids.push(h('section', {}, h('div', { class: 'empty' }, 'no model has workers yet')));
  kids.push(decisionsSection(snap.decisions));
  const sg = signalsSection(snap.signals);
  if (sg) kids.push(sg);
  main.replaceChildren(...kids);
}

function connect() {
  const es = new EventSource('/dashboard/events');
  es.onopen = () => { $('#status').textContent = 'live'; $('#status').className = 'live'; };
  es.onmessage = (e) => render(JSON.parse(e.data));
  es.onerror = () => { $('#status').textContent = 'reconnecting…'; $('#status').className = 'down'; };
}
connect();
`;

export const PAGE_HTML = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>kvrouter dashboard</title><style>${CSS}</style></head>
<body><header><h1>kvrouter</h1><span class="dim" id="app"></span><span id="status">connecting…</span>
<span class="dim">updated <span id="ts">–</span> · frame <span id="frames">0</span> · snapshot cost <span id="tick" title="wall time of the previous tick: build, serialise, write">–</span></span></header>
<main></main>
<script>${JS}</script></body></html>
`;
