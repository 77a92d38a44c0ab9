// check.js drives hacrl view's page in Debian's Chromium, headless, for
// view/browser_test.go: it reads what a person would see (the charts'
// pixels, the hover readout, the evaluation table, the rollout browser)
// and reports it; the Go test compares that with the run's files.
//
//   node check.js URL
//
// It opens URL, then answers commands, one JSON object per line on
// standard input, with one JSON object per line on standard output
// ({"error": "…"} when a command fails). Everything the page logs as an
// error, every exception it throws and every request that fails or is
// answered with an error status is collected for {"op": "errors"}.
//
// Commands:
//   {"op": "load"}: wait for the first full draw (body[data-ready]); the
//       time from the start of navigation to it, the charts' keys
//   {"op": "pixels", "key": K, "top": F}: per agent, the pixels of K's
//       canvas in the agent's colour (read from the runs panel; pixels
//       the line's edge blends with the background count too), and those
//       that are not background; with F, in the canvas's top fraction F only
//   {"op": "hover", "key": K}: point at the right end of K's plot; the
//       readout's rows
//   {"op": "wait_readout", "key": K, "label": L, "step": S}: wait until the
//       readout (still pointing there) has L at step S; the rows
//   {"op": "eval"}: the evaluation table's rows
//   {"op": "rollout", "run": ID, "step": S, "prompt": P, "right": "",
//       "agent": "", "clip": ""}: open the rollout browser on run ID, step
//       S, prompt P with the reward, agent and clip filters; the prompts and
//       the columns
//   {"op": "wait_step", "run": ID, "step": S, "gone": false}: wait until
//       run ID's step list offers S (with gone: no longer offers it)
//   {"op": "show_run", "run": ID, "shown": B}: tick or untick the run
//   {"op": "filter", "text": T}: type T in the metrics filter; the charts
//       drawn, and whether the box marks T as no regular expression
//   {"op": "axis", "axis": "step"|"time"|"relative"}: pick the x axis
//   {"op": "smooth", "value": V}: set the smoothing slider; the time until
//       the redraw is done, and the redraw's own time
//   {"op": "fresh_compare", "key": K}: load the page anew beside this one;
//       how many pixels of K's chart differ between the two
//   {"op": "screenshot", "path": P, "tab": "curves"|"rollouts"}: a
//       screenshot of the whole page with that tab open, to look at
//   {"op": "errors"}: what went wrong so far
//   {"op": "quit"}

'use strict';

const readline = require('node:readline');
const { chromium } = require('playwright-core');

const url = process.argv[2];
const timeout = 30000; // per step; loading the page gets four times as long

async function main() {
  const browser = await chromium.launch({
    executablePath: '/usr/bin/chromium', // Debian's (scripts/chromium.sh)
    headless: true,
    // No sandbox where the test runs as root (containers, CI).
    args: process.getuid && process.getuid() === 0 ? ['--no-sandbox'] : [],
  });
  const problems = { console: [], failed: [] };
  const origin = new URL(url).origin;
  // open opens url in a new page whose problems are collected.
  const open = async () => {
    const p = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
    p.setDefaultTimeout(timeout);
    p.on('console', m => {
      if (m.type() === 'error') problems.console.push(m.text());
    });
    p.on('pageerror', e => problems.console.push('uncaught: ' + (e.stack || e.message)));
    p.on('requestfailed', r => {
      // The event stream is cut when a page closes or the test stops the server: not a failure of the page.
      if (r.url().endsWith('/api/events') && r.failure() && /ERR_ABORTED/.test(r.failure().errorText)) return;
      problems.failed.push(`${r.method()} ${r.url()}: ${r.failure() && r.failure().errorText}`);
    });
    // Nothing may be fetched from anywhere but the view itself.
    p.on('request', r => {
      if (!r.url().startsWith(origin + '/') && !r.url().startsWith('data:')) problems.failed.push(`request outside the view: ${r.url()}`);
    });
    p.on('response', r => {
      if (r.status() >= 400) problems.failed.push(`${r.request().method()} ${r.url()}: status ${r.status()}`);
    });
    await p.goto(url);
    return p;
  };
  const page = await open();
  const ready = p => p.waitForSelector('body[data-ready="1"]', { timeout: 4 * timeout });
  const pixelsOf = (p, key) => p.evaluate(key => {
    const c = document.querySelector(`canvas[data-key="${key}"]`);
    return c ? Array.from(c.getContext('2d').getImageData(0, 0, c.width, c.height).data) : null;
  }, key);

  // plotPoint is where the pointer goes to read the last points: right of
  // the plot's last step, half-way up.
  const plotPoint = async key => {
    const canvas = page.locator(`canvas[data-key="${key}"]`);
    const box = await canvas.boundingBox();
    if (!box) throw new Error(`no chart of ${key}`);
    return { canvas, x: box.width - 4, y: box.height / 2 };
  };
  const readRows = key => page.$$eval(`figure.chart[data-key="${key}"] .readout tr`, trs => trs.map(tr => ({
    label: tr.dataset.label, step: Number(tr.dataset.step),
    value: tr.querySelector('.value').textContent, smoothed: tr.querySelector('.smoothed').textContent,
  })));

  const ops = {
    async load() {
      await ready(page);
      return page.evaluate(() => ({
        ms: performance.getEntriesByName('hacrl-first-draw')[0].startTime,
        draw_ms: Number(document.body.dataset.drawMs),
        // The metrics requests: how long from the first one's start to the last one's end, and their own time.
        fetch_ms: (() => {
          const rs = performance.getEntriesByType('resource').filter(r => r.name.includes('/api/metrics'));
          return rs.length ? { span: Math.max(...rs.map(r => r.responseEnd)) - Math.min(...rs.map(r => r.startTime)),
            own: rs.reduce((a, r) => a + r.responseEnd - r.startTime, 0), count: rs.length } : null;
        })(),
        charts: [...document.querySelectorAll('figure.chart')].map(f => f.dataset.key),
      }));
    },
    async pixels({ key, top }) {
      return page.evaluate(([key, top]) => {
        const colors = {};
        for (const a of document.querySelectorAll('#runs .agent')) {
          const c = getComputedStyle(a.querySelector('.swatch')).backgroundColor.match(/\d+/g).map(Number);
          colors[a.textContent] = c;
        }
        const canvas = document.querySelector(`canvas[data-key="${key}"]`);
        if (!canvas) throw new Error(`no chart of ${key}`);
        const rows = top ? Math.round(canvas.height * top) : canvas.height;
        const d = canvas.getContext('2d').getImageData(0, 0, canvas.width, rows).data;
        const byAgent = Object.fromEntries(Object.keys(colors).map(a => [a, 0]));
        let drawn = 0;
        for (let i = 0; i < d.length; i += 4) {
          if (d[i] !== 255 || d[i + 1] !== 255 || d[i + 2] !== 255) drawn++;
          // A pixel of a line in colour c over the white background is
          // α·c + (1 − α)·white: the same α (at least 0.3) in every channel.
          for (const [a, c] of Object.entries(colors)) {
            const al = [0, 1, 2].map(j => c[j] === 255 ? null : (255 - d[i + j]) / (255 - c[j])).filter(x => x !== null);
            if (Math.min(...al) >= 0.3 && Math.max(...al) - Math.min(...al) <= 0.1) byAgent[a]++;
          }
        }
        return { agents: byAgent, drawn };
      }, [key, top || 0]);
    },
    async hover({ key }) {
      const { canvas, x, y } = await plotPoint(key);
      await canvas.hover({ position: { x, y } });
      return { rows: await readRows(key) };
    },
    async wait_readout({ key, label, step }) {
      const t0 = Date.now();
      try {
        await page.waitForFunction(([key, label, step]) =>
          [...document.querySelectorAll(`figure.chart[data-key="${key}"] .readout tr`)]
            .some(tr => tr.dataset.label === label && Number(tr.dataset.step) === step), [key, label, step]);
      } catch (e) {
        const rows = (await readRows(key)).map(r => `${r.label} step ${r.step}`).join(', ');
        throw new Error(`${key}'s readout has no row of ${label} at step ${step} after ${Date.now() - t0} ms; it has ${rows || 'none'}`);
      }
      return { ms: Date.now() - t0, rows: await readRows(key) };
    },
    async eval() {
      return {
        rows: await page.$$eval('#eval-table tbody tr', trs => trs.map(tr => {
          const col = c => tr.querySelector(`[data-col="${c}"]`).textContent;
          return {
            run: tr.dataset.run, agent: tr.dataset.agent, key: tr.dataset.key,
            step0: col('step0'), last: col('last'), step: Number(col('step')), change: col('change'),
          };
        })),
      };
    },
    async rollout({ run, step, prompt, right, agent, clip }) {
      await page.click('#tabs button[data-tab="rollouts"]');
      await page.selectOption('#ro-run', String(run));
      await page.waitForSelector(`#ro-step option[value="${step}"]`, { state: 'attached' });
      await page.selectOption('#ro-step', String(step));
      await page.selectOption('#ro-right', right || '');
      await page.selectOption('#ro-agent', agent || '');
      await page.selectOption('#ro-clip', clip || '');
      await page.click(`#prompts li[data-prompt="${prompt}"] button`);
      await page.waitForSelector(`.prompt-head[data-prompt="${prompt}"][data-step="${step}"]`);
      const res = await page.evaluate(() => ({
        prompts: [...document.querySelectorAll('#prompts li')].map(li => ({
          prompt: Number(li.dataset.prompt),
          question: li.querySelector('.question').textContent,
          answer: li.querySelector('.answer').textContent,
        })),
        question: document.querySelector('.prompt-head .question').textContent,
        columns: [...document.querySelectorAll('#prompt-detail .column')].map(col => ({
          agent: col.dataset.agent,
          responses: [...col.querySelectorAll('.response')].map(r => {
            const f = name => { const n = r.querySelector(`.resp-head [data-field="${name}"]`); return n ? n.textContent : ''; };
            return {
              agent: r.dataset.agent, sample: Number(r.dataset.sample),
              reward: f('reward'), tokens: f('tokens'), truncated: f('truncated') !== '',
              text: r.querySelector('pre.text').textContent,
              learners: [...r.querySelectorAll('.learners tbody tr')].map(tr => {
                const g = name => tr.querySelector(`[data-field="${name}"]`).textContent;
                return {
                  learner: tr.dataset.learner, use: g('use'), advantage: g('advantage'), omega: g('omega'),
                  ratio: g('ratio'), clip: g('clip'), retokenized: g('retokenized'),
                };
              }),
            };
          }),
        })),
      }));
      await page.click('#tabs button[data-tab="curves"]');
      return res;
    },
    async wait_step({ run, step, gone }) {
      const t0 = Date.now();
      await page.click('#tabs button[data-tab="rollouts"]');
      await page.selectOption('#ro-run', String(run));
      try {
        await page.waitForSelector(`#ro-step option[value="${step}"]`, { state: gone ? 'detached' : 'attached' });
      } catch (e) {
        const steps = await page.$$eval('#ro-step option', os => os.map(o => o.value).join(', '));
        throw new Error(`run ${run}'s step list ${gone ? 'still has' : 'has no'} step ${step} after ${Date.now() - t0} ms; it has ${steps || 'none'}`);
      }
      const ms = Date.now() - t0;
      await page.click('#tabs button[data-tab="curves"]');
      return { ms };
    },
    async filter({ text }) {
      const before = await page.evaluate(() => Number(document.body.dataset.draws));
      await page.fill('#filter', text);
      await page.waitForFunction(n => Number(document.body.dataset.draws) > n, before);
      return {
        charts: await page.$$eval('figure.chart', fs => fs.map(f => f.dataset.key)),
        invalid: await page.$eval('#filter', f => f.classList.contains('invalid')),
      };
    },
    async axis({ axis }) {
      const before = await page.evaluate(() => Number(document.body.dataset.draws));
      await page.selectOption('#axis', axis);
      await page.waitForFunction(n => Number(document.body.dataset.draws) > n, before);
      return {};
    },
    async show_run({ run, shown }) {
      await page.setChecked(`#runs input[data-run="${run}"]`, shown);
      return {};
    },
    async smooth({ value }) {
      return page.evaluate(value => new Promise(resolve => {
        const before = Number(document.body.dataset.draws);
        const t0 = performance.now();
        const slider = document.getElementById('smoothing');
        slider.value = String(value);
        slider.dispatchEvent(new Event('input'));
        const poll = () => {
          if (Number(document.body.dataset.draws) > before) {
            resolve({ ms: performance.now() - t0, draw_ms: Number(document.body.dataset.drawMs) });
          } else {
            requestAnimationFrame(poll);
          }
        };
        requestAnimationFrame(poll);
      }), value);
    },
    async screenshot({ path, tab }) {
      await page.click(`#tabs button[data-tab="${tab}"]`);
      await page.screenshot({ path, fullPage: true });
      await page.click('#tabs button[data-tab="curves"]');
      return {};
    },
    async fresh_compare({ key }) {
      const fresh = await open();
      try {
        await ready(fresh);
        const png = p => p.evaluate(key => {
          const c = document.querySelector(`canvas[data-key="${key}"]`);
          return c ? c.toDataURL() : null;
        }, key);
        const [pa, pb] = [await png(page), await png(fresh)];
        if (!pa || !pb) throw new Error(`no chart of ${key} (${!pa ? 'on the page' : 'on the fresh page'})`);
        if (pa === pb) return { differ: 0 };
        // They differ: count the pixels (slow, on failure only).
        const [a, b] = [await pixelsOf(page, key), await pixelsOf(fresh, key)];
        let differ = 0;
        for (let i = 0; i < Math.max(a.length, b.length); i += 4) {
          if (a[i] !== b[i] || a[i + 1] !== b[i + 1] || a[i + 2] !== b[i + 2]) differ++;
        }
        return { differ, pixels: a.length / 4 };
      } finally {
        await fresh.close();
      }
    },
    async errors() {
      return problems;
    },
  };

  const rl = readline.createInterface({ input: process.stdin });
  for await (const line of rl) {
    if (!line.trim()) continue;
    let cmd;
    try {
      cmd = JSON.parse(line);
    } catch (e) {
      console.log(JSON.stringify({ error: `not a command: ${line}` }));
      continue;
    }
    if (cmd.op === 'quit') break;
    try {
      const fn = ops[cmd.op];
      if (!fn) throw new Error(`unknown op ${cmd.op}`);
      console.log(JSON.stringify(await fn(cmd)));
    } catch (e) {
      console.log(JSON.stringify({ error: String(e && e.stack || e) }));
    }
  }
  await browser.close();
}

main().catch(e => {
  console.error(e);
  process.exit(1);
});
