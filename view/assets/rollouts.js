// rollouts.js is the rollout browser: a logged step of a run, its prompts,
// and for one prompt every agent's responses side by side (a column per
// source agent), each with its reward, length and truncation and, for every
// learner that trained on it, what the learner made of it (rollout.Record
// and rollout.LearnerUse in rollout/log.go): self or cross sample,
// advantage, ω, the importance ratio and where it lies against the clip
// range, and whether the text survived the learner's re-tokenization.
//
// Responses are model output: they are only ever written as text nodes.

import { el, formatNumber } from './dom.js';

// right: a response counts as right when its reward is positive (the
// records have no separate correctness field).
const right = r => r.reward > 0;
const clipped = r => (r.learners || []).some(u => u.clip !== 'inside' || u.clipped_tokens > 0);

export class Rollouts {
  constructor(runs, colorOf, getJSON, showError) {
    this.runs = runs;
    this.colorOf = colorOf;
    this.getJSON = getJSON;
    this.showError = showError;
    this.steps = new Map(); // run id → ascending logged steps
    this.logs = new Map(); // "run/step" → records
    this.prompt = null; // the prompt index shown
    this.$ = id => document.getElementById(id);
    const runSel = this.$('ro-run');
    runSel.replaceChildren(...runs.map(r => el('option', { value: r.id }, r.label)));
    runSel.addEventListener('change', () => {
      this.renderAgents();
      this.renderSteps();
      this.load().catch(showError);
    });
    this.$('ro-step').addEventListener('change', () => this.load().catch(showError));
    for (const id of ['ro-agent', 'ro-right', 'ro-clip']) {
      this.$(id).addEventListener('change', () => this.render());
    }
    this.renderAgents();
  }

  get run() {
    return this.runs.find(r => r.id === this.$('ro-run').value);
  }

  // refresh reads every run's logged steps and shows the last step of the
  // selected run when none is shown yet.
  async refresh() {
    await Promise.all(this.runs.map(async run => {
      const { steps } = await this.getJSON(`api/rollouts?run=${encodeURIComponent(run.id)}`);
      this.steps.set(run.id, steps || []);
    }));
    this.renderSteps();
    if (!this.records) await this.load();
  }

  // addStep records a rollout log that has just appeared.
  addStep(runId, step) {
    this.logs.delete(`${runId}/${step}`); // a resumed run writes a pruned step's log anew
    const steps = this.steps.get(runId) || [];
    if (steps.includes(step)) return;
    steps.push(step);
    steps.sort((a, b) => a - b);
    this.steps.set(runId, steps);
    if (this.run && this.run.id === runId) {
      this.renderSteps();
      if (!this.records) this.load().catch(this.showError);
    }
  }

  // reset reads a run's logged steps again after some logs were removed
  // (a resumed run prunes those after its checkpoint), forgetting the
  // run's logs read so far.
  async reset(runId) {
    const { steps } = await this.getJSON(`api/rollouts?run=${encodeURIComponent(runId)}`);
    // Forget the logs read only now: until the new list is in, a log read
    // before is what the page can show without asking for one that is gone.
    for (const id of [...this.logs.keys()]) if (id.startsWith(runId + '/')) this.logs.delete(id);
    this.steps.set(runId, steps || []);
    if (this.run && this.run.id === runId) {
      this.renderSteps();
      await this.load();
    }
  }

  renderAgents() {
    const sel = this.$('ro-agent');
    const keep = sel.value;
    const agents = this.run ? this.run.agents || [] : [];
    sel.replaceChildren(el('option', { value: '' }, 'every agent'),
      ...agents.map(a => el('option', { value: a }, a)));
    sel.value = agents.includes(keep) ? keep : '';
  }

  renderSteps() {
    const sel = this.$('ro-step');
    const keep = sel.value;
    const steps = this.run ? this.steps.get(this.run.id) || [] : [];
    sel.replaceChildren(...steps.map(s => el('option', { value: String(s) }, 'step ' + s)));
    if (steps.length) sel.value = steps.includes(Number(keep)) ? keep : String(steps[steps.length - 1]);
    this.$('ro-note').hidden = steps.length > 0;
  }

  // load fetches the selected step's log (once per run and step) and shows it.
  async load() {
    const run = this.run;
    const step = this.$('ro-step').value;
    if (!run || step === '') {
      this.records = null;
      this.render();
      return;
    }
    const id = `${run.id}/${step}`;
    if (!this.logs.has(id)) {
      let res;
      try {
        res = await this.getJSON(`api/rollouts/${encodeURIComponent(step)}?run=${encodeURIComponent(run.id)}`);
      } catch (err) {
        // A resumed run prunes the logs after its checkpoint: the log may
        // be gone since the list was read. Then the list is read again.
        const { steps } = await this.getJSON(`api/rollouts?run=${encodeURIComponent(run.id)}`);
        if (steps.includes(Number(step))) throw err;
        this.steps.set(run.id, steps);
        this.renderSteps();
        if (this.$('ro-step').value !== step) await this.load();
        return;
      }
      this.logs.set(id, res.records || []);
    }
    if (run !== this.run || step !== this.$('ro-step').value) return; // the choice changed meanwhile
    this.records = this.logs.get(id);
    this.render();
  }

  // shown filters records by the agent, reward and clip controls.
  shown(records) {
    const agent = this.$('ro-agent').value;
    const rw = this.$('ro-right').value;
    const cl = this.$('ro-clip').value;
    return records.filter(r => (!agent || r.agent === agent) &&
      (!rw || (rw === 'right') === right(r)) &&
      (!cl || (cl === 'clipped') === clipped(r)));
  }

  render() {
    const list = this.$('prompts');
    const detail = this.$('prompt-detail');
    const records = this.records || [];
    const byPrompt = new Map();
    for (const r of records) {
      if (!byPrompt.has(r.prompt)) byPrompt.set(r.prompt, []);
      byPrompt.get(r.prompt).push(r);
    }
    if (!byPrompt.has(this.prompt)) this.prompt = byPrompt.size ? byPrompt.keys().next().value : null;
    const agents = this.run ? this.run.agents || [] : [];
    list.replaceChildren(...[...byPrompt].map(([p, recs]) => {
      const first = recs[0];
      const counts = agents.map(a => {
        const mine = recs.filter(r => r.agent === a);
        return mine.length ? el('span', { class: 'count' },
          el('span', { class: 'swatch', style: `background:${this.colorOf(a)}` }),
          `${mine.filter(right).length}/${mine.length}`) : null;
      });
      const item = el('li', { 'data-prompt': p, class: p === this.prompt ? 'selected' : '' },
        el('button', { type: 'button' },
          el('span', { class: 'question' }, `#${p} ${first.question}`),
          el('span', { class: 'answer' }, 'answer: ' + (first.answer ?? '—')),
          el('span', { class: 'counts' }, ...counts)));
      if (this.shown(recs).length === 0) item.classList.add('filtered');
      item.querySelector('button').addEventListener('click', () => {
        this.prompt = p;
        this.render();
      });
      return item;
    }));
    if (this.prompt === null) {
      detail.replaceChildren();
      return;
    }
    const recs = byPrompt.get(this.prompt);
    const shown = this.shown(recs);
    const agent = this.$('ro-agent').value;
    const sources = agents.filter(a => !agent || a === agent);
    // Agents of the log that the run's list lacks still get a column.
    for (const r of recs) if (!sources.includes(r.agent) && (!agent || r.agent === agent)) sources.push(r.agent);
    const first = recs[0];
    detail.replaceChildren(
      el('div', { class: 'prompt-head', 'data-prompt': this.prompt, 'data-step': first.step },
        el('h3', {}, `Step ${first.step}, prompt #${this.prompt}`, first.problem_id ? ` (${first.problem_id})` : ''),
        el('pre', { class: 'question' }, first.question),
        el('p', {}, 'Reference answer: ', el('code', {}, first.answer ?? '—'))),
      el('div', { class: 'columns' }, ...sources.map(a => this.column(a, recs, shown))));
  }

  column(agent, recs, shown) {
    const mine = recs.filter(r => r.agent === agent);
    const visible = shown.filter(r => r.agent === agent);
    return el('div', { class: 'column', 'data-agent': agent },
      el('h4', {}, el('span', { class: 'swatch', style: `background:${this.colorOf(agent)}` }), agent,
        el('span', { class: 'meta' }, ` ${mine.filter(right).length}/${mine.length} right`)),
      ...visible.map(r => this.response(r)),
      visible.length < mine.length ? el('p', { class: 'note' }, `${mine.length - visible.length} hidden by the filters`) : null);
  }

  response(r) {
    const learners = (r.learners || []).map(u => el('tr', { 'data-learner': u.learner, class: u.kept ? '' : 'not-kept' },
      el('td', {}, el('span', { class: 'swatch', style: `background:${this.colorOf(u.learner)}` }), u.learner),
      el('td', { 'data-field': 'use' }, u.self ? 'self' : 'cross'),
      el('td', { class: 'num', 'data-field': 'advantage' }, formatNumber(u.advantage)),
      el('td', { class: 'num', 'data-field': 'omega' }, u.self ? '—' : formatNumber(u.omega ?? 0)),
      el('td', { class: 'num', 'data-field': 'ratio' }, formatNumber(u.ratio)),
      el('td', { 'data-field': 'clip', class: 'clip-' + u.clip },
        u.clip, u.clipped_tokens ? ` (${u.clipped_tokens} tokens clipped)` : '', u.skipped ? ' (update skipped)' : ''),
      el('td', { 'data-field': 'retokenized' }, u.self ? '—'
        : [u.retokenize_changed ? 'changed' : 'same', u.retokenize_cut ? 'cut to the limit' : ''].filter(Boolean).join(', ')),
      el('td', { class: 'num', 'data-field': 'update' }, String(u.update))));
    return el('div', { class: 'response ' + (right(r) ? 'right' : 'wrong'), 'data-agent': r.agent, 'data-sample': r.sample },
      el('div', { class: 'resp-head' },
        el('span', {}, `sample ${r.sample}`),
        el('span', { 'data-field': 'reward' }, 'reward ', formatNumber(r.reward)),
        el('span', { 'data-field': 'tokens' }, `${r.tokens} tokens`),
        r.truncated ? el('span', { class: 'badge', 'data-field': 'truncated' }, 'truncated') : null,
        r.weight_version ? el('span', { class: 'meta' }, 'weights ' + r.weight_version) : null),
      el('details', {}, el('summary', {}, 'prompt as the agent saw it'), el('pre', {}, r.prompt_text)),
      el('pre', { class: 'text' }, r.response),
      learners.length ? el('table', { class: 'learners' },
        el('thead', {}, el('tr', {}, ...['learner', 'use', 'advantage', 'ω', 'ratio', 'clip', 're-tokenized', 'update']
          .map(h => el('th', {}, h)))),
        el('tbody', {}, ...learners)) : null);
  }
}
