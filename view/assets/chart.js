// chart.js draws one metric's lines on a <canvas>: a line per (run, agent),
// its colour the agent's and its dash the run's, optionally smoothed, with a
// hover readout of the nearest point of every line.
//
// Drawing is linear in the number of points and bounded by the width in
// pixels: each line keeps, per pixel column, its first, lowest, highest and
// last point (min/max downsampling), so 100k points draw as about four
// segments per column and the shape (spikes included) is the same as
// drawing them all.

import { el, formatNumber, formatX } from './dom.js';

// Colours of agents, in the order agents are first seen (Tableau 10).
export const palette = ['#4e79a7', '#f28e2b', '#e15759', '#76b7b2', '#59a14f',
  '#edc948', '#b07aa1', '#ff9da7', '#9c755f', '#bab0ac'];
// The colour of run-wide records (agent "").
export const runWideColor = '#333333';
// Dash patterns of runs, in run order.
export const dashes = [[], [7, 4], [2, 3], [10, 3, 2, 3], [4, 4], [1, 5]];

export const background = '#ffffff';
const gridColor = '#e6e6e6';
const axisColor = '#888888';
const margin = { left: 56, right: 14, top: 10, bottom: 24 };
const height = 220; // CSS pixels

// ema smooths ys as TensorBoard does: an exponential moving average with
// weight w on the past, debiased by 1 − w^n so that the first points are
// not pulled towards zero. Missing values (NaN) stay missing and do not
// enter the average.
export function ema(ys, w) {
  const out = new Float64Array(ys.length);
  let last = 0;
  let wn = 1; // w^n after n finite values
  for (let i = 0; i < ys.length; i++) {
    const y = ys[i];
    if (!Number.isFinite(y)) {
      out[i] = NaN;
      continue;
    }
    last = last * w + (1 - w) * y;
    wn *= w;
    out[i] = w === 1 ? last : last / (1 - wn);
  }
  return out;
}

// niceTicks returns about n round values spanning [lo, hi], at least
// minStep apart (1 for steps, which are whole numbers).
export function niceTicks(lo, hi, n, minStep = 0) {
  const span = hi - lo;
  if (!(span > 0)) return [lo];
  const raw = Math.max(span / n, minStep);
  const mag = Math.pow(10, Math.floor(Math.log10(raw)));
  const step = [1, 2, 5, 10].map(m => m * mag).find(s => s >= raw);
  const ticks = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) {
    ticks.push(Math.abs(v) < step * 1e-9 ? 0 : v);
  }
  return ticks;
}

// nearest returns the index of the value of the ascending array xs closest
// to x.
function nearest(xs, x) {
  let lo = 0;
  let hi = xs.length - 1;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (xs[mid] < x) lo = mid + 1; else hi = mid;
  }
  if (lo > 0 && Math.abs(xs[lo - 1] - x) <= Math.abs(xs[lo] - x)) return lo - 1;
  return lo;
}

// A Chart is one metric's figure. Lines are given to draw as
// {label, color, dash, steps, xs, ys, raw}: xs the x values (step, time),
// ys what is drawn (smoothed or raw), raw the values before smoothing.
export class Chart {
  constructor(key) {
    this.key = key;
    this.canvas = el('canvas', { 'data-key': key, role: 'img', 'aria-label': 'chart of ' + key });
    this.readout = el('div', { class: 'readout', hidden: '' });
    this.node = el('figure', { class: 'chart', 'data-key': key },
      el('figcaption', {}, key), this.canvas, this.readout);
    this.lines = [];
    this.hoverX = null; // CSS pixel of the pointer inside the canvas, or null
    this.canvas.addEventListener('mousemove', e => {
      this.hoverX = e.offsetX;
      this.drawReadout();
    });
    this.canvas.addEventListener('mouseleave', () => {
      this.hoverX = null;
      this.drawReadout();
    });
  }

  // draw draws lines on the canvas, sized to its figure's width; axis is
  // "step", "time" or "relative".
  draw(lines, axis) {
    this.lines = lines;
    this.axis = axis;
    const width = Math.max(200, this.node.clientWidth - 2);
    const dpr = window.devicePixelRatio || 1;
    if (this.canvas.width !== Math.round(width * dpr) || this.canvas.height !== Math.round(height * dpr)) {
      this.canvas.width = Math.round(width * dpr);
      this.canvas.height = Math.round(height * dpr);
      this.canvas.style.width = width + 'px';
      this.canvas.style.height = height + 'px';
    }
    const ctx = this.canvas.getContext('2d');
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.fillStyle = background;
    ctx.fillRect(0, 0, width, height);

    // The ranges: x over every point, y over every finite raw and drawn value.
    let x0 = Infinity, x1 = -Infinity, y0 = Infinity, y1 = -Infinity;
    for (const l of lines) {
      if (l.xs.length === 0) continue;
      x0 = Math.min(x0, l.xs[0]);
      x1 = Math.max(x1, l.xs[l.xs.length - 1]);
      for (const arr of l.ys === l.raw ? [l.raw] : [l.raw, l.ys]) {
        for (let i = 0; i < arr.length; i++) {
          const y = arr[i];
          if (y < y0) y0 = y;
          if (y > y1) y1 = y;
        }
      }
    }
    if (!Number.isFinite(x0)) {
      this.frame = null;
      ctx.fillStyle = axisColor;
      ctx.fillText('no data', width / 2 - 20, height / 2);
      return;
    }
    if (x0 === x1) { x0 -= 1; x1 += 1; }
    if (!Number.isFinite(y0)) { y0 = 0; y1 = 1; }
    if (y0 === y1) {
      const pad = Math.abs(y0) * 0.1 || 1;
      y0 -= pad;
      y1 += pad;
    } else {
      const pad = (y1 - y0) * 0.04;
      y0 -= pad;
      y1 += pad;
    }
    const pw = width - margin.left - margin.right;
    const ph = height - margin.top - margin.bottom;
    const sx = x => margin.left + (x - x0) / (x1 - x0) * pw;
    const sy = y => margin.top + (1 - (y - y0) / (y1 - y0)) * ph;
    this.frame = { x0, x1, sx, width };

    // Grid and tick labels.
    ctx.font = '11px sans-serif';
    ctx.lineWidth = 1;
    ctx.setLineDash([]);
    ctx.strokeStyle = gridColor;
    ctx.fillStyle = axisColor;
    ctx.textAlign = 'right';
    ctx.textBaseline = 'middle';
    for (const v of niceTicks(y0, y1, 5)) {
      const y = Math.round(sy(v)) + 0.5;
      ctx.beginPath();
      ctx.moveTo(margin.left, y);
      ctx.lineTo(width - margin.right, y);
      ctx.stroke();
      ctx.fillText(formatNumber(v), margin.left - 4, y);
    }
    ctx.textAlign = 'center';
    ctx.textBaseline = 'top';
    const xticks = axis === 'time' ? niceTimeTicks(x0, x1, Math.max(2, Math.floor(pw / 110)))
      : niceTicks(x0, x1, Math.max(2, Math.floor(pw / 80)), axis === 'step' ? 1 : 0);
    for (const v of xticks) {
      const x = Math.round(sx(v)) + 0.5;
      ctx.beginPath();
      ctx.moveTo(x, margin.top);
      ctx.lineTo(x, margin.top + ph);
      ctx.stroke();
      ctx.fillText(formatX(v, axis), x, margin.top + ph + 5);
    }
    ctx.strokeStyle = axisColor;
    ctx.strokeRect(margin.left + 0.5, margin.top + 0.5, pw, ph);

    // Lines: the raw values faint under the smoothed ones.
    ctx.save();
    ctx.beginPath();
    ctx.rect(margin.left, margin.top, pw, ph);
    ctx.clip();
    for (const l of lines) {
      ctx.strokeStyle = l.color;
      ctx.fillStyle = l.color;
      ctx.setLineDash(l.dash);
      if (l.ys !== l.raw) {
        ctx.globalAlpha = 0.25;
        ctx.lineWidth = 1;
        strokeDownsampled(ctx, l.xs, l.raw, sx, sy);
      }
      ctx.globalAlpha = 1;
      ctx.lineWidth = 1.75;
      strokeDownsampled(ctx, l.xs, l.ys, sx, sy);
      // Few points (evaluations): mark each one.
      if (l.xs.length <= 30) {
        ctx.setLineDash([]);
        for (let i = 0; i < l.xs.length; i++) {
          if (!Number.isFinite(l.ys[i])) continue;
          ctx.beginPath();
          ctx.arc(sx(l.xs[i]), sy(l.ys[i]), 2.5, 0, 2 * Math.PI);
          ctx.fill();
        }
      }
    }
    ctx.restore();
    this.drawReadout();
  }

  // drawReadout writes, for the pointer's x, the nearest point of every line.
  drawReadout() {
    const f = this.frame;
    if (this.hoverX === null || !f) {
      this.readout.hidden = true;
      return;
    }
    const x = f.x0 + (this.hoverX - margin.left) / (f.sx(f.x1) - margin.left) * (f.x1 - f.x0);
    const rows = [];
    for (const l of this.lines) {
      if (l.xs.length === 0) continue;
      const i = nearest(l.xs, x);
      const smoothed = l.ys !== l.raw;
      rows.push(el('tr', { 'data-label': l.label, 'data-step': String(l.steps[i]) },
        el('td', {}, el('span', { class: 'swatch', style: `background:${l.color}` })),
        el('td', { class: 'label' }, l.label),
        el('td', { class: 'step' }, 'step ' + l.steps[i]),
        el('td', { class: 'value' }, formatNumber(l.raw[i])),
        el('td', { class: 'smoothed' }, smoothed ? '(' + formatNumber(l.ys[i]) + ')' : '')));
    }
    this.readout.replaceChildren(el('table', {}, el('tbody', {}, ...rows)));
    this.readout.hidden = false;
    const left = this.hoverX + 12;
    this.readout.style.left = (left + 260 > f.width ? Math.max(0, this.hoverX - 272) : left) + 'px';
  }
}

// strokeDownsampled strokes the line through (xs[i], ys[i]) keeping, per
// pixel column, the first, lowest, highest and last point in their order.
// A missing value (NaN) breaks the line.
function strokeDownsampled(ctx, xs, ys, sx, sy) {
  ctx.beginPath();
  let col = NaN, first = -1, lo = -1, hi = -1, last = -1;
  let pen = false;
  const to = i => {
    const x = sx(xs[i]), y = sy(ys[i]);
    if (pen) ctx.lineTo(x, y); else { ctx.moveTo(x, y); pen = true; }
  };
  const flush = () => {
    if (first < 0) return;
    // first <= a <= b <= last: draw each index once, in order.
    const a = Math.min(lo, hi), b = Math.max(lo, hi);
    to(first);
    if (a > first) to(a);
    if (b > a) to(b);
    if (last > b) to(last);
    first = -1;
  };
  for (let i = 0; i < xs.length; i++) {
    const y = ys[i];
    if (!Number.isFinite(y)) {
      flush();
      pen = false;
      continue;
    }
    const c = Math.floor(sx(xs[i]));
    if (c !== col || first < 0) {
      flush();
      col = c;
      first = lo = hi = last = i;
      continue;
    }
    if (y < ys[lo]) lo = i;
    if (y > ys[hi]) hi = i;
    last = i;
  }
  flush();
  ctx.stroke();
}

// niceTimeTicks returns round wall-clock times (unix seconds) in [lo, hi].
function niceTimeTicks(lo, hi, n) {
  const steps = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400];
  const raw = (hi - lo) / n;
  const step = steps.find(s => s >= raw) || Math.ceil(raw / 86400) * 86400;
  const ticks = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi; v += step) ticks.push(v);
  return ticks;
}
