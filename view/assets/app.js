// app.js is the page of `hacrl view`: the runs given on the command line,
// one chart per metric with a line per (run, agent), the evaluation table,
// and the rollout browser (rollouts.js), all kept live through the server's
// event stream.
//
// No framework and no charting library: the binary embeds this directory
// and serves it with nothing fetched from the internet, so a library would
// have to be vendored into the binary (and kept up to date there), while
// what the page draws — lines on a canvas, min/max downsampled — fits in
// chart.js. There is no build step: these files are what the browser runs.
//
// Every URL is relative (api/…, assets/…), so the page works behind the
// key cookie set by its first load as /?key=KEY, and under any path prefix.
// The API is view's (view/view.go): /api/runs, /api/metrics?run=&offset=,
// /api/rollouts?run=, /api/rollouts/STEP?run=, /api/events.

import { Chart, dashes, ema, palette, runWideColor } from './chart.js';
import { el, formatNumber } from './dom.js';
import { Rollouts } from './rollouts.js';

// The headline metrics, charted when the filter box is empty.
const headline = /^(eval\/.+\/(avg@\d+|greedy_acc)|reward\/mean|accuracy\/train|capability|omega\/.+|clip\/.+|loss\/policy|entropy)$/;

const state = {
  runs: [], // see newRun
  colors: new Map(), // agent → colour, in the order agents are first seen
  charts: new Map(), // metric key → Chart
  filter: headline,
  smoothing: 0,
  axis: 'step',
  drawPending: false,
  draws: 0,
  firstDraw: false,
};

// getJSON fetches a relative API URL; a response that is not 2xx throws
// the server's {"error": …} message.
export async function getJSON(url) {
  const res = await fetch(url, { headers: { Accept: 'application/json' } });
  let body;
  try {
    body = await res.json();
  } catch (e) {
    throw new Error(`${url}: ${res.status} ${res.statusText}: the answer is not JSON`);
  }
  if (!res.ok) throw new Error(`${url}: ${res.status}: ${body && body.error || res.statusText}`);
  return body;
}

function showError(err) {
  const box = document.getElementById('status');
  box.textContent = String(err && err.message || err);
  box.hidden = false;
  console.error(err);
}

// newRun is a run of /api/runs with the page's copy of its metrics:
// series.get(key).get(agent) = {steps, times, values}, values NaN where
// metrics.jsonl has null.
function newRun(info, index) {
  return {
    ...info, index,
    offset: 0, series: new Map(), lastStep: null, pulling: false, again: false,
    shown: true,
  };
}

function colorOf(agent) {
  if (agent === '') return runWideColor;
  if (!state.colors.has(agent)) state.colors.set(agent, palette[state.colors.size % palette.length]);
  return state.colors.get(agent);
}

function addRecords(run, records) {
  for (const r of records) {
    const agent = r.agent || '';
    const values = r.values || {};
    for (const key in values) {
      const v = values[key];
      let byAgent = run.series.get(key);
      if (!byAgent) run.series.set(key, byAgent = new Map());
      let s = byAgent.get(agent);
      if (!s) byAgent.set(agent, s = { steps: [], times: [], values: [] });
      s.steps.push(r.step);
      s.times.push(r.time);
      s.values.push(v === null ? NaN : v);
    }
    if (run.lastStep === null || r.step > run.lastStep) run.lastStep = r.step;
  }
}

// pullMetrics reads run's metrics.jsonl from the kept offset until the
// server has nothing more; a call while one is under way makes it go round
// once more. The answer's gen counts the file's rewrites and goes back with
// the next request; {"reset": true} (the file was rewritten: a resumed run
// cut it back, or --overwrite started it anew) starts the run's copy again
// from the records that come with it.
async function pullMetrics(run) {
  if (run.pulling) {
    run.again = true;
    return;
  }
  run.pulling = true;
  try {
    const ask = (offset, gen) => getJSON(`api/metrics?run=${encodeURIComponent(run.id)}&offset=${offset}` +
      (gen === undefined ? '' : `&gen=${gen}`));
    do {
      run.again = false;
      let next = ask(run.offset, run.gen);
      while (next) {
        const res = await next;
        const records = res.records || [];
        const moved = res.offset !== run.offset;
        // Ask for the next chunk before taking this one in: the server
        // reads it while the page stores these records.
        next = records.length > 0 && (moved || res.reset) ? ask(res.offset, res.gen) : null;
        if (res.reset) {
          run.series = new Map();
          run.lastStep = null;
        }
        run.gen = res.gen;
        run.offset = res.offset;
        addRecords(run, records);
      }
    } while (run.again);
  } finally {
    run.pulling = false;
  }
  renderRuns();
  renderEval();
  scheduleDraw();
}

async function refreshRuns() {
  const { runs } = await getJSON('api/runs');
  for (const info of runs) {
    const run = state.runs.find(r => r.id === info.id);
    if (run) Object.assign(run, { done: info.done, last_step: info.last_step, steps: info.steps, agents: info.agents });
  }
  renderRuns();
}

function renderRuns() {
  const list = document.getElementById('runs');
  list.replaceChildren(...state.runs.map(run => {
    const box = el('input', { type: 'checkbox', 'data-run': run.id });
    box.checked = run.shown;
    box.addEventListener('change', () => {
      run.shown = box.checked;
      renderEval();
      scheduleDraw();
    });
    const last = run.lastStep ?? run.last_step;
    const agents = (run.agents || []).map(a => el('span', { class: 'agent' },
      el('span', { class: 'swatch', style: `background:${colorOf(a)}` }), a));
    return el('li', { 'data-run': run.id },
      el('label', {}, box, dashSample(run.index), el('strong', {}, run.label)),
      el('span', { class: 'meta' }, `${run.method || ''} · step ${last ?? '—'}/${run.steps ?? '?'} · `,
        run.done ? 'done' : 'running'),
      el('span', { class: 'agents' }, ...agents),
      el('span', { class: 'dir', title: 'output directory' }, run.dir));
  }));
  const legend = document.getElementById('legend');
  if (state.runs.length > 1) {
    legend.replaceChildren('line dash: run (see Runs); colour: agent');
  }
}

// dashSample is a short line in the dash of the run with index i, as its
// lines are drawn.
function dashSample(i) {
  const c = el('canvas', { class: 'dash', width: 36, height: 10, role: 'img', 'aria-label': 'line style of this run' });
  const ctx = c.getContext('2d');
  ctx.strokeStyle = '#1d1d1f';
  ctx.lineWidth = 1.75;
  ctx.setLineDash(dashes[i % dashes.length]);
  ctx.beginPath();
  ctx.moveTo(0, 5);
  ctx.lineTo(36, 5);
  ctx.stroke();
  return c;
}

// visibleKeys is the sorted metric keys of the shown runs that the filter
// lets through.
function visibleKeys() {
  const keys = new Set();
  for (const run of state.runs) {
    if (!run.shown) continue;
    for (const key of run.series.keys()) if (state.filter.test(key)) keys.add(key);
  }
  return [...keys].sort();
}

function scheduleDraw() {
  if (state.drawPending) return;
  state.drawPending = true;
  requestAnimationFrame(() => {
    state.drawPending = false;
    drawCharts();
  });
}

// drawCharts lays out one chart per visible key and draws them all.
function drawCharts() {
  const section = document.getElementById('curves');
  if (section.hidden) return;
  const t0 = performance.now();
  const keys = visibleKeys();
  const grid = document.getElementById('charts');
  const nodes = [];
  for (const key of keys) {
    let c = state.charts.get(key);
    if (!c) state.charts.set(key, c = new Chart(key));
    nodes.push(c.node);
  }
  for (const [key, c] of state.charts) if (!keys.includes(key)) state.charts.delete(key);
  if (nodes.length !== grid.children.length || nodes.some((n, i) => grid.children[i] !== n)) {
    grid.replaceChildren(...nodes);
  }
  const note = document.getElementById('charts-note');
  note.textContent = keys.length ? `${keys.length} metrics` : 'No metric matches (or no metrics written yet).';
  const several = state.runs.filter(r => r.shown).length > 1;
  for (const key of keys) {
    const lines = [];
    for (const run of state.runs) {
      if (!run.shown) continue;
      const byAgent = run.series.get(key);
      if (!byAgent) continue;
      const agents = [...byAgent.keys()].sort((a, b) => agentOrder(run, a) - agentOrder(run, b));
      const start = runStart(run);
      for (const agent of agents) {
        const s = byAgent.get(agent);
        const xs = state.axis === 'step' ? s.steps
          : state.axis === 'time' ? s.times : s.times.map(t => (t - start) / 3600);
        const raw = s.values;
        lines.push({
          label: (agent || 'run') + (several ? ' · ' + run.label : ''),
          color: colorOf(agent), dash: dashes[run.index % dashes.length],
          steps: s.steps, xs, raw, ys: state.smoothing > 0 ? smoothed(s, state.smoothing) : raw,
        });
      }
    }
    state.charts.get(key).draw(lines, state.axis);
  }
  state.draws++;
  const ms = performance.now() - t0;
  document.body.dataset.draws = String(state.draws);
  document.body.dataset.drawMs = ms.toFixed(1);
  if (!state.firstDraw && state.runs.every(r => r.loaded)) {
    state.firstDraw = true;
    performance.mark('hacrl-first-draw');
    document.body.dataset.ready = '1';
  }
}

// smoothed caches a series' EMA by weight and length.
function smoothed(s, w) {
  if (!s.ema || s.ema.w !== w || s.ema.n !== s.values.length) {
    s.ema = { w, n: s.values.length, ys: ema(s.values, w) };
  }
  return s.ema.ys;
}

function agentOrder(run, agent) {
  const i = (run.agents || []).indexOf(agent);
  return i < 0 ? (agent === '' ? -1 : 1e6) : i;
}

function runStart(run) {
  let start = Infinity;
  for (const byAgent of run.series.values()) {
    for (const s of byAgent.values()) if (s.times.length && s.times[0] < start) start = s.times[0];
  }
  return start;
}

// renderEval writes the evaluation table: per shown run, agent and eval
// key, the value at step 0, at the last evaluation, and the change.
function renderEval() {
  const rows = [];
  for (const run of state.runs) {
    if (!run.shown) continue;
    const keys = [...run.series.keys()].filter(k => k.startsWith('eval/')).sort();
    const agents = new Set();
    for (const k of keys) for (const a of run.series.get(k).keys()) agents.add(a);
    for (const agent of [...agents].sort((a, b) => agentOrder(run, a) - agentOrder(run, b))) {
      for (const key of keys) {
        const s = run.series.get(key).get(agent);
        if (!s) continue;
        const i0 = s.steps.indexOf(0);
        let last = s.values.length - 1;
        while (last >= 0 && !Number.isFinite(s.values[last])) last--;
        if (last < 0) continue;
        const v0 = i0 < 0 ? NaN : s.values[i0];
        const change = s.values[last] - v0;
        rows.push(el('tr', { 'data-run': run.id, 'data-agent': agent, 'data-key': key },
          el('td', {}, run.label),
          el('td', {}, el('span', { class: 'swatch', style: `background:${colorOf(agent)}` }), agent || 'run'),
          el('td', {}, key.slice('eval/'.length)),
          el('td', { class: 'num', 'data-col': 'step0' }, formatNumber(v0)),
          el('td', { class: 'num', 'data-col': 'last' }, formatNumber(s.values[last])),
          el('td', { class: 'num', 'data-col': 'step' }, String(s.steps[last])),
          el('td', { class: 'num ' + (change > 0 ? 'up' : change < 0 ? 'down' : ''), 'data-col': 'change' },
            Number.isFinite(change) ? (change > 0 ? '+' : '') + formatNumber(change) : '—')));
      }
    }
  }
  document.querySelector('#eval-table tbody').replaceChildren(...rows);
  document.getElementById('eval-table').hidden = rows.length === 0;
  document.getElementById('eval-empty').hidden = rows.length > 0;
}

function setupControls() {
  const filter = document.getElementById('filter');
  filter.addEventListener('input', () => {
    const text = filter.value.trim();
    filter.classList.remove('invalid');
    if (text === '') {
      state.filter = headline;
    } else {
      try {
        state.filter = new RegExp(text, 'i');
      } catch (e) {
        // Not a regular expression: match it as plain text.
        filter.classList.add('invalid');
        const lower = text.toLowerCase();
        state.filter = { test: k => k.toLowerCase().includes(lower) };
      }
    }
    scheduleDraw();
  });
  const smoothing = document.getElementById('smoothing');
  smoothing.addEventListener('input', () => {
    state.smoothing = Number(smoothing.value);
    document.getElementById('smoothing-value').textContent = smoothing.value;
    scheduleDraw();
  });
  const axis = document.getElementById('axis');
  axis.addEventListener('change', () => {
    state.axis = axis.value;
    scheduleDraw();
  });
  for (const b of document.querySelectorAll('#tabs button')) {
    b.addEventListener('click', () => {
      for (const o of document.querySelectorAll('#tabs button')) o.classList.toggle('active', o === b);
      for (const s of document.querySelectorAll('section.tab')) s.hidden = s.id !== b.dataset.tab;
      scheduleDraw();
    });
  }
  window.addEventListener('resize', scheduleDraw);
}

// listen keeps the page live: the server says which run's metrics grew
// and which rollout log appeared; the page fetches from where it stands.
// After a reconnection everything is pulled again, in case an event was
// missed while the stream was down.
function listen(rollouts) {
  const live = document.getElementById('live');
  const es = new EventSource('api/events');
  let opened = false;
  es.addEventListener('open', () => {
    live.textContent = 'live';
    live.className = 'live on';
    if (opened) {
      for (const run of state.runs) pullMetrics(run).catch(showError);
      rollouts.refresh().catch(showError);
      refreshRuns().catch(showError);
    }
    opened = true;
  });
  es.addEventListener('error', () => {
    live.textContent = 'reconnecting…';
    live.className = 'live off';
  });
  es.addEventListener('metrics', e => {
    const run = state.runs.find(r => r.id === JSON.parse(e.data).run);
    if (!run) return;
    pullMetrics(run).catch(showError);
    refreshRuns().catch(showError);
  });
  es.addEventListener('rollouts', e => {
    const d = JSON.parse(e.data);
    if (d.reset) rollouts.reset(d.run).catch(showError); // logs were removed: a resumed run
    else rollouts.addStep(d.run, d.step);
  });
}

async function main() {
  // The key of /?key=KEY is in the cookie now: take it out of the address
  // bar, so that it is not bookmarked or shared with the URL.
  const url = new URL(location.href);
  if (url.searchParams.has('key')) {
    url.searchParams.delete('key');
    history.replaceState(null, '', url.pathname + url.search + url.hash);
  }
  setupControls();
  const { runs } = await getJSON('api/runs');
  state.runs = runs.map(newRun);
  // Runs of the same name (the same config twice) are told apart by id.
  for (const run of state.runs) {
    run.label = state.runs.some(o => o !== run && o.name === run.name) ? `${run.name} #${run.id}` : run.name;
  }
  for (const run of state.runs) for (const a of run.agents || []) colorOf(a);
  renderRuns();
  const rollouts = new Rollouts(state.runs, colorOf, getJSON, showError);
  listen(rollouts);
  await Promise.all([
    ...state.runs.map(async run => {
      await pullMetrics(run);
      run.loaded = true;
    }),
    rollouts.refresh(),
  ]);
  scheduleDraw();
}

main().catch(showError);
