// The Trueforge chat page. It talks to /api/v1 of the same origin: a session cookie set
// by POST /login, and the CSRF token it returns sent as X-Trueforge-CSRF on every
// state-changing request. A conversation is the session's event log, streamed as
// Server-Sent Events (one per committed event, id = its sequence number) plus "delta"
// events carrying the model's text as it is generated.

import { h, append, clear, icon, fillIcons, formatBytes, relTime, fullTime, clip, firstLine } from './dom.js';
import { render as markdown } from './md.js';
import { highlight } from './hl.js';
import { Attachments, attachmentChips, dropTarget } from './attach.js';
import { renderEnvironments, renderUsage } from './pages.js';

const $ = (id) => document.getElementById(id);

// Every committed event kind the page listens for (an EventSource only delivers named
// events it has a listener for).
const KINDS = [
  'user_message', 'model_message', 'usage', 'tool_call', 'tool_result', 'cancelled', 'error', 'limit',
  'run_interrupted', 'run_finished', 'sandbox_provisioned', 'sandbox_resumed', 'sandbox_stopped',
  'sandbox_archived', 'sandbox_deleted', 'sandbox_lost', 'sandbox_recovered', 'sandbox_reclaimed',
  'sandbox_network_reattached', 'egress', 'mcp_call', 'skill_loaded', 'approval_requested', 'approval_decided',
];

const state = {
  me: null, // {user, admin, csrf}
  agents: [],
  envs: [],
  envsFor: {}, // agent -> the environments it may run on (null while loading)
  sessions: [],
  session: null, // the open session ({id, agent, ...}); null on a new chat
  draftAgent: '',
  draftEnv: '', // '' = the agent's own environment
  es: null,
  esGen: 0,
  esOpen: Promise.resolve(), // settles when the event stream is open
  lastSeq: 0,
  live: false,
  sending: false,
  cancelling: false,
  pendingRun: null,
  finishedRuns: new Set(),
  knownRunning: null, // GET /sessions/{id}'s running, when it says
  replayUpTo: null, // its last_seq: events up to it are history
  deltaOffsets: false, // deltas carry byte offsets (so a reconnect replaces, not repeats)
  view: null, // rendering state of the open conversation (see newView)
  approvals: [], // pending approvals the user may decide, of every session (GET /approvals)
};

// ---------------------------------------------------------------------------------
// API

class APIError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

async function api(method, path, body) {
  const opts = { method, headers: { Accept: 'application/json' }, credentials: 'same-origin', cache: 'no-store' };
  if (body !== undefined) {
    opts.headers['Content-Type'] = 'application/json';
    opts.body = JSON.stringify(body);
  }
  if (method !== 'GET' && method !== 'HEAD' && state.me && state.me.csrf) opts.headers['X-Trueforge-CSRF'] = state.me.csrf;
  let res;
  try {
    res = await fetch('/api/v1' + path, opts);
  } catch {
    throw new APIError(0, 'network', 'The harness cannot be reached. Check your connection and try again.');
  }
  let data = null;
  if ((res.headers.get('Content-Type') || '').includes('json')) data = await res.json().catch(() => null);
  if (!res.ok) {
    const e = (data && data.error) || {};
    const err = new APIError(res.status, e.code || String(res.status), e.message || `${res.status} ${res.statusText}`);
    if (res.status === 401 && path !== '/login' && state.me) signedOut('Your session has ended. Sign in again.');
    throw err;
  }
  return data;
}

const sessionPath = (id) => '/sessions/' + encodeURIComponent(id);

// me is who is signed in ({user, admin, csrf}), from /login or /me (which may name the
// fields name and csrf_token).
function me(d) {
  d = d || {};
  return { user: d.user ?? d.name ?? '', admin: !!d.admin, csrf: d.csrf ?? d.csrf_token ?? '', traceURL: d.trace_url ?? '' };
}

// listOf reads a list answer: a bare array, or an object holding it under key.
function listOf(d, key) {
  if (Array.isArray(d)) return d;
  if (d && Array.isArray(d[key])) return d[key];
  return [];
}

// ---------------------------------------------------------------------------------
// Sign in / out

async function boot() {
  fillIcons(document.body);
  wireStatic();
  try {
    state.me = me(await api('GET', '/me'));
  } catch (e) {
    state.me = null;
    if (e.status !== 401) showLoginError(e.message);
  }
  $('boot').hidden = true;
  if (state.me) await enterApp();
  else showLogin();
}

function showLogin(message) {
  closeStream();
  $('shell').hidden = true;
  $('login').hidden = false;
  if (message) showLoginError(message);
  $('token').focus();
}

function showLoginError(message) {
  const el = $('login-error');
  el.textContent = message;
  el.hidden = !message;
}

async function login(ev) {
  ev.preventDefault();
  const token = $('token').value.trim();
  if (!token) return;
  $('login-submit').disabled = true;
  showLoginError('');
  try {
    state.me = me(await api('POST', '/login', { token }));
    $('token').value = '';
    await enterApp();
  } catch (e) {
    showLoginError(e.status === 401 || e.status === 403 ? 'That token is not valid. Check it, or ask for a new one.' : e.message);
  } finally {
    $('login-submit').disabled = false;
  }
}

async function logout() {
  try {
    await api('POST', '/logout');
  } catch {
    // signed out locally either way
  }
  signedOut();
}

function signedOut(message) {
  state.me = null;
  state.session = null;
  state.sessions = [];
  state.approvals = [];
  renderApprovalsBadge();
  closeStream();
  clear($('conversation'));
  clear($('sessions'));
  history.replaceState(null, '', '#/');
  showLogin(message);
}

async function enterApp() {
  $('login').hidden = true;
  $('shell').hidden = false;
  $('me-name').textContent = state.me.user;
  $('me-avatar').textContent = (state.me.user || '?').slice(0, 1).toUpperCase();
  $('me-admin').hidden = !state.me.admin;
  const [agents, envs] = await Promise.all([
    api('GET', '/agents').catch((e) => (toast(e.message, 'error'), [])),
    api('GET', '/environments').catch(() => []),
  ]);
  state.agents = listOf(agents, 'agents');
  state.envs = listOf(envs, 'environments');
  const saved = localStorage.getItem('trueforge.agent');
  const usable = state.agents.filter((a) => a.ready !== false);
  state.draftAgent = usable.some((a) => a.name === saved) ? saved : (usable[0] || state.agents[0])?.name || '';
  fillAgentSelect();
  await refreshSessions();
  await route();
  refreshApprovals();
}

// ---------------------------------------------------------------------------------
// Sessions list

async function refreshSessions() {
  try {
    const list = await api('GET', '/sessions');
    state.sessions = listOf(list, 'sessions').slice().sort((a, b) => stamp(b) - stamp(a));
  } catch (e) {
    if (e.status !== 401) toast(e.message, 'error');
  }
  renderSessions();
}

const stamp = (s) => Date.parse(s.updated_at || s.created_at) || 0;

function sessionTitle(s) {
  return s.title || s.preview || s.first_message || s.agent || 'Chat';
}

function renderSessions() {
  const nav = clear($('sessions'));
  if (!state.sessions.length) {
    nav.append(h('p.sessions-empty', 'No chats yet. Start one with New chat.'));
    return;
  }
  const now = new Date();
  const today = new Date(now.getFullYear(), now.getMonth(), now.getDate()).getTime();
  const groups = [
    ['Today', today],
    ['Yesterday', today - 86400e3],
    ['Previous 7 days', today - 7 * 86400e3],
    ['Older', -Infinity],
  ];
  let current = null;
  let list = null;
  for (const s of state.sessions) {
    const t = stamp(s);
    const g = groups.find(([, from]) => t >= from)[0];
    if (g !== current) {
      current = g;
      list = h('ul.session-group');
      nav.append(h('h2.group-label', g), list);
    }
    const title = sessionTitle(s);
    const active = state.session && state.session.id === s.id;
    const a = h('a.session-item', { href: '#/s/' + encodeURIComponent(s.id), 'aria-current': active ? 'page' : null, dataset: { id: s.id } },
      h('span.s-title', clip(title, 80)),
      h('span.s-meta', title !== s.agent ? h('span.s-agent', s.agent) : null, h('time.s-time', { datetime: s.updated_at || s.created_at, title: fullTime(s.updated_at || s.created_at) }, relTime(s.updated_at || s.created_at))));
    const del = h('button.icon-btn.s-delete', { type: 'button', 'aria-label': `Delete the chat with ${s.agent}`, title: 'Delete chat', onclick: (ev) => deleteSession(ev, s) }, icon('trash'));
    list.append(h('li', { class: active ? 'active' : null }, a, del));
  }
}

async function deleteSession(ev, s) {
  ev.preventDefault();
  ev.stopPropagation();
  if (!confirm(`Delete this chat with ${s.agent}? Its messages and offered files go with it.`)) return;
  try {
    await api('DELETE', sessionPath(s.id));
    state.sessions = state.sessions.filter((x) => x.id !== s.id);
    if (state.session && state.session.id === s.id) location.hash = '#/';
    renderSessions();
    toast('Chat deleted.');
  } catch (e) {
    toast(e.message, 'error');
  }
}

// ---------------------------------------------------------------------------------
// Routing: #/ is a new chat, #/s/<id> an existing one, #/envs and #/usage the pages
// (pages.js).

let routing = Promise.resolve();

function route() {
  routing = routing.then(doRoute, doRoute);
  return routing;
}

async function doRoute() {
  if (!state.me) return;
  closeDrawer();
  if (showPage(location.hash)) return;
  const m = /^#\/s\/(.+)$/.exec(location.hash);
  const id = m ? decodeURIComponent(m[1]) : null;
  if (id && state.session && state.session.id === id) return;
  if (!id) return newChat();
  let s;
  try {
    s = await api('GET', sessionPath(id));
  } catch (e) {
    if (e.status === 404) toast('That chat does not exist, or is not yours.', 'error');
    else if (e.status !== 401) toast(e.message, 'error');
    history.replaceState(null, '', '#/');
    return newChat();
  }
  openSession(s);
}

// PAGES are the views other than the chat, by route: their title and what fills them.
const PAGES = {
  '#/envs': ['Environments', (root) => renderEnvironments(root, (path) => api('GET', path))],
  '#/usage': ['Usage', (root) => renderUsage(root, (path) => api('GET', path), state.me)],
};

// showPage shows the page of route hash and reports whether there is one; otherwise it
// shows the chat.
function showPage(hash) {
  const page = PAGES[hash];
  $('page-view').hidden = !page;
  $('chat-view').hidden = !!page;
  for (const a of document.querySelectorAll('.side-link')) {
    if (a.getAttribute('href') === hash) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  if (!page) return false;
  closeStream();
  state.session = null;
  renderSessions();
  $('page-title').textContent = page[0];
  page[1]($('page'));
  return true;
}

function newChat() {
  closeStream();
  state.session = null;
  state.live = false;
  state.knownRunning = null;
  state.replayUpTo = null;
  state.draftEnv = '';
  state.view = newView();
  clear($('conversation'));
  renderEmpty();
  renderHeader();
  renderSessions();
  updateComposer();
  $('input').focus({ preventScroll: true });
}

function openSession(s) {
  closeStream();
  state.session = s;
  state.live = false;
  // What GET /sessions/{id} says of the run: the log up to last_seq is history, and a
  // user_message in it makes the page live only when the session is running.
  state.knownRunning = typeof s.running === 'boolean' ? s.running : null;
  state.replayUpTo = typeof s.last_seq === 'number' ? s.last_seq : null;
  state.lastSeq = 0;
  state.pendingRun = null;
  state.finishedRuns = new Set();
  state.view = newView();
  clear($('conversation'));
  $('empty').hidden = true;
  renderHeader();
  renderSessions();
  if (state.knownRunning) {
    state.pendingRun = s.run_id || null;
    setLive(true);
  }
  updateComposer();
  connect(s.id);
}

function renderHeader() {
  const s = state.session;
  $('chat-title').textContent = s ? sessionTitleFor(s) : 'New chat';
  const sub = clear($('chat-sub'));
  if (s) {
    const agent = agentByName(s.agent);
    const env = s.environment || (s.sandbox && s.sandbox.environment) || (agent && agent.sandbox_enabled ? agent.environment : '');
    append(sub, [s.agent, env ? ` · ${env}` : '', ' · ', h('time', { datetime: s.created_at, title: fullTime(s.created_at) }, relTime(s.created_at))]);
  }
  $('files-btn').hidden = !s;
  closeFiles();
  renderApprovalsBadge();
}

function sessionTitleFor(s) {
  return (state.view && state.view.title) || s.title || s.preview || s.first_message || s.agent;
}

const agentByName = (name) => state.agents.find((a) => a.name === name);

function renderEmpty() {
  const el = clear($('empty'));
  el.hidden = false;
  const agent = agentByName(state.draftAgent);
  if (!state.agents.length) {
    el.append(h('div.empty-inner',
      h('div.empty-mark', h('img', { src: '/icon.svg', alt: '', width: 48, height: 48 })),
      h('h1', 'No agents for you yet'),
      h('p.muted', 'An agent appears here once it is published with Terraform (trueforge_agent) and you may run it.')));
    return;
  }
  const skills = (agent && agent.skills) || [];
  el.append(h('div.empty-inner',
    h('div.empty-mark', h('img', { src: '/icon.svg', alt: '', width: 48, height: 48 })),
    h('h1', agent ? `Chat with ${agent.name}` : 'Start a chat'),
    agent && agent.description ? h('p.empty-desc', agent.description) : null,
    agent ? h('div.empty-facts',
      h('span.fact', icon(agent.sandbox_enabled ? 'box' : 'ban'), agent.sandbox_enabled ? `Sandbox on ${envLabel(agent)}` : 'No sandbox'),
      agent.code_mode ? h('span.fact', icon('code'), 'Code Mode') : null,
      skills.length ? h('span.fact', icon('book'), `${skills.length} skill${skills.length > 1 ? 's' : ''}: ${skills.map(skillName).join(', ')}`) : null) : null,
    h('p.muted.small', agent && agent.sandbox_enabled
      ? 'A sandbox starts only when the agent needs to run code or touch files. Pick another environment under Tools → Environment.'
      : 'Pick another agent below the message box.')));
}

function envLabel(agent) {
  return state.draftEnv && state.draftAgent === agent.name ? state.draftEnv : agent.environment || 'default';
}

const skillName = (s) => (typeof s === 'string' ? s : s && s.name) || '';

// ---------------------------------------------------------------------------------
// Composer

function fillAgentSelect() {
  const sel = clear($('agent'));
  for (const a of state.agents) {
    sel.append(h('option', { value: a.name, disabled: a.ready === false, title: a.not_ready || null }, a.ready === false ? `${a.name} (not ready)` : a.name));
  }
  sel.value = state.draftAgent;
  sel.disabled = !state.agents.length;
}

function updateComposer() {
  const s = state.session;
  $('agent-pick').hidden = !!s;
  const fixed = $('agent-fixed');
  fixed.hidden = !s;
  if (s) {
    clear(fixed).append(icon('agent'), s.agent);
    fixed.title = 'The agent of this chat';
  }
  const chip = clear($('env-chip'));
  const agent = agentByName(s ? s.agent : state.draftAgent);
  const env = s ? s.environment : state.draftEnv;
  chip.hidden = !env;
  if (env) {
    chip.append(icon('box'), env);
    if (!s) {
      chip.append(h('button.chip-x', { type: 'button', 'aria-label': 'Use the agent’s own environment', title: 'Use the agent’s own environment', onclick: () => pickEnv('') }, icon('x')));
    }
  }
  const text = $('input').value.trim();
  $('send').hidden = state.live;
  $('cancel').hidden = !state.live;
  $('send').disabled = state.live || state.sending || (!text && !attached().count) || (!s && !agent);
  $('attach-btn').disabled = state.sending;
  $('cancel').disabled = state.cancelling;
  clear($('cancel')).append(icon('stop'), state.cancelling ? 'Cancelling…' : 'Cancel');
  $('input').placeholder = agent ? `Message ${agent.name}…` : 'Message the agent…';
  if ($('tools-menu').hidden === false) renderToolsMenu();
}

function autosize() {
  const ta = $('input');
  ta.style.height = 'auto';
  ta.style.height = Math.min(ta.scrollHeight, Math.round(window.innerHeight * 0.4)) + 'px';
}

// attached is the composer's pending files (attach.js).
let pending = null;
function attached() {
  if (!pending) pending = new Attachments($('attach-list'), () => updateComposer());
  return pending;
}

async function send(ev) {
  if (ev) ev.preventDefault();
  const input = $('input');
  const files = attached();
  const text = input.value.trim() || (files.count ? `Attached: ${files.names()}` : '');
  if (!text || state.live || state.sending) return;
  state.sending = true;
  updateComposer();
  try {
    if (!state.session) {
      const agent = state.draftAgent;
      if (!agent) throw new APIError(0, 'no_agent', 'Pick an agent first.');
      const body = { agent };
      if (state.draftEnv) body.environment = state.draftEnv;
      const created = await api('POST', '/sessions', body);
      localStorage.setItem('trueforge.agent', agent);
      let s;
      try {
        s = await api('GET', sessionPath(created.id));
      } catch {
        s = { id: created.id, agent, environment: state.draftEnv || undefined, created_at: new Date().toISOString() };
      }
      if (!s.environment && state.draftEnv) s.environment = state.draftEnv;
      history.pushState(null, '', '#/s/' + encodeURIComponent(created.id));
      openSession(s);
      refreshSessions();
      // Listen before speaking, so that the first answer's text streams in from its
      // first word (deltas are not stored; a stream that joins late gets only the rest).
      await Promise.race([state.esOpen, new Promise((r) => setTimeout(r, 3000))]);
    }
    const sid = state.session.id;
    const body = { text };
    if (files.count) body.attachments = await files.uploadAll(sid, state.me && state.me.csrf);
    const res = await api('POST', sessionPath(sid) + '/messages', body);
    files.clear();
    input.value = '';
    autosize();
    if (state.session && state.session.id === sid && res && res.run_id && !state.finishedRuns.has(res.run_id)) {
      state.pendingRun = res.run_id;
      setLive(true);
    }
  } catch (e) {
    if (e.status === 409) {
      setLive(true);
      toast('The agent is still working on the last message. Wait for it, or cancel it.');
    } else if (e.status !== 401) {
      toast(e.message, 'error');
    }
  } finally {
    state.sending = false;
    updateComposer();
  }
}

async function cancelRun() {
  if (!state.session || state.cancelling) return;
  state.cancelling = true;
  updateComposer();
  try {
    await api('POST', sessionPath(state.session.id) + '/cancel');
  } catch (e) {
    if (e.status === 409 || e.status === 404) setLive(false);
    if (e.status !== 401) toast(e.message, 'error');
    state.cancelling = false;
    updateComposer();
  }
}

function setLive(live) {
  state.live = live;
  if (!live) state.cancelling = false;
  updateComposer();
  const v = state.view;
  if (v && v.group) v.group.el.classList.toggle('live', live);
}

function onKey(ev) {
  if (ev.key === 'Enter' && !ev.shiftKey && !ev.isComposing && !ev.altKey && !ev.ctrlKey && !ev.metaKey) {
    ev.preventDefault();
    send();
  }
}

// Tools menu: the Environment tab picks a Ready environment for a new chat (an agent
// with a sandbox only); the Agent tab says what the agent is.

function toggleTools(open) {
  const menu = $('tools-menu');
  const show = open ?? menu.hidden;
  menu.hidden = !show;
  $('tools-btn').setAttribute('aria-expanded', String(show));
  if (show) {
    renderToolsMenu();
    const first = menu.querySelector('[aria-selected="true"]');
    if (first) first.focus();
  }
}

// envsFor is the environments agent may run on (GET /environments?agent=): one with
// secrets is offered only to agents whose owner may use them. The first call loads them
// and renders the panels again.
function envsFor(agent) {
  if (!(agent in state.envsFor)) {
    state.envsFor[agent] = null;
    api('GET', '/environments?agent=' + encodeURIComponent(agent))
      .then((r) => listOf(r, 'environments'), () => [])
      .then((list) => {
        state.envsFor[agent] = list;
        renderToolsMenu();
      });
  }
  return state.envsFor[agent] || [];
}

function selectTab(which) {
  for (const t of ['env', 'agent']) {
    $('tab-' + t).setAttribute('aria-selected', String(t === which));
    $('panel-' + t).hidden = t !== which;
  }
}

function renderToolsMenu() {
  const s = state.session;
  const agent = agentByName(s ? s.agent : state.draftAgent);
  const panel = clear($('panel-env'));
  if (!agent) {
    panel.append(h('p.panel-note', 'Pick an agent first.'));
  } else if (!agent.sandbox_enabled) {
    panel.append(h('p.panel-note', icon('ban'), h('span', h('strong', agent.name), ' answers without a sandbox, so there is no environment to pick.')));
  } else if (s) {
    panel.append(h('p.panel-note', icon('box'), h('span', 'This chat runs on ', h('strong', s.environment || agent.environment || 'default'),
      '. The environment is chosen when a chat starts: start a new chat to pick another.')));
  } else {
    const list = h('div.env-list', { role: 'radiogroup', 'aria-label': 'Environment' });
    const opt = (value, title, detail) => {
      const id = 'env-opt-' + (value || 'agent-default');
      const input = h('input', { type: 'radio', name: 'env', id, value, checked: state.draftEnv === value, onchange: () => pickEnv(value) });
      return h('label.env-opt', { for: id, dataset: { env: value } }, input, h('span.env-text', h('span.env-name', title), h('span.env-detail', detail)));
    };
    list.append(opt('', `Agent default (${agent.environment || 'default'})`, 'The environment the agent was published with'));
    const ready = envsFor(agent.name).filter((e) => e.name !== agent.environment);
    for (const e of ready) {
      list.append(opt(e.name, e.name, [e.image, e.cpu ? `${e.cpu} CPU` : '', e.memory ? `${e.memory} GB memory` : '', e.disk ? `${e.disk} GB disk` : ''].filter(Boolean).join(' · ')));
    }
    panel.append(list, h('p.panel-foot', 'Only Ready environments are listed. The choice applies to this one chat.'));
  }
  const ap = clear($('panel-agent'));
  if (agent) {
    const skills = agent.skills || [];
    ap.append(
      h('p.agent-name', agent.name),
      agent.description ? h('p.agent-desc', agent.description) : null,
      h('dl.agent-facts',
        h('dt', 'Sandbox'), h('dd', agent.sandbox_enabled ? `on, ${agent.environment || 'default'}` : 'off'),
        h('dt', 'Code Mode'), h('dd', agent.code_mode ? 'on' : 'off'),
        h('dt', 'Skills'), h('dd', skills.length ? skills.map(skillName).join(', ') : 'none')));
  }
}

function pickEnv(name) {
  state.draftEnv = name;
  updateComposer();
  if (!state.session) renderEmpty();
}

// ---------------------------------------------------------------------------------
// Event stream

function connect(id) {
  closeStream();
  const gen = ++state.esGen;
  const es = new EventSource('/api/v1' + sessionPath(id) + '/events');
  state.es = es;
  let dropped = false;
  const alive = () => gen === state.esGen;
  let opened;
  state.esOpen = new Promise((resolve) => (opened = resolve));
  es.onopen = () => {
    opened();
    if (!alive()) return;
    if (dropped && !state.deltaOffsets) {
      // Deltas without offsets cannot be placed after a gap: the text streamed so far
      // is dropped, and the committed model_message brings the whole step's text.
      resetStream();
    }
    dropped = false;
    setConn('');
  };
  es.onerror = () => {
    if (!alive()) return;
    dropped = true;
    if (es.readyState === EventSource.CLOSED) {
      // The server refused the stream (signed out, deleted chat, server restart
      // without the session): find out which, and retry if it can be retried.
      setConn('reconnecting');
      api('GET', sessionPath(id)).then(
        () => setTimeout(() => alive() && reopen(id, gen), 2000),
        (e) => {
          if (!alive()) return;
          if (e.status === 404) {
            setConn('');
            toast('This chat is gone.', 'error');
            location.hash = '#/';
          } else if (e.status !== 401) setTimeout(() => alive() && reopen(id, gen), 3000);
        });
    } else {
      setConn('reconnecting');
    }
  };
  for (const kind of KINDS) {
    es.addEventListener(kind, (ev) => alive() && onEvent(kind, ev));
  }
  es.addEventListener('delta', (ev) => alive() && onDelta(ev));
  es.addEventListener('message', (ev) => alive() && onUnnamed(ev));
}

// reopen starts a new EventSource after the browser gave up on one. It cannot send
// Last-Event-ID, so the server replays the log from the start and the seq check drops
// what was shown.
function reopen(id, gen) {
  if (gen !== state.esGen || !state.session || state.session.id !== id) return;
  const keep = state.lastSeq;
  connect(id);
  state.lastSeq = keep;
}

function closeStream() {
  state.esGen++;
  if (state.es) state.es.close();
  state.es = null;
  setConn('');
}

function setConn(mode) {
  const el = $('conn');
  clear(el);
  el.hidden = !mode;
  el.className = 'conn' + (mode ? ' ' + mode : '');
  if (mode === 'reconnecting') el.append(h('span.dot'), 'Reconnecting…');
}

function onEvent(kind, ev) {
  // The harness's "error" kind shares its name with EventSource's own error event (a
  // dropped connection), which carries no data.
  if (typeof ev.data !== 'string') return;
  const seq = Number(ev.lastEventId);
  if (Number.isFinite(seq) && seq > 0) {
    if (seq <= state.lastSeq) return; // shown already
    state.lastSeq = seq;
  }
  let p;
  try {
    p = JSON.parse(ev.data);
  } catch {
    p = {};
  }
  renderEvent(kind, p || {}, seq);
}

function onUnnamed(ev) {
  // A server that names events in the data instead ({kind, payload}).
  try {
    const d = JSON.parse(ev.data);
    if (d && d.kind) onEvent(d.kind, { lastEventId: ev.lastEventId || d.seq, data: JSON.stringify(d.payload || {}) });
  } catch {
    // not ours
  }
}

// A delta is {stream, delta (or text), offset}: a chunk of the running step's text
// ("text") or of a command's output ("stdout", "stderr"), at a byte offset in it. Offset
// 0 starts the text afresh: after a reconnect the server sends the step's text so far
// that way, so it replaces what the page had rather than repeating it.
function onDelta(ev) {
  let d;
  try {
    d = JSON.parse(ev.data);
  } catch {
    return;
  }
  const chunk = d && (typeof d.delta === 'string' ? d.delta : d.text);
  if (typeof chunk !== 'string') return;
  if (typeof d.offset === 'number') state.deltaOffsets = true;
  if (d.stream && d.stream !== 'text') {
    liveOutput(d.stream, chunk, d.offset);
    return;
  }
  const g = group();
  if (!g.stream) {
    g.stream = { text: '', bytes: 0, el: h('div.agent-text.streaming', { dataset: { streamed: 'true' } }) };
    g.body.append(g.stream.el);
  }
  place(g.stream, chunk, d.offset);
  scheduleStreamPaint(g.stream);
}

const utf8 = new TextEncoder();
const fromUTF8 = new TextDecoder();

// place puts chunk at byte offset of buf ({text, bytes}); without an offset it appends.
function place(buf, chunk, offset) {
  const n = utf8.encode(chunk).length;
  if (typeof offset !== 'number' || offset >= buf.bytes) {
    // At the end (or past it, after a gap the committed message will fill).
    buf.text += chunk;
    buf.bytes += n;
  } else if (offset === 0) {
    buf.text = chunk;
    buf.bytes = n;
  } else {
    buf.text = fromUTF8.decode(utf8.encode(buf.text).slice(0, offset)) + chunk;
    buf.bytes = offset + n;
  }
}

let paintQueued = null;
function scheduleStreamPaint(st) {
  paintQueued = st;
  requestAnimationFrame(() => {
    if (paintQueued !== st) return;
    paintQueued = null;
    const stick = nearBottom();
    clear(st.el).append(markdown(st.text));
    if (stick) scrollToBottom();
  });
}

function resetStream() {
  const g = state.view && state.view.group;
  if (g && g.stream) {
    g.stream.el.remove();
    g.stream = null;
  }
}

// ---------------------------------------------------------------------------------
// Conversation rendering

function newView() {
  return { group: null, steps: new Map(), lastStep: null, title: '', approvals: new Map() };
}

// A group is the agent's part of one turn: text, tool steps, notices, files, in order.
function group() {
  const v = state.view;
  if (!v.group) {
    const body = h('div.agent-body');
    const el = h('div.turn.agent', h('div.avatar-agent', { 'aria-hidden': 'true' }, h('img', { src: '/icon.svg', alt: '', width: 28, height: 28 })), body);
    $('conversation').append(el);
    v.group = { el, body, stream: null, tokensIn: 0, tokensOut: 0, replay: false };
  }
  return v.group;
}

function endGroup() {
  state.view.group = null;
}

function addToGroup(node) {
  const stick = nearBottom();
  const g = group();
  // Keep a streaming text last: a committed event that arrives while it streams goes
  // before it (its text is the model's next words).
  if (g.stream && g.stream.el.parentNode === g.body) g.body.insertBefore(node, g.stream.el);
  else g.body.append(node);
  if (stick) scrollToBottom();
  return node;
}

// traceLink links a turn to its trace in the operator's tracing backend (serve
// --trace-url), when both the link and the turn's trace id exist.
function traceLink(id) {
  const tmpl = state.me && state.me.traceURL;
  if (!tmpl || !/^[0-9a-f]{32}$/.test(id || '')) return null;
  return h('a.trace-link', { href: tmpl.split('{trace_id}').join(id), target: '_blank', rel: 'noopener noreferrer', title: 'This turn\'s trace (' + id + ')' }, 'trace');
}

function renderEvent(kind, p, seq) {
  const stick = nearBottom();
  switch (kind) {
    case 'user_message': {
      endGroup();
      if (!state.view.title && p.text) {
        state.view.title = firstLine(p.text);
        $('chat-title').textContent = clip(state.view.title, 120);
      }
      $('conversation').append(h('div.turn.user', { dataset: { seq } }, h('div.bubble', markdownPlain(p.text), attachmentChips(p.attachments)), traceLink(p.trace_id)));
      const history = state.replayUpTo !== null && seq <= state.replayUpTo;
      if (!history || state.knownRunning !== false) setLive(true);
      scrollToBottom();
      break;
    }
    case 'model_message': {
      const g = group();
      if (p.replay && !g.replay) {
        g.replay = true;
        g.body.prepend(h('div.replay-tag', { title: 'A scripted model produced this answer, not a live model' }, icon('refresh'), 'Scripted replay'));
      }
      const text = p.text || '';
      if (g.stream) {
        const el = g.stream.el;
        g.stream = null;
        el.classList.remove('streaming');
        if (text) clear(el).append(markdown(text));
        else el.remove();
      } else if (text) {
        addToGroup(h('div.agent-text', markdown(text)));
      }
      break;
    }
    case 'tool_call':
      stepFor(p.id, p.name, p.arguments);
      break;
    case 'tool_result':
      finishStep(p);
      break;
    case 'usage': {
      const g = group();
      g.tokensIn = p.run_input_tokens || g.tokensIn;
      g.tokensOut = p.run_output_tokens || g.tokensOut;
      break;
    }
    case 'mcp_call':
      mcpCall(p);
      break;
    case 'approval_requested':
      approvalRequested(p, seq);
      refreshApprovalsSoon();
      break;
    case 'approval_decided':
      approvalDecided(p);
      refreshApprovalsSoon();
      break;
    case 'sandbox_provisioned':
      addToGroup(notice('box', 'sandbox', [
        'Sandbox started on ', h('strong', p.environment || 'its environment'),
        typeof p.took_ms === 'number' ? ` in ${formatMS(p.took_ms)}` : '',
      ], provisionDetail(p)));
      break;
    case 'sandbox_resumed':
      addToGroup(notice('refresh', 'sandbox', [`Sandbox resumed${p.from ? ` (it was ${p.from})` : ''}; its files are as they were.`]));
      break;
    case 'sandbox_stopped':
    case 'sandbox_archived':
    case 'sandbox_deleted': {
      const st = kind.slice('sandbox_'.length);
      addToGroup(notice('clock', 'quiet', [`Sandbox ${st}${p.idle_minutes ? ` after ${p.idle_minutes} idle minutes` : ''}.`,
        st === 'deleted' ? ' The next code step starts a fresh one.' : ' The next code step resumes it.']));
      break;
    }
    case 'sandbox_lost':
      addToGroup(notice('alert', 'warn', [`The sandbox was lost${p.reason ? `: ${p.reason}` : ''}. The next code step recovers it or starts a fresh one.`],
        p.uncertain && p.uncertain.length ? [h('p', 'Files that may be incomplete: ', p.uncertain.join(', '))] : null));
      break;
    case 'sandbox_recovered':
      addToGroup(notice('check', 'quiet', ['The sandbox was recovered.']));
      break;
    case 'sandbox_reclaimed':
      addToGroup(notice('refresh', 'quiet', [`Commands left running by an earlier harness were stopped${p.reason ? ` (${p.reason})` : ''}.`]));
      break;
    case 'sandbox_network_reattached':
      addToGroup(notice('globe', 'quiet', ['The sandbox’s network was reattached.']));
      break;
    case 'skill_loaded':
      addToGroup(notice('book', 'skill', ['Loaded skill ', h('strong', p.name || '?'),
        p.files ? ` (${p.files} file${p.files === 1 ? '' : 's'}, ${formatBytes(p.bytes || 0)})` : '',
        p.path ? [' into ', h('code', p.path)] : '']));
      break;
    case 'egress':
      if (p.allowed === false) {
        addToGroup(notice('ban', 'quiet', ['Blocked a network request to ', h('code', `${p.host || '?'}${p.port && p.port !== '443' && p.port !== '80' ? ':' + p.port : ''}`),
          p.reason ? ` (${p.reason.replace(/_/g, ' ')})` : '']));
      }
      break;
    case 'cancelled':
      addToGroup(notice('stop', 'quiet', ['Cancelled. Running commands were stopped; the chat goes on with your next message.'])).title = p.reason || '';
      stopPendingSteps('cancelled');
      break;
    case 'error':
      addToGroup(callout('error', 'Something went wrong' + (p.where ? ` (${p.where})` : ''), p.message || ''));
      break;
    case 'limit':
      addToGroup(callout('warn', p.limit === 'budget' ? 'Stopped at a budget' : 'Stopped at a limit', limitText(p)));
      break;
    case 'run_interrupted':
      addToGroup(notice('alert', 'warn', [`The previous run was interrupted${p.reason ? `: ${p.reason}` : ''}.`]));
      stopPendingSteps('interrupted');
      break;
    case 'run_finished':
      runFinished(p);
      break;
    default:
      break;
  }
  if (stick) scrollToBottom();
}

function markdownPlain(text) {
  // The user's own words: plain text, line breaks kept.
  const frag = document.createDocumentFragment();
  String(text ?? '').split('\n').forEach((l, i) => {
    if (i) frag.append(h('br'));
    frag.append(l);
  });
  return frag;
}

function runFinished(p) {
  if (p.run_id) state.finishedRuns.add(p.run_id);
  const g = state.view.group;
  if (g) {
    const g2 = g;
    if (g2.stream) {
      g2.stream.el.classList.remove('streaming');
      g2.stream = null;
    }
    const bits = [];
    if (p.status && p.status !== 'completed') bits.push(statusLabel(p.status));
    if (p.steps) bits.push(`${p.steps} step${p.steps === 1 ? '' : 's'}`);
    const tokens = (p.input_tokens || g2.tokensIn || 0) + (p.output_tokens || g2.tokensOut || 0);
    if (tokens) bits.push(`${formatCount(tokens)} tokens`);
    if (bits.length) g2.body.append(h('div.turn-meta', { dataset: { status: p.status || '' } }, bits.join(' · ')));
  }
  stopPendingSteps(p.status === 'cancelled' ? 'cancelled' : 'stopped');
  endGroup();
  if (!state.pendingRun || state.pendingRun === p.run_id || state.finishedRuns.has(state.pendingRun)) {
    state.pendingRun = null;
    setLive(false);
  }
  refreshSessionsSoon();
}

let refreshTimer = null;
function refreshSessionsSoon() {
  clearTimeout(refreshTimer);
  refreshTimer = setTimeout(refreshSessions, 400);
}

function statusLabel(s) {
  return { cancelled: 'Cancelled', failed: 'Failed', limit: 'Stopped at a limit', interrupted: 'Interrupted' }[s] || s;
}

// limitText says which limit stopped the turn; a cumulative budget's refusal says in
// its detail which budget, its window and when it refills.
function limitText(p) {
  let text = '';
  if (p.limit === 'token_budget') text = `The turn used ${formatCount(p.used || 0)} tokens of its budget of ${formatCount(p.value || 0)}.`;
  else if (p.limit === 'max_turns') text = `The agent reached its limit of ${p.value} model steps for one message.`;
  else if (!p.detail) text = `${p.limit || 'limit'}: ${p.value ?? ''}`;
  return [text, p.detail || ''].filter(Boolean).join(' ');
}

function formatMS(ms) {
  return ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(ms < 10000 ? 1 : 0)} s`;
}

function formatCount(n) {
  return n >= 10000 ? `${Math.round(n / 1000)}k` : n >= 1000 ? `${(n / 1000).toFixed(1)}k` : String(n);
}

function provisionDetail(p) {
  const rows = [];
  if (p.sandbox_id) rows.push(['Sandbox', p.sandbox_id]);
  if (p.snapshot_id) rows.push(['Snapshot', p.snapshot_id]);
  if (p.provider) rows.push(['Provider', p.provider_type ? `${p.provider} (${p.provider_type})` : p.provider]);
  if (p.reason) rows.push(['Why', p.reason]);
  if (p.network && Object.keys(p.network).length) rows.push(['Network', Object.entries(p.network).map(([k, v]) => `${k}: ${Array.isArray(v) ? v.join(', ') || '—' : v}`).join('; ')]);
  if (p.limits_enforced === false) {
    const un = (p.unenforced_limits || []).map((u) => (typeof u === 'string' ? u : [u.limit || u.name, u.reason].filter(Boolean).join(': '))).join('; ');
    rows.push(['Limits', 'not all enforced' + (un ? ` (${un})` : '')]);
  }
  if (!rows.length) return null;
  return [h('dl.kv', rows.flatMap(([k, v]) => [h('dt', k), h('dd', String(v))]))];
}

// notice is a one-line status in the flow; detail (nodes) makes it expandable.
function notice(ic, tone, content, detail) {
  if (detail && detail.length) {
    return h('details.notice.' + tone, h('summary', icon(ic), h('span.notice-text', content), icon('down', 'chev')), h('div.notice-detail', detail));
  }
  return h('div.notice.' + tone, icon(ic), h('span.notice-text', content));
}

function callout(tone, title, text) {
  return h('div.callout.' + tone, { role: tone === 'error' ? 'alert' : null }, icon(tone === 'error' ? 'alert' : 'info'), h('div', h('strong', title), text ? h('p', text) : null));
}

// Tool steps.

const TOOL_ICONS = {
  exec: 'terminal', read_file: 'file', write_file: 'filePen', list_files: 'folder', offer_artifact: 'download',
  load_skill: 'book', run_code: 'code', read_output: 'file',
};

function parseArgs(a) {
  if (a && typeof a === 'object') return a;
  try {
    return JSON.parse(a || '{}');
  } catch {
    return { _raw: String(a) };
  }
}

function toolSummary(name, args) {
  switch (name) {
    case 'exec':
      return firstLine(args.command);
    case 'read_file':
    case 'offer_artifact':
      return args.path || '';
    case 'write_file':
      return `${args.path || ''}${typeof args.content === 'string' ? ` · ${formatBytes(new Blob([args.content]).size)}` : ''}`;
    case 'list_files':
      return args.dir || 'workspace';
    case 'load_skill':
      return args.name || '';
    case 'run_code':
      return `${args.language || 'script'} · ${firstLine(args.code)}`;
    case 'read_output':
      return args.call_id || '';
    default: {
      const s = JSON.stringify(args);
      return s === '{}' ? '' : s;
    }
  }
}

function stepFor(id, name, rawArgs) {
  const v = state.view;
  let st = v.steps.get(id);
  if (st) return st;
  const args = parseArgs(rawArgs);
  const status = h('span.step-status', h('span.spinner', { 'aria-hidden': 'true' }), 'running');
  const sum = h('span.step-sum', clip(toolSummary(name, args), 160));
  const mcp = h('ul.mcp-calls', { hidden: true });
  const body = h('div.step-body', argsView(name, args));
  const el = h('details.step.running', { dataset: { tool: name || '', id: id || '' } },
    h('summary', h('span.step-icon', icon(TOOL_ICONS[name] || 'plug')), h('span.step-name', name || 'tool'), sum, status, icon('down', 'chev')),
    body);
  const wrap = h('div.step-wrap', el, mcp);
  st = { id, name, args, el, wrap, status, body, mcp, mcpCount: 0, output: null, progress: null };
  v.steps.set(id, st);
  v.lastStep = st;
  addToGroup(wrap);
  return st;
}

function argsView(name, args) {
  if (args._raw !== undefined) return section('Arguments', h('pre', args._raw));
  if (name === 'exec' && typeof args.command === 'string') {
    const extra = Object.entries(args).filter(([k]) => k !== 'command');
    return section('Command', h('pre.cmd', args.command), extra.length ? h('pre.small-pre', JSON.stringify(Object.fromEntries(extra), null, 2)) : null);
  }
  if (name === 'run_code' && typeof args.code === 'string') return section(`Script (${args.language || '?'})`, h('pre', args.code));
  if (name === 'write_file' && typeof args.content === 'string') return section(`Content of ${args.path || 'the file'}`, h('pre', clip(args.content, 20000)));
  return section('Arguments', h('pre', JSON.stringify(args, null, 2)));
}

function section(label, ...content) {
  return h('div.step-sec', h('div.sec-label', label), content);
}

function liveOutput(stream, text, offset) {
  if (stream === 'progress') return liveProgress(text);
  const st = state.view.lastStep;
  if (!st || !st.el.classList.contains('running')) return;
  if (!st.output) {
    st.output = { pre: h('pre.live-output'), streams: {} };
    st.body.append(section('Output so far', st.output.pre));
  }
  const buf = (st.output.streams[stream] ||= { text: '', bytes: 0 });
  place(buf, text, offset);
  st.output.pre.textContent = Object.values(st.output.streams).map((b) => b.text).join('').slice(-20000);
}

// A long MCP call's progress ("progress" deltas, one line per notification of the
// server: "kb__build: 2/3 step") is one line under its step, collapsed or not: a bar
// (when the server says the total) and the latest line, replaced by each new one rather
// than kept as a log. A delta at offset 0 (after a reconnect, or a committed event) may
// bring several lines: the last one is the latest. The line goes when the step ends.
const PROGRESS = /^(.*?): (-?\d+(?:\.\d+)?(?:e[+-]?\d+)?)(?:\/(\d+(?:\.\d+)?(?:e[+-]?\d+)?))?(?: (.*))?$/;

function liveProgress(text) {
  const line = String(text).split('\n').map((l) => l.trim()).filter(Boolean).pop();
  if (!line) return;
  const m = PROGRESS.exec(line);
  // The call's step: the running one of the tool the line names (a direct MCP call),
  // else the latest running step (a Code Mode script's call).
  let st = null;
  for (const s of state.view.steps.values()) if (m && s.name === m[1] && s.el.classList.contains('running')) st = s;
  if (!st) st = state.view.lastStep;
  if (!st || !st.el.classList.contains('running')) return;
  if (!st.progress) {
    const bar = h('progress.sp-bar', { 'aria-label': `Progress of ${st.name || 'the call'}` });
    st.progress = { el: h('div.step-progress', bar, h('span.sp-text'), h('span.sp-count')), bar };
    st.wrap.insertBefore(st.progress.el, st.mcp);
  }
  const { el, bar } = st.progress;
  const done = m ? Number(m[2]) : NaN;
  const total = m && m[3] ? Number(m[3]) : NaN;
  if (total > 0 && done >= 0) {
    bar.max = total;
    bar.value = Math.min(done, total);
  } else {
    bar.removeAttribute('value'); // indeterminate: the server gives no total
  }
  // The step names the tool already; a Code Mode script's call is named.
  const what = m ? [m[1] === st.name ? '' : m[1], m[4]].filter(Boolean).join(' · ') || m[1] : line;
  el.querySelector('.sp-text').textContent = clip(what, 200);
  el.querySelector('.sp-count').textContent = m ? (m[3] ? `${m[2]} / ${m[3]}` : m[2]) : '';
  el.title = line;
}

function endProgress(st) {
  if (st.progress) st.progress.el.remove();
  st.progress = null;
}

function finishStep(p) {
  const st = stepFor(p.id, p.name, '{}');
  endProgress(st);
  const cancelled = p.is_error && /cancel/i.test(firstLine(p.text || ''));
  st.el.classList.remove('running');
  st.el.classList.add(cancelled ? 'stopped' : p.is_error ? 'error' : 'ok');
  clear(st.status);
  let label = cancelled ? 'cancelled' : p.is_error ? 'failed' : 'done';
  const m = /^exit_code: (-?\d+)/.exec(p.text || '');
  if (st.name === 'exec' && m) label = m[1] === '0' ? 'exit 0' : `exit ${m[1]}`;
  if (/\(timed out\)/.test(firstLine(p.text || ''))) label += ' · timed out';
  st.status.append(icon(cancelled ? 'stop' : p.is_error ? 'alert' : 'check'), label);
  if (st.output) st.output.pre.closest('.step-sec').remove();
  const text = p.text || '';
  st.body.append(section(p.is_error ? 'Error' : 'Result', text ? h('pre', text) : h('p.muted', '(empty)'),
    p.truncated ? h('p.muted.small', `The model saw part of the result: ${formatBytes(text.length)} of ${formatBytes(p.full_size || 0)}.`) : null));
  if (p.artifact) {
    addToGroup(fileCard(p.artifact));
    refreshFileVerdicts();
  }
}

function stopPendingSteps(why) {
  for (const st of state.view.steps.values()) {
    if (!st.el.classList.contains('running')) continue;
    endProgress(st);
    st.el.classList.remove('running');
    st.el.classList.add('stopped');
    clear(st.status).append(icon('stop'), why);
  }
}

function mcpCall(p) {
  const st = state.view.steps.get(p.tool_call_id);
  const ok = p.outcome === 'completed' && !p.is_error;
  const row = h('li.mcp.' + (ok ? 'ok' : 'bad'), { title: p.error || '' },
    icon('plug'), h('code', p.tool || '?'),
    h('span.mcp-out', p.outcome === 'completed' ? (p.is_error ? 'tool error' : 'ok') : p.outcome || ''),
    typeof p.duration_ms === 'number' ? h('span.mcp-ms', formatMS(p.duration_ms)) : null,
    p.late ? h('span.mcp-ms', 'late') : null,
    p.approval ? approvalTag(p.approval) : null,
    p.error ? h('span.mcp-err', clip(p.error, 120)) : null);
  if (!st) {
    addToGroup(h('ul.mcp-calls.loose', row));
    return;
  }
  st.mcp.hidden = false;
  st.mcp.append(row);
}

// Approvals. A call the operator's policy holds for a person (approval_requested) is a
// card in the chat: what would be called, with which arguments or code, why it needs
// approval, who may decide, and a countdown to its deadline. Approve and Deny show only
// to a user who may decide it (GET /approvals/{id} answers 200; anyone else gets 404
// and reads whom it waits for). approval_decided, or the answer to the decision, turns
// the card into its outcome; a chat opened again draws it from the log the same way.

const APPROVAL_STATES = { pending: 'Waiting', approved: 'Approved', denied: 'Denied', expired: 'Expired', cancelled: 'Cancelled' };
const APPROVAL_ICONS = { pending: 'shield', approved: 'check', denied: 'ban', expired: 'clock', cancelled: 'stop' };

// approversText names who may decide: "$caller" is the chat's own user.
function approversText(list) {
  const owner = state.session && state.session.owner;
  const names = (list || []).map((a) => {
    if (a !== '$caller') return a;
    if (owner && state.me && owner === state.me.user) return 'you';
    return owner ? `${owner} (the chat’s user)` : 'the chat’s user';
  });
  return names.length ? names.join(', ') : 'nobody';
}

function prettyJSON(text) {
  if (!text) return '{}';
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return String(text);
  }
}

// countdownText is "4:59", "1 h 05 min", or '' once the deadline has passed.
function countdownText(deadline, now = Date.now()) {
  const left = Math.floor((deadline - now) / 1000);
  if (!(left > 0)) return '';
  const hh = Math.floor(left / 3600);
  const mm = Math.floor((left % 3600) / 60);
  const ss = left % 60;
  if (hh) return `${hh} h ${String(mm).padStart(2, '0')} min`;
  return `${mm}:${String(ss).padStart(2, '0')}`;
}

// approvalRequested draws the card of p (an approval_requested payload, or an approval
// of GET /approvals, which the user may decide: mayDecide).
function approvalRequested(p, seq, mayDecide) {
  const v = state.view;
  if (!p.id || v.approvals.has(p.id)) return;
  if (p.kind === 'elicitation') return questionAsked(p, seq, mayDecide);
  const code = p.kind === 'code';
  const deadline = Date.parse(p.deadline);
  const what = code ? `${p.language || 'code'} (${p.tool || 'code'})` : `${p.tool || '?'}${p.server ? ` on ${p.server}` : ''}`;
  const status = h('span.ap-state', icon('clock'), 'Waiting');
  const countdown = h('span.ap-countdown', { role: 'timer', 'aria-live': 'off' }, icon('clock'), h('span.ap-left'));
  const actions = h('div.ap-actions');
  const body = h('div.ap-body',
    h('p.ap-what', code ? 'Run this ' : 'Call ', h('code.ap-tool', code ? p.language || 'code' : p.tool || '?'),
      !code && p.server ? [' on ', h('span.ap-server', p.server)] : null),
    p.reason ? h('p.ap-reason', icon('info'), h('span', p.reason, typeof p.rule === 'number' && p.rule >= 0 ? h('span.ap-rule', ` · rule ${p.rule}`) : null)) : null,
    code
      ? h('div.ap-sec', h('div.sec-label', `Code${p.language ? ` (${p.language})` : ''}`), h('pre.ap-code', { tabindex: 0, 'aria-label': 'Code to approve' }, highlight(p.code || '', p.language)))
      : h('div.ap-sec', h('div.sec-label', 'Arguments'), h('pre.ap-args', { tabindex: 0, 'aria-label': 'Arguments of the call' }, prettyJSON(p.arguments))),
    h('p.ap-who', icon('agent'), h('span', 'May approve: ', h('strong', approversText(p.approvers)))),
    countdown,
    actions);
  const el = h('section.approval-card', { tabindex: -1, dataset: { id: p.id, state: 'pending', toolCallId: p.tool_call_id || '' }, 'aria-label': `Approval for ${what}` },
    h('header.ap-head', h('span.ap-title', icon('shield'), code ? 'Code approval' : 'Tool call approval'), status),
    body);
  const card = { id: p.id, p, el, status, countdown, actions, deadline, decided: false, busy: false };
  v.approvals.set(p.id, card);
  addToGroup(el);
  const st = v.steps.get(p.tool_call_id);
  if (st && st.el.classList.contains('running')) clear(st.status).append(icon('shield'), 'awaiting approval');
  tickCountdown(card);
  if (mayDecide) return showDecide(card);
  actions.append(h('p.ap-waiting.muted', 'Checking whether you may decide…'));
  // A card of the log's past whose deadline passed is decided further on in the log.
  const past = state.replayUpTo !== null && seq <= state.replayUpTo && isFinite(deadline) && deadline <= Date.now();
  if (past) {
    clear(actions).append(h('p.ap-waiting.muted', 'Waiting for the decision…'));
    return;
  }
  api('GET', '/approvals/' + encodeURIComponent(p.id)).then(
    (a) => {
      if (card.decided) return;
      if (a && a.state && a.state !== 'pending') return decideCard(card, { state: a.state, by: a.decided_by, at: a.decided_at, note: a.note });
      showDecide(card);
    },
    (e) => {
      if (card.decided) return;
      clear(actions).append(h('p.ap-waiting', icon('clock'), h('span', e.status === 404
        ? ['Waiting for ', h('strong', approversText(p.approvers)), ' to decide.']
        : `Could not tell whether you may decide: ${e.message}`)));
    });
}

// showDecide puts Approve and Deny, with an optional note, on the card.
function showDecide(card) {
  const tool = card.p.kind === 'code' ? `this ${card.p.language || 'code'}` : card.p.tool || 'the call';
  const noteId = 'ap-note-' + card.id.replace(/[^\w-]/g, '');
  const note = h('input.ap-note', { id: noteId, type: 'text', maxlength: 2000, placeholder: 'Note (optional)', autocomplete: 'off', enterkeyhint: 'done' });
  const approve = h('button.btn.primary.small.ap-approve', { type: 'button', 'aria-label': `Approve ${tool}`, onclick: () => decideApproval(card, 'approve') }, icon('check'), 'Approve');
  const deny = h('button.btn.danger-soft.small.ap-deny', { type: 'button', 'aria-label': `Deny ${tool}`, onclick: () => decideApproval(card, 'deny') }, icon('x'), 'Deny');
  card.note = note;
  card.buttons = [approve, deny];
  clear(card.actions).append(
    h('label.sr-only', { for: noteId }, 'Note with your decision (optional)'),
    note,
    h('div.ap-buttons', deny, approve));
  card.el.classList.add('can-decide');
}

async function decideApproval(card, decision) {
  if (card.busy || card.decided) return;
  card.busy = true;
  for (const b of card.buttons || []) b.disabled = true;
  const note = card.note ? card.note.value.trim() : '';
  try {
    const a = await api('POST', '/approvals/' + encodeURIComponent(card.id), { decision, note });
    decideCard(card, { state: a.state, by: a.decided_by, at: a.decided_at, note: a.note });
  } catch (e) {
    if (e.status === 409) {
      // Someone decided first, or the deadline passed: the decision that stands.
      toast('This call was already decided.');
      api('GET', '/approvals/' + encodeURIComponent(card.id)).then(
        (a) => a && a.state !== 'pending' && decideCard(card, { state: a.state, by: a.decided_by, at: a.decided_at, note: a.note }),
        () => {});
    } else if (e.status === 404) {
      toast('You may not decide this call any more.', 'error');
      clear(card.actions).append(h('p.ap-waiting.muted', 'Waiting for the decision…'));
    } else if (e.status !== 401) {
      toast(e.message, 'error');
      for (const b of card.buttons || []) b.disabled = false;
    }
  } finally {
    card.busy = false;
  }
  refreshApprovalsSoon();
}

function approvalDecided(p) {
  const card = state.view.approvals.get(p.id);
  if (!card) {
    addToGroup(notice(APPROVAL_ICONS[p.state] || 'shield', 'quiet', [outcomeText(p)]));
    return;
  }
  decideCard(card, p);
}

function outcomeText(d) {
  switch (d.state) {
    case 'approved':
      return `Approved by ${d.by || 'someone'}`;
    case 'denied':
      return `Denied by ${d.by || 'someone'}`;
    case 'expired':
      return 'Expired: nobody decided before the deadline, so the call was not made';
    case 'cancelled':
      return 'Cancelled: the turn was cancelled while it waited, so the call was not made';
    default:
      return d.state || 'Decided';
  }
}

// decideCard turns a card into its outcome ({state, by, at, note}).
function decideCard(card, d) {
  if (card.decided) return;
  if (card.ask) return answeredCard(card, d);
  card.decided = true;
  const st = d.state || 'denied';
  card.el.dataset.state = st;
  card.el.classList.remove('can-decide');
  clear(card.status).append(icon(APPROVAL_ICONS[st] || 'info'), APPROVAL_STATES[st] || st);
  card.countdown.remove();
  const focused = card.el.contains(document.activeElement);
  clear(card.actions).append(h('div.ap-outcome', { role: 'status' },
    icon(APPROVAL_ICONS[st] || 'info'),
    h('div',
      h('p.ap-outcome-text', outcomeText(d), d.at && (st === 'approved' || st === 'denied') ? h('time', { datetime: d.at, title: fullTime(d.at) }, ` · ${relTime(d.at)}`) : null),
      d.note ? h('p.ap-note-text', '“', d.note, '”') : null)));
  if (focused) card.el.focus({ preventScroll: true });
  const s = state.view.steps.get(card.p.tool_call_id);
  if (s && s.el.classList.contains('running')) {
    clear(s.status).append(h('span.spinner', { 'aria-hidden': 'true' }), st === 'approved' ? 'running' : 'not approved');
  }
}

function tickCountdown(card) {
  const left = countdownText(card.deadline);
  const el = card.countdown.querySelector('.ap-left');
  if (!isFinite(card.deadline)) el.textContent = 'No deadline';
  else if (card.ask) el.textContent = left ? `Answer within ${left}` : 'The deadline has passed; the server is told nobody answered';
  else el.textContent = left ? `Decide within ${left}` : 'The deadline has passed; the call will not be made';
  card.countdown.classList.toggle('late', !left);
  card.countdown.classList.toggle('soon', !!left && card.deadline - Date.now() < 60e3);
}

setInterval(() => {
  if (!state.view) return;
  for (const card of state.view.approvals.values()) if (!card.decided) tickCountdown(card);
}, 1000);

// Questions. An MCP server's question to the chat's user (MCP elicitation/create) is an
// approval of kind "elicitation": a card with the question (text, never markup) and a
// form the page builds from the server's flat JSON schema. Only the chat's own user may
// answer (GET /approvals/{id} answers 200): Submit accepts with the answer typed as the
// schema says (integers and numbers as numbers, booleans, arrays), Decline declines.
// The server checks the answer; a 422 says what does not fit, beside the form, which
// keeps what was typed. Anyone else reads whom the question waits for. The outcome
// (answered, declined, expired, cancelled) replaces the form, with the answer given.

const ASK_STATES = { pending: 'Waiting', approved: 'Answered', denied: 'Declined', expired: 'Expired', cancelled: 'Cancelled' };

function askSchema(p) {
  let s = p.schema;
  if (typeof s === 'string') {
    try {
      s = JSON.parse(s);
    } catch {
      s = null;
    }
  }
  return s && typeof s === 'object' && !Array.isArray(s) ? s : {};
}

// choices is the options of an enum schema: [{value, title}], or null.
function choices(s) {
  if (!s || typeof s !== 'object') return null;
  if (Array.isArray(s.enum) && s.enum.length) {
    return s.enum.map((v, i) => ({ value: v, title: Array.isArray(s.enumNames) && typeof s.enumNames[i] === 'string' ? s.enumNames[i] : String(v) }));
  }
  const alt = Array.isArray(s.oneOf) ? s.oneOf : Array.isArray(s.anyOf) ? s.anyOf : null;
  if (alt && alt.length && alt.every((o) => o && typeof o === 'object' && 'const' in o)) {
    return alt.map((o) => ({ value: o.const, title: typeof o.title === 'string' && o.title ? o.title : String(o.const) }));
  }
  return null;
}

// askFields reads the schema's properties: [{name, prop, label, help, required, options, multi}].
function askFields(schema) {
  const props = schema.properties && typeof schema.properties === 'object' ? schema.properties : {};
  const required = new Set(Array.isArray(schema.required) ? schema.required : []);
  return Object.entries(props).map(([name, prop]) => {
    prop = prop && typeof prop === 'object' ? prop : {};
    const multi = prop.type === 'array';
    return {
      name, prop, multi, required: required.has(name),
      label: typeof prop.title === 'string' && prop.title ? prop.title : name,
      help: typeof prop.description === 'string' ? prop.description : '',
      options: choices(multi ? prop.items : prop),
    };
  });
}

const sameValue = (a, b) => JSON.stringify(a) === JSON.stringify(b);

// localDateTime is an RFC 3339 time as a datetime-local input's value ('' if none).
function localDateTime(v) {
  const t = Date.parse(v);
  if (!isFinite(t)) return '';
  const d = new Date(t);
  return new Date(t - d.getTimezoneOffset() * 60e3).toISOString().slice(0, 16);
}

// askInput is field f's input: {el, read, mark, focus}. read returns the typed value,
// undefined for no answer, or throws a message.
function askInput(f, id) {
  const p = f.prop;
  const helpId = f.help ? id + '-help' : null;
  const star = f.required ? h('span.ask-req', { 'aria-hidden': 'true' }, ' *') : null;
  const help = f.help ? h('p.ask-help', { id: helpId }, f.help) : null;
  const wrap = (control, label) => h('div.ask-field', { dataset: { field: f.name } }, label, control, help);
  const marker = (els, box) => (bad) => {
    box.classList.toggle('bad', bad);
    for (const e of els) e.setAttribute('aria-invalid', String(bad));
  };
  if (f.multi && f.options) {
    const def = Array.isArray(p.default) ? p.default : [];
    const boxes = f.options.map((o, j) => h('input', { type: 'checkbox', id: `${id}-${j}`, checked: def.some((d) => sameValue(d, o.value)) }));
    const n = (k) => (typeof p[k] === 'number' ? p[k] : null);
    const hint = n('minItems') !== null && n('maxItems') !== null ? `Choose ${n('minItems')} to ${n('maxItems')}.`
      : n('minItems') ? `Choose at least ${n('minItems')}.` : n('maxItems') !== null ? `Choose at most ${n('maxItems')}.` : '';
    const el = h('fieldset.ask-field.ask-multi', { dataset: { field: f.name }, 'aria-describedby': helpId },
      h('legend.ask-label', f.label, star, f.required ? h('span.sr-only', ' (required)') : null),
      h('div.ask-options', f.options.map((o, j) => h('label.ask-opt', { for: `${id}-${j}` }, boxes[j], h('span', o.title)))),
      help, hint ? h('p.ask-help', hint) : null);
    return {
      el, focus: boxes[0], mark: marker(boxes, el),
      read: () => {
        const v = f.options.filter((o, j) => boxes[j].checked).map((o) => o.value);
        return v.length || f.required ? v : undefined;
      },
    };
  }
  const attrs = { id, name: f.name, 'aria-describedby': helpId, 'aria-required': f.required ? 'true' : null, autocomplete: 'off' };
  if (p.type === 'boolean') {
    const box = h('input', { ...attrs, type: 'checkbox', checked: p.default === true });
    const el = h('div.ask-field.ask-bool', { dataset: { field: f.name } }, h('label.ask-check', { for: id }, box, h('span.ask-label', f.label, star)), help);
    return { el, focus: box, mark: marker([box], el), read: () => box.checked };
  }
  const label = h('label.ask-label', { for: id }, f.label, star, f.required ? h('span.sr-only', ' (required)') : null);
  if (f.options) {
    const i = f.options.findIndex((o) => 'default' in p && sameValue(o.value, p.default));
    const sel = h('select.ask-input', attrs,
      h('option', { value: '', selected: i < 0 }, f.required ? 'Choose…' : '(no answer)'),
      f.options.map((o, j) => h('option', { value: String(j), selected: j === i }, o.title)));
    const el = wrap(sel, label);
    return { el, focus: sel, mark: marker([sel], el), read: () => (sel.value === '' ? undefined : f.options[Number(sel.value)].value) };
  }
  if (p.type === 'number' || p.type === 'integer') {
    const int = p.type === 'integer';
    const input = h('input.ask-input', { ...attrs, type: 'number', step: int ? 1 : 'any', inputmode: int ? 'numeric' : 'decimal',
      min: typeof p.minimum === 'number' ? p.minimum : null, max: typeof p.maximum === 'number' ? p.maximum : null,
      value: typeof p.default === 'number' ? p.default : null });
    const range = typeof p.minimum === 'number' && typeof p.maximum === 'number' ? `${p.minimum} to ${p.maximum}`
      : typeof p.minimum === 'number' ? `at least ${p.minimum}` : typeof p.maximum === 'number' ? `at most ${p.maximum}` : '';
    const el = wrap(input, label);
    if (range) el.querySelector('.ask-label').append(h('span.ask-range', ` (${int ? 'a whole number, ' : ''}${range})`));
    return {
      el, focus: input, mark: marker([input], el),
      read: () => {
        if (input.validity.badInput) throw new Error(`${f.label} must be a number.`);
        return input.value.trim() === '' ? undefined : Number(input.value);
      },
    };
  }
  const type = { email: 'email', uri: 'url', date: 'date', 'date-time': 'datetime-local' }[p.format] || 'text';
  let value = typeof p.default === 'string' ? p.default : null;
  if (type === 'datetime-local' && value) value = localDateTime(value);
  const input = h('input.ask-input', { ...attrs, type, value, maxlength: typeof p.maxLength === 'number' ? p.maxLength : null,
    inputmode: type === 'email' ? 'email' : type === 'url' ? 'url' : null, spellcheck: type === 'text' ? null : 'false' });
  const el = wrap(input, label);
  return {
    el, focus: input, mark: marker([input], el),
    read: () => {
      if (input.value === '') return undefined;
      if (type === 'datetime-local') {
        const t = Date.parse(input.value);
        if (!isFinite(t)) throw new Error(`${f.label} is not a date and time.`);
        return new Date(t).toISOString();
      }
      return input.value;
    },
  };
}

// questionAsked draws the card of an elicitation (see approvalRequested).
function questionAsked(p, seq, mayDecide) {
  const v = state.view;
  const deadline = Date.parse(p.deadline);
  const status = h('span.ap-state', icon('clock'), ASK_STATES.pending);
  const countdown = h('span.ap-countdown', { role: 'timer', 'aria-live': 'off' }, icon('clock'), h('span.ap-left'));
  const actions = h('div.ap-actions');
  const fields = askFields(askSchema(p));
  const body = h('div.ap-body',
    h('p.ap-what.ask-what', h('span', 'MCP server ', h('code.ap-tool', p.tool || '?'), ' asks:'), p.server ? h('span.ap-server.ask-url', p.server) : null),
    h('blockquote.ask-question', markdownPlain(p.reason || '(no question)')),
    countdown,
    actions);
  const el = h('section.approval-card.ask-card', { tabindex: -1, dataset: { id: p.id, state: 'pending', kind: 'elicitation', toolCallId: p.tool_call_id || '' }, 'aria-label': `Question from ${p.tool || 'an MCP server'}` },
    h('header.ap-head', h('span.ap-title', icon('ask'), 'Question'), status),
    body);
  const card = { id: p.id, p, el, status, countdown, actions, deadline, decided: false, busy: false, ask: true, fields };
  v.approvals.set(p.id, card);
  addToGroup(el);
  const st = v.steps.get(p.tool_call_id);
  if (st && st.el.classList.contains('running')) clear(st.status).append(icon('ask'), 'awaiting an answer');
  tickCountdown(card);
  if (mayDecide) return showAnswerForm(card);
  actions.append(h('p.ap-waiting.muted', 'Checking whether you may answer…'));
  const past = state.replayUpTo !== null && seq <= state.replayUpTo && isFinite(deadline) && deadline <= Date.now();
  if (past) {
    clear(actions).append(h('p.ap-waiting.muted', 'Waiting for the answer…'));
    return;
  }
  api('GET', '/approvals/' + encodeURIComponent(p.id)).then(
    (a) => {
      if (card.decided) return;
      if (a && a.state && a.state !== 'pending') return decideCard(card, { state: a.state, by: a.decided_by, at: a.decided_at, note: a.note, response: a.response, known: true });
      if (a && a.schema) card.fields = askFields(askSchema(a));
      showAnswerForm(card);
    },
    (e) => {
      if (card.decided) return;
      const owner = (state.session && state.session.owner) || 'the chat’s user';
      clear(actions).append(h('p.ap-waiting', icon('clock'), h('span', e.status === 404
        ? ['Waiting for ', h('strong', owner), ' to answer.', fields.length ? h('span.muted', ` It asks for ${fields.map((f) => f.label).join(', ')}.`) : null]
        : `Could not tell whether you may answer: ${e.message}`)));
    });
}

// showAnswerForm puts the question's form, Submit and Decline on the card.
function showAnswerForm(card) {
  const base = 'ask-' + card.id.replace(/[^\w-]/g, '');
  card.inputs = card.fields.map((f, i) => ({ f, ...askInput(f, `${base}-${i}`) }));
  const error = h('p.ask-error', { role: 'alert', id: base + '-error', hidden: true });
  const submit = h('button.btn.primary.small.ask-submit', { type: 'submit', 'aria-label': `Submit your answer to ${card.p.tool || 'the server'}` }, icon('send'), 'Submit');
  const decline = h('button.btn.danger-soft.small.ask-decline', { type: 'button', 'aria-label': `Decline to answer ${card.p.tool || 'the server'}`, onclick: () => answerQuestion(card, 'decline') }, icon('x'), 'Decline');
  const form = h('form.ask-form', { novalidate: true, 'aria-label': 'Your answer', onsubmit: (ev) => {
    ev.preventDefault();
    answerQuestion(card, 'accept');
  } },
  card.inputs.length ? h('div.ask-fields', card.inputs.map((x) => x.el)) : h('p.muted.small', 'The server asks for no details: Submit says yes, Decline says no.'),
  error,
  h('div.ask-foot', card.inputs.some((x) => x.f.required) ? h('p.ask-legend', h('span.ask-req', '*'), ' required') : null,
    h('div.ap-buttons', decline, submit)));
  card.form = form;
  card.error = error;
  card.buttons = [submit, decline];
  clear(card.actions).append(form);
  card.el.classList.add('can-decide');
}

// askRefusal reads the server's 422 ("approval ID: the answer does not fit the
// question's schema: validating root: validating /properties/NAME: maximum: 9/1 is
// greater than 5.000000") as [the message the form shows, the field it names], the field
// marked: "Replicas: maximum: 9 is greater than 5".
function askRefusal(card, message) {
  const m = /\/properties\/([^/:\s"]+): (.*)$/.exec(message);
  let name = '';
  if (m) {
    try {
      name = decodeURIComponent(m[1].replace(/~1/g, '/').replace(/~0/g, '~'));
    } catch {
      name = m[1];
    }
  }
  const bad = card.inputs.find((x) => x.f.name === name);
  if (!bad) return [message.replace(/^approval \S+: /, ''), null];
  bad.mark(true);
  const detail = m[2].replace(/\b(-?\d+)\/1\b/g, '$1').replace(/\b(\d+)\.0+\b/g, '$1').replace(/\b(\d+\.\d*?[1-9])0+\b/g, '$1');
  return [`${bad.f.label}: ${detail}`, bad];
}

function askError(card, message, input) {
  card.error.textContent = message;
  card.error.hidden = !message;
  if (input && input.focus) input.focus.focus();
}

async function answerQuestion(card, decision) {
  if (card.busy || card.decided) return;
  let body = { decision };
  if (decision === 'accept') {
    const content = {};
    const missing = [];
    for (const x of card.inputs) {
      x.mark(false);
      let v;
      try {
        v = x.read();
      } catch (e) {
        x.mark(true);
        return askError(card, e.message, x);
      }
      if (v === undefined) {
        if (x.f.required) missing.push(x);
      } else content[x.f.name] = v;
    }
    if (missing.length) {
      for (const x of missing) x.mark(true);
      return askError(card, `Please answer ${missing.map((x) => x.f.label).join(', ')}.`, missing[0]);
    }
    body = { decision, content };
  }
  askError(card, '');
  card.busy = true;
  for (const b of card.buttons) b.disabled = true;
  try {
    const a = await api('POST', '/approvals/' + encodeURIComponent(card.id), body);
    decideCard(card, { state: a.state, by: a.decided_by, at: a.decided_at, note: a.note, response: a.response, known: true });
  } catch (e) {
    if (e.status === 422) {
      // What does not fit the schema, beside the form, which keeps what was typed; the
      // field the message names (".../properties/NAME...") is marked.
      askError(card, ...askRefusal(card, e.message));
    } else if (e.status === 409) {
      toast('This question was already answered.');
      api('GET', '/approvals/' + encodeURIComponent(card.id)).then(
        (a) => a && a.state !== 'pending' && decideCard(card, { state: a.state, by: a.decided_by, at: a.decided_at, note: a.note, response: a.response, known: true }),
        () => {});
    } else if (e.status === 404) {
      toast('You may not answer this question any more.', 'error');
      clear(card.actions).append(h('p.ap-waiting.muted', 'Waiting for the answer…'));
    } else if (e.status !== 401) {
      askError(card, e.message);
    }
  } finally {
    card.busy = false;
    if (!card.decided) for (const b of card.buttons) b.disabled = false;
  }
  refreshApprovalsSoon();
}

function askOutcomeText(d) {
  switch (d.state) {
    case 'approved':
      return `Answered by ${d.by || 'someone'}`;
    case 'denied':
      return `Declined by ${d.by || 'someone'}`;
    case 'expired':
      return 'Expired: nobody answered before the deadline, so the server was told the question was cancelled';
    case 'cancelled':
      return 'Cancelled: the turn was cancelled while the question waited';
    default:
      return d.state || 'Answered';
  }
}

// answeredCard turns a question's card into its outcome ({state, by, at, response?});
// an accepted one shows the answer, which GET /approvals/{id} has for the chat's user.
function answeredCard(card, d) {
  card.decided = true;
  const st = d.state || 'denied';
  card.el.dataset.state = st;
  card.el.classList.remove('can-decide');
  clear(card.status).append(icon(APPROVAL_ICONS[st] || 'info'), ASK_STATES[st] || st);
  card.countdown.remove();
  const focused = card.el.contains(document.activeElement);
  const answer = h('div.ask-answer');
  clear(card.actions).append(h('div.ap-outcome', { role: 'status' },
    icon(APPROVAL_ICONS[st] || 'info'),
    h('div',
      h('p.ap-outcome-text', askOutcomeText(d), d.at && (st === 'approved' || st === 'denied') ? h('time', { datetime: d.at, title: fullTime(d.at) }, ` · ${relTime(d.at)}`) : null),
      st === 'approved' ? answer : null)));
  if (focused) card.el.focus({ preventScroll: true });
  const s = state.view.steps.get(card.p.tool_call_id);
  if (s && s.el.classList.contains('running')) clear(s.status).append(h('span.spinner', { 'aria-hidden': 'true' }), 'running');
  if (st !== 'approved') return;
  if (d.known) return showAnswer(card, answer, d.response);
  api('GET', '/approvals/' + encodeURIComponent(card.id)).then(
    (a) => showAnswer(card, answer, a && a.response),
    () => answer.append(h('p.muted.small', 'Only the chat’s user sees the answer.')));
}

// showAnswer lists an accepted answer read-only: each field's label and value (an
// option's title, Yes or No, a list), in the schema's order.
function showAnswer(card, box, response) {
  let r = response;
  if (typeof r === 'string') {
    try {
      r = JSON.parse(r);
    } catch {
      r = null;
    }
  }
  clear(box);
  if (!r || typeof r !== 'object' || !Object.keys(r).length) {
    box.append(h('p.muted.small', 'No details.'));
    return;
  }
  const fields = card.fields.length ? card.fields : askFields(askSchema(card.p));
  const titleOf = (f, v) => {
    const o = f && f.options && f.options.find((x) => sameValue(x.value, v));
    if (o) return o.title;
    if (typeof v === 'boolean') return v ? 'Yes' : 'No';
    return typeof v === 'string' ? v : JSON.stringify(v);
  };
  const known = fields.filter((f) => f.name in r);
  const rest = Object.keys(r).filter((k) => !fields.some((f) => f.name === k)).map((k) => ({ name: k, label: k }));
  box.append(h('dl.ask-values', [...known, ...rest].flatMap((f) => {
    const v = r[f.name];
    return [h('dt', f.label), h('dd', Array.isArray(v) ? (v.length ? v.map((x) => titleOf(f, x)).join(', ') : '(none)') : titleOf(f, v))];
  })));
}

// approvalTag says who decided a Code Mode script's MCP call.
function approvalTag(a) {
  const st = a.state || 'approved';
  return h('span.mcp-appr.' + st, { title: [outcomeText(a), a.note].filter(Boolean).join(': ') },
    icon(APPROVAL_ICONS[st] || 'shield'), `${st === 'approved' ? 'approved' : st} by ${a.by || '?'}`);
}

// The header's badge: approvals of the user's OTHER chats waiting for them to decide,
// read every 10 s while the page is visible and after every approval event.

async function refreshApprovals() {
  if (!state.me) return;
  const sid = state.session && state.session.id;
  try {
    state.approvals = listOf(await api('GET', '/approvals'), 'approvals');
  } catch {
    return; // kept as it was; the next poll tries again
  }
  approvalsReadAt = Date.now();
  renderApprovalsBadge();
  // A fallback for a stream that has not brought an open chat's waiting call (the
  // stream sends approval_requested at once; a run on another replica reaches it by
  // polling): a card after a few seconds, once the log's history has been drawn, so it
  // never lands before the events it follows. A card is drawn once per id: the event
  // that comes later finds it.
  if (!state.session || state.session.id !== sid || !state.view) return;
  if (state.replayUpTo !== null && state.lastSeq < state.replayUpTo) return;
  for (const a of state.approvals) {
    const age = Date.now() - Date.parse(a.created_at);
    if (a.session_id === sid && !state.view.approvals.has(a.id) && age > 4000) approvalRequested(a, undefined, true);
  }
}

let approvalsReadAt = 0;

let approvalsTimer = null;
function refreshApprovalsSoon() {
  clearTimeout(approvalsTimer);
  approvalsTimer = setTimeout(refreshApprovals, 300);
}

const otherApprovals = () => state.approvals.filter((a) => !state.session || a.session_id !== state.session.id);

function renderApprovalsBadge() {
  const list = otherApprovals();
  const btn = $('approvals-btn');
  btn.hidden = !list.length;
  const label = `${list.length} approval${list.length === 1 ? '' : 's'} waiting for you in other chats`;
  btn.setAttribute('aria-label', label);
  btn.title = label;
  $('approvals-count').textContent = String(list.length);
  if (!list.length) closeApprovals();
  else if (!$('approvals-panel').hidden) renderApprovalsPanel();
}

function toggleApprovals() {
  if (!$('approvals-panel').hidden) return closeApprovals();
  $('approvals-panel').hidden = false;
  $('approvals-btn').setAttribute('aria-expanded', 'true');
  renderApprovalsPanel();
  const first = $('approvals-panel').querySelector('a');
  if (first) first.focus();
  refreshApprovals();
}

function closeApprovals() {
  $('approvals-panel').hidden = true;
  $('approvals-btn').setAttribute('aria-expanded', 'false');
}

function renderApprovalsPanel() {
  const panel = clear($('approvals-panel'));
  panel.append(h('div.files-head', h('strong', 'Waiting for you'), h('button.icon-btn', { type: 'button', 'aria-label': 'Close', onclick: closeApprovals }, icon('x'))));
  const list = otherApprovals();
  if (!list.length) panel.append(h('p.muted.small', 'Nothing waits for you.'));
  const ul = h('ul.ap-list');
  for (const a of list) {
    const left = countdownText(Date.parse(a.deadline));
    ul.append(h('li', h('a.ap-item', { href: '#/s/' + encodeURIComponent(a.session_id), dataset: { id: a.id, session: a.session_id }, onclick: closeApprovals },
      h('span.ap-item-title', icon({ code: 'code', elicitation: 'ask' }[a.kind] || 'plug'),
        a.kind === 'elicitation' ? h('span.ap-item-kind', 'Question from') : null,
        h('code', a.kind === 'code' ? a.language || 'code' : a.tool || '?'), h('span.ap-item-agent', `${a.agent || ''}${a.user ? ` · ${a.user}` : ''}`)),
      a.reason ? h('span.ap-item-reason', clip(a.reason, 140)) : null,
      h('span.ap-item-left', icon('clock'), left ? `${left} left` : 'deadline passed'))));
  }
  panel.append(ul);
}

// Every 10 s; every 2 s while the open chat's turn runs (one of its calls may wait).
setInterval(() => {
  if (!state.me || document.visibilityState !== 'visible') return;
  if (state.live || Date.now() - approvalsReadAt >= 9500) refreshApprovals();
}, 2000);
document.addEventListener('visibilitychange', () => {
  if (state.me && document.visibilityState === 'visible') refreshApprovals();
});

// Files offered for download.

// filePath is the download URL of an offered file; null for a path no offer can have
// (an empty, "." or ".." segment, which a browser would resolve out of the files/ route).
function filePath(sid, path) {
  const segs = String(path ?? '').split('/');
  if (segs.some((x) => x === '' || x === '.' || x === '..' || /^(%2e|\.){1,2}$/i.test(x))) return null;
  return '/api/v1' + sessionPath(sid) + '/files/' + segs.map(encodeURIComponent).join('/');
}

function baseName(p) {
  const s = String(p || '');
  return s.slice(s.lastIndexOf('/') + 1) || s;
}

// fileCard is an offered file: a card from the offer's event (path, size, digest,
// classification), or from the files listing, which adds the verdicts its download
// meets for the signed-in user (type, scan, may_download and the refusal's reason): a
// refused file shows the reason instead of a download link.
function fileCard(a) {
  const sid = state.session.id;
  const href = filePath(sid, a.path);
  const exp = a.expires_at ? Date.parse(a.expires_at) : NaN;
  const expired = a.expired === true || (isFinite(exp) && exp <= Date.now());
  const refusal = a.may_download === false && a.refusal && a.refusal.code !== 'expired' ? a.refusal : null;
  const unusable = expired || !href || !!refusal;
  const sha = String(a.sha256 || '');
  const name = baseName(a.path);
  const meta = h('div.file-meta',
    h('span', formatBytes(a.size)),
    sha ? h('button.hash', { type: 'button', title: `SHA-256 ${sha} (click to copy)`, 'aria-label': `Copy the SHA-256 digest ${sha}`, dataset: { sha256: sha }, onclick: (ev) => copyHash(ev, sha) },
      h('span.hash-label', 'sha256'), h('code', sha.slice(0, 12)), icon('copy')) : null,
    isFinite(exp) ? h('span', { title: fullTime(a.expires_at), class: expired ? 'expired' : null }, expired ? 'expired' : `expires ${relTime(a.expires_at)}`) : null);
  const link = unusable
    ? h('span.btn.small.disabled', icon(refusal ? 'ban' : 'download'), expired ? 'Expired' : refusal ? refusedLabel(refusal.code) : 'Unavailable')
    : h('a.btn.small.file-download', { href, download: name, dataset: { sha256: sha, path: a.path }, rel: 'noopener' }, icon('download'), 'Download');
  return h('div.file-card', { dataset: { path: a.path, sha256: sha }, class: refusal ? 'file-card refused' : null },
    h('div.file-icon', icon('file')),
    h('div.file-main',
      h('div.file-title', unusable ? h('span.file-name', a.path) : h('a.file-name', { href, download: name }, a.path)),
      h('div.file-verdicts', classBadge(a), typeBadge(a), scanBadge(a.scan)),
      meta,
      refusal ? h('p.file-refusal', { dataset: { code: refusal.code } }, icon('alert'), h('span', refusal.message)) : null),
    link);
}

// refusedLabel is the disabled button's word for why a file does not download.
function refusedLabel(code) {
  return { recipient: 'Not released', malware: 'Blocked', executable: 'Blocked' }[code] || 'Unavailable';
}

// The three verdicts as badges: who may download it (its classification), what it is
// (its type, warned when its name claims another), and the malware scan.
function classBadge(a) {
  if (!a.classification) return null;
  const who = a.recipients ? `: ${a.recipients} may download it` : '';
  return h('span.badge.class-' + a.classification, { title: `Classified ${a.classification}${who}`, dataset: { verdict: 'classification' } }, a.classification);
}

function typeBadge(a) {
  if (a.detected_type === undefined) return null; // an offer's event, before the listing says
  const type = a.detected_type || 'type not recorded';
  const warn = !!a.type_mismatch;
  return h('span.badge.verdict', { class: warn ? 'badge verdict verdict-warn' : null, title: warn ? `Type: ${type}, ${a.type_mismatch}` : `Type: ${type} (from its first bytes)`, dataset: { verdict: 'type' } },
    warn ? icon('alert') : null, type);
}

function scanBadge(scan) {
  if (!scan) return null;
  const [text, cls, title] = {
    clean: ['scan clean', 'verdict-ok', `No malware found${scan.scanner ? ` (${scan.scanner})` : ''}`],
    found: [`malware: ${scan.signature || 'found'}`, 'verdict-bad', `The malware scanner found ${scan.signature}${scan.scanner ? ` (${scan.scanner})` : ''}`],
    not_scanned: ['not scanned yet', '', 'Scanned for malware at its first download'],
    off: ['scanner off', '', 'No malware scanner is configured on this harness'],
  }[scan.verdict] || [scan.verdict, '', ''];
  return h('span.badge.verdict', { class: cls ? 'badge verdict ' + cls : null, title, dataset: { verdict: 'scan' } }, text);
}

// Cards in the chat come from the offer's event, which cannot know the verdicts (they
// depend on who looks, the scanner and the operator's policy): the files listing says
// them, fetched once for the cards a render adds, and each card of the same offer is
// drawn again with them.
let verdictsTimer = 0;
function refreshFileVerdicts() {
  clearTimeout(verdictsTimer);
  verdictsTimer = setTimeout(async () => {
    const sid = state.session && state.session.id;
    if (!sid) return;
    let files;
    try {
      files = listOf(await api('GET', sessionPath(sid) + '/files'), 'files');
    } catch {
      return; // the cards stay as the events drew them
    }
    if (!state.session || state.session.id !== sid) return;
    const byPath = new Map(files.map((f) => [f.path, f]));
    for (const card of document.querySelectorAll('#conversation .file-card')) {
      const f = byPath.get(card.dataset.path);
      if (f && f.sha256 === card.dataset.sha256) card.replaceWith(fileCard(f));
    }
  }, 120);
}

async function copyHash(ev, sha) {
  ev.preventDefault();
  const btn = ev.currentTarget;
  try {
    await navigator.clipboard.writeText(sha);
    btn.classList.add('copied');
    toast('SHA-256 copied.');
    setTimeout(() => btn.classList.remove('copied'), 1500);
  } catch {
    // No clipboard (an insecure origin): select the digest so it can be copied by hand.
    const code = btn.querySelector('code');
    code.textContent = sha;
    const r = document.createRange();
    r.selectNodeContents(code);
    getSelection().removeAllRanges();
    getSelection().addRange(r);
  }
}

// The files panel lists every file the chat offered.
async function toggleFiles() {
  const panel = $('files-panel');
  if (!panel.hidden) return closeFiles();
  if (!state.session) return;
  panel.hidden = false;
  $('files-btn').setAttribute('aria-expanded', 'true');
  clear(panel).append(h('p.muted.small', 'Loading…'));
  try {
    const files = listOf(await api('GET', sessionPath(state.session.id) + '/files'), 'files');
    clear(panel).append(h('div.files-head', h('strong', 'Files'), h('button.icon-btn', { type: 'button', 'aria-label': 'Close', onclick: closeFiles }, icon('x'))));
    if (!files.length) panel.append(h('p.muted.small', 'No files offered in this chat yet.'));
    for (const f of files) panel.append(fileCard(f));
  } catch (e) {
    clear(panel).append(h('p.form-error', e.message));
  }
}

function closeFiles() {
  $('files-panel').hidden = true;
  $('files-btn').setAttribute('aria-expanded', 'false');
}

// ---------------------------------------------------------------------------------
// Scrolling, drawer, toasts

function nearBottom() {
  const s = $('scroller');
  return s.scrollHeight - s.scrollTop - s.clientHeight < 120;
}

function scrollToBottom() {
  const s = $('scroller');
  s.scrollTop = s.scrollHeight;
}

function openDrawer() {
  $('shell').classList.add('drawer-open');
  $('scrim').hidden = false;
}

function closeDrawer() {
  $('shell').classList.remove('drawer-open');
  $('scrim').hidden = true;
}

let toastTimer = null;
function toast(message, tone) {
  const el = $('toast');
  el.textContent = message;
  el.className = 'toast' + (tone ? ' ' + tone : '');
  el.hidden = false;
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => (el.hidden = true), tone === 'error' ? 6000 : 2500);
}

function wireStatic() {
  $('login-form').addEventListener('submit', login);
  $('sign-out').addEventListener('click', logout);
  $('new-chat').addEventListener('click', () => {
    if (location.hash === '#/' || location.hash === '') newChat();
    else location.hash = '#/';
    closeDrawer();
  });
  $('topbar-new').addEventListener('click', () => (location.hash = '#/'));
  $('open-drawer').addEventListener('click', openDrawer);
  $('page-drawer').addEventListener('click', openDrawer);
  document.querySelector('.side-links').addEventListener('click', closeDrawer);
  $('close-drawer').addEventListener('click', closeDrawer);
  $('scrim').addEventListener('click', closeDrawer);
  $('sessions').addEventListener('click', (ev) => {
    if (ev.target.closest('a.session-item')) closeDrawer();
  });
  $('composer').addEventListener('submit', send);
  $('input').addEventListener('keydown', onKey);
  $('input').addEventListener('input', () => {
    autosize();
    updateComposer();
  });
  $('cancel').addEventListener('click', cancelRun);
  $('attach-btn').addEventListener('click', () => $('file-input').click());
  $('file-input').addEventListener('change', (ev) => {
    attached().add(Array.from(ev.target.files || []));
    ev.target.value = '';
  });
  $('input').addEventListener('paste', (ev) => {
    const files = Array.from((ev.clipboardData && ev.clipboardData.files) || []);
    if (files.length) {
      ev.preventDefault();
      attached().add(files);
    }
  });
  dropTarget($('composer').closest('section'), $('composer'), (files) => attached().add(files));
  $('agent').addEventListener('change', (ev) => {
    state.draftAgent = ev.target.value;
    state.draftEnv = '';
    localStorage.setItem('trueforge.agent', state.draftAgent);
    renderEmpty();
    updateComposer();
  });
  $('tools-btn').addEventListener('click', () => toggleTools());
  $('tab-env').addEventListener('click', () => selectTab('env'));
  $('tab-agent').addEventListener('click', () => selectTab('agent'));
  $('files-btn').addEventListener('click', toggleFiles);
  $('approvals-btn').addEventListener('click', toggleApprovals);
  document.addEventListener('keydown', (ev) => {
    if (ev.key !== 'Escape') return;
    if (!$('tools-menu').hidden) {
      toggleTools(false);
      $('tools-btn').focus();
    } else if (!$('files-panel').hidden) closeFiles();
    else if (!$('approvals-panel').hidden) {
      closeApprovals();
      $('approvals-btn').focus();
    } else closeDrawer();
  });
  document.addEventListener('click', (ev) => {
    const menu = $('tools-menu');
    if (!menu.hidden && !menu.contains(ev.target) && !$('tools-btn').contains(ev.target)) toggleTools(false);
    const files = $('files-panel');
    if (!files.hidden && !files.contains(ev.target) && !$('files-btn').contains(ev.target) && ev.target.isConnected) closeFiles();
    const aps = $('approvals-panel');
    if (!aps.hidden && !aps.contains(ev.target) && !$('approvals-btn').contains(ev.target) && ev.target.isConnected) closeApprovals();
  });
  window.addEventListener('hashchange', route);
  setInterval(() => state.me && renderSessions(), 60000);
}

boot();
