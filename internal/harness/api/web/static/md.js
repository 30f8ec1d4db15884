// A small, safe Markdown subset for the model's text: fenced code blocks, inline code,
// **bold**, *italic*, [links](https://...) and bare http(s) links, bullet and numbered
// lists, headings (shown as strong lines), paragraphs and line breaks. It builds DOM
// nodes with text nodes only (never parsing HTML), and a link is kept only for http:, https:
// and mailto: URLs, opened in a new tab with rel="noopener noreferrer".

import { h } from './dom.js';

// render returns a fragment for text. An unclosed fence (text still streaming) is shown
// as a code block up to the end.
export function render(text) {
  const frag = document.createDocumentFragment();
  const lines = String(text ?? '').replace(/\r\n?/g, '\n').split('\n');
  let i = 0;
  let para = [];
  const flushPara = () => {
    if (para.length) frag.append(paragraph(para));
    para = [];
  };
  while (i < lines.length) {
    const line = lines[i];
    const fence = /^\s*(`{3,}|~{3,})\s*([\w+#.-]*)\s*$/.exec(line);
    if (fence) {
      flushPara();
      const close = fence[1];
      const body = [];
      i++;
      while (i < lines.length && !lines[i].trim().startsWith(close)) body.push(lines[i++]);
      i++; // the closing fence (or past the end)
      frag.append(codeBlock(body.join('\n'), fence[2]));
      continue;
    }
    if (/^\s*$/.test(line)) {
      flushPara();
      i++;
      continue;
    }
    const heading = /^(#{1,6})\s+(.*)$/.exec(line);
    if (heading) {
      flushPara();
      frag.append(h('p.md-h', inline(heading[2].replace(/\s+#+\s*$/, ''))));
      i++;
      continue;
    }
    const item = listItem(line);
    if (item) {
      flushPara();
      const list = h(item.ordered ? 'ol' : 'ul');
      if (item.ordered && item.start !== 1) list.setAttribute('start', String(item.start));
      while (i < lines.length) {
        const it = listItem(lines[i]);
        if (!it || it.ordered !== item.ordered) break;
        const li = h('li', inline(it.text));
        i++;
        // Continuation lines (indented, not a new item) join the item.
        while (i < lines.length && /^\s{2,}\S/.test(lines[i]) && !listItem(lines[i])) {
          li.append(h('br'), ...inline(lines[i].trim()));
          i++;
        }
        list.append(li);
      }
      frag.append(list);
      continue;
    }
    para.push(line);
    i++;
  }
  flushPara();
  return frag;
}

function listItem(line) {
  let m = /^\s{0,3}[-*+]\s+(.*)$/.exec(line);
  if (m) return { ordered: false, text: m[1] };
  m = /^\s{0,3}(\d{1,9})[.)]\s+(.*)$/.exec(line);
  if (m) return { ordered: true, start: Number(m[1]), text: m[2] };
  return null;
}

function paragraph(lines) {
  const p = h('p');
  lines.forEach((l, k) => {
    if (k) p.append(h('br'));
    p.append(...inline(l));
  });
  return p;
}

function codeBlock(text, lang) {
  const pre = h('pre.md-code', h('code', text));
  if (lang) pre.dataset.lang = lang;
  return pre;
}

// Inline tokens, earliest match first.
const INLINE = [
  { re: /`([^`\n]+)`/g, make: (m) => h('code', m[1]) },
  { re: /\*\*([^*\n](?:[^\n]*?[^*\n])?)\*\*/g, make: (m, depth) => h('strong', inline(m[1], depth + 1)) },
  { re: /__([^_\n](?:[^\n]*?[^_\n])?)__/g, make: (m, depth) => h('strong', inline(m[1], depth + 1)) },
  { re: /(^|[^*\w])\*([^*\s](?:[^*\n]*?[^*\s])?)\*(?![*\w])/g, lead: true, make: (m, depth) => h('em', inline(m[2], depth + 1)) },
  { re: /\[([^\]\n]+)\]\(([^()\s]+)\)/g, make: (m, depth) => link(m[2], inline(m[1], depth + 1), m[0]) },
  { re: /\bhttps?:\/\/[^\s<>"'`]+/g, make: (m) => bareLink(m[0]) },
];

export function inline(text, depth = 0) {
  const out = [];
  let rest = String(text);
  if (depth > 3) return [rest];
  while (rest) {
    let best = null;
    for (const tok of INLINE) {
      tok.re.lastIndex = 0;
      const m = tok.re.exec(rest);
      if (!m) continue;
      const start = m.index + (tok.lead ? m[1].length : 0);
      if (!best || start < best.start) best = { tok, m, start };
    }
    if (!best) {
      out.push(rest);
      break;
    }
    const { tok, m, start } = best;
    if (start > 0) out.push(rest.slice(0, start));
    const made = tok.make(m, depth);
    if (Array.isArray(made)) out.push(...made);
    else out.push(made);
    rest = rest.slice(m.index + m[0].length);
  }
  return out;
}

function safeURL(href) {
  try {
    const u = new URL(href, location.href);
    if (u.protocol === 'http:' || u.protocol === 'https:' || u.protocol === 'mailto:') return u.href;
  } catch {
    // not a URL: shown as text
  }
  return null;
}

function link(href, children, raw) {
  const url = safeURL(href);
  if (!url) return [raw];
  return h('a', { href: url, target: '_blank', rel: 'noopener noreferrer nofollow' }, children);
}

// bareLink keeps trailing punctuation out of the link.
function bareLink(raw) {
  const m = /^(.*?)([.,;:!?)\]]*)$/.exec(raw);
  const a = link(m[1], [m[1]], m[1]);
  return m[2] ? [].concat(a, m[2]) : a;
}
