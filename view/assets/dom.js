// dom.js builds elements and formats numbers. Every text the page shows
// from a run (model output, questions, agent names) goes through el, which
// makes text nodes of it: nothing a run wrote is ever parsed as HTML.

// el returns a new element tag with attrs (a style attribute is set through
// the CSSOM, which a Content-Security-Policy without 'unsafe-inline'
// allows) and children: nodes, or strings and numbers made text nodes.
export function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === 'style') node.style.cssText = v;
    else node.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

// formatNumber writes a metric value with four significant digits; null,
// NaN and infinities (written as null in metrics.jsonl) as "—".
export function formatNumber(v) {
  if (v === null || v === undefined || !Number.isFinite(v)) return '—';
  if (v === 0) return '0';
  const a = Math.abs(v);
  if (a >= 1e5 || a < 1e-3) return v.toExponential(3);
  return String(Number(v.toPrecision(4)));
}

// formatX writes an x value of a chart: a step, a wall-clock time (unix
// seconds) or hours since the run's start.
export function formatX(v, axis) {
  if (axis === 'time') {
    const d = new Date(v * 1000);
    const p = n => String(n).padStart(2, '0');
    return `${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
  }
  if (axis === 'relative') return Number(v.toPrecision(3)) + ' h';
  return String(Number(v.toPrecision(6)));
}
