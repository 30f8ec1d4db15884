// The page's two views besides the chat: Environments (#/envs), each environment the
// user sees with its build status, resources, networking, secrets by name (the API never
// sends a value), last update, versions and warm pool; and Usage (#/usage), what the
// user's own sessions spent over a window. Both only read the API.

import { h, clear, relTime, fullTime } from './dom.js';

// renderEnvironments fills root with the Environments page from GET
// /environments/overview (get is the page's API call).
export async function renderEnvironments(root, get) {
  clear(root);
  root.append(h('div.page-head', h('h1', 'Environments'),
    h('p.muted', 'Blueprints your agents’ sandboxes are cloned from. Build inputs (image, build script, CPU, memory, disk) bake a snapshot; networking, variables and secrets apply without a rebuild.')));
  const body = h('div.env-list', { role: 'list', 'aria-busy': 'true' });
  root.append(body);
  let envs;
  try {
    envs = (await get('/environments/overview')).environments || [];
  } catch (e) {
    body.removeAttribute('aria-busy');
    body.append(h('p.form-error', { role: 'alert' }, e.message));
    return;
  }
  body.removeAttribute('aria-busy');
  if (envs.length === 0) {
    body.append(h('p.muted', 'No environment is visible to you yet.'));
    return;
  }
  for (const e of envs) body.append(envCard(e));
}

function statusBadge(status) {
  const tone = status === 'Ready' ? 'ok' : status === 'Building' ? 'busy' : 'bad';
  return h('span.env-status.' + tone, { dataset: { status } }, status);
}

function row(label, ...value) {
  return h('div.env-row', h('dt', label), h('dd', ...value));
}

function envCard(e) {
  const r = e.resources || {};
  const resources = [`${r.cpu} CPU`, `${r.memory_gb} GB memory`, `${r.disk_gb} GB disk`];
  if (r.gpu) resources.push(`${r.gpu} GPU${r.gpu_type ? ' ' + r.gpu_type : ''}`);
  const net = e.network || {};
  const card = h('article.env-card', { role: 'listitem', dataset: { env: e.name } },
    h('header.env-card-head',
      h('h2', e.name),
      e.reserved ? h('span.badge', 'reserved') : null,
      statusBadge(e.status),
      h('span.muted.small', 'owner ', e.owner)),
    e.status_reason ? h('p.form-error.small', e.status_reason) : null,
    h('dl.env-grid',
      row('Resources', h('span.env-resources', resources.join(' · '))),
      row('Image', h('code', e.image)),
      row('Networking', h('span.env-network', { dataset: { blockAll: String(!!net.block_all) } }, net.summary || '')),
      row('Variables', e.env_names.length ? e.env_names.map((n) => h('code.env-var', n)) : h('span.muted', 'none')),
      row('Secrets', secretsList(e.secrets)),
      row('Last updated', h('time', { datetime: e.updated_at, title: fullTime(e.updated_at) }, relTime(e.updated_at))),
      row('Warm pool', poolText(e.warm_pool)),
      row('Versions', versionsList(e.versions))));
  return card;
}

// secretsList shows each secret's name and hosts: the API sends no value to show.
function secretsList(secrets) {
  if (!secrets || secrets.length === 0) return h('span.muted', 'none');
  return h('ul.env-secrets', secrets.map((s) =>
    h('li', { dataset: { secret: s.name } }, h('code', s.name),
      s.hosts && s.hosts.length ? h('span.muted', ' → ' + s.hosts.join(', ')) : null,
      s.inert ? h('span.badge.warn', 'ignored: block all') : null)));
}

function poolText(p) {
  if (!p) return h('span.muted', 'none');
  return h('span.env-pool', `${p.ready} of ${p.size} ready` + (p.creating ? `, ${p.creating} starting` : '') +
    ` · members replaced after ${Math.round(p.max_age_seconds / 60)} min`);
}

function versionsList(versions) {
  if (!versions || versions.length === 0) return h('span.muted', 'none');
  return h('ol.env-versions', versions.slice().reverse().map((v) =>
    h('li', h('code', v.snapshot_id),
      v.current ? h('span.badge', 'current') : v.kept ? h('span.badge.muted', 'kept') : null,
      v.pinned_by && v.pinned_by.length ? h('span.muted', ' pinned by ' + v.pinned_by.join(', ')) : null,
      h('span.muted.small', ' since ', h('time', { datetime: v.current_since, title: fullTime(v.current_since) }, relTime(v.current_since))))));
}

const WINDOWS = [['1d', 'Last 24 hours'], ['7d', 'Last 7 days'], ['30d', 'Last 30 days'], ['93d', 'Last 93 days']];

// renderUsage fills root with the caller's own usage over a window chosen on the page.
export async function renderUsage(root, get, me, window = '7d') {
  clear(root);
  const select = h('select#usage-window', { 'aria-label': 'Window' },
    WINDOWS.map(([v, label]) => h('option', { value: v, selected: v === window }, label)));
  select.addEventListener('change', () => renderUsage(root, get, me, select.value));
  root.append(h('div.page-head', h('h1', 'Usage'),
    h('p.muted', `What your sessions spent: tokens per model, sandbox time per environment and MCP calls per server, per agent.`),
    h('label.select-chip', select)));
  const body = h('div.usage-body', { 'aria-busy': 'true' });
  root.append(body);
  let u;
  try {
    u = await get('/usage?window=' + encodeURIComponent(window) + '&user=' + encodeURIComponent(me.user));
  } catch (e) {
    body.removeAttribute('aria-busy');
    body.append(h('p.form-error', { role: 'alert' }, e.message));
    return;
  }
  body.removeAttribute('aria-busy');
  const t = u.totals || {};
  body.append(h('div.usage-totals',
    total('Input tokens', t.input_tokens), total('Output tokens', t.output_tokens),
    total('Sandbox time', duration(t.sandbox_seconds)), total('MCP calls', t.mcp_calls)));
  body.append(table('Tokens per model', ['Agent', 'Model', 'Steps', 'Input', 'Output'],
    u.tokens.map((r) => [r.agent, r.model, r.steps, r.input_tokens, r.output_tokens]), 'usage-tokens'));
  body.append(table('Sandbox time per environment', ['Agent', 'Environment', 'Time'],
    u.sandboxes.map((r) => [r.agent, r.environment, duration(r.sandbox_seconds)]), 'usage-sandboxes'));
  body.append(table('MCP calls per server', ['Agent', 'Server', 'Calls', 'Errors', 'Refused'],
    u.mcp.map((r) => [r.agent, r.server, r.calls, r.errors, r.refused]), 'usage-mcp'));
  body.append(h('p.muted.small', `From ${fullTime(u.from)} to ${fullTime(u.to)}.`));
}

function total(label, value) {
  return h('div.usage-total', h('span.usage-total-value', String(value ?? 0)), h('span.muted.small', label));
}

function duration(sec) {
  sec = sec || 0;
  if (sec < 60) return `${sec} s`;
  if (sec < 3600) return `${Math.floor(sec / 60)} min ${sec % 60} s`;
  return `${Math.floor(sec / 3600)} h ${Math.floor((sec % 3600) / 60)} min`;
}

function table(caption, head, rows, id) {
  if (rows.length === 0) return h('section.usage-section', { id }, h('h2', caption), h('p.muted', 'Nothing in this window.'));
  return h('section.usage-section', { id }, h('h2', caption),
    h('table.usage-table', h('thead', h('tr', head.map((c) => h('th', { scope: 'col' }, c)))),
      h('tbody', rows.map((r) => h('tr', r.map((c) => h('td', String(c))))))));
}
