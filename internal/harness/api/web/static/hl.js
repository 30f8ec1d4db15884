// A small syntax highlighter for the code an approver reads (Python, JavaScript and
// shell): keywords, strings, comments and numbers. It scans the text once and builds
// spans holding text nodes only (never parsing HTML), so the code, which the model
// wrote, can never become markup. Anything it does not recognise stays plain text.

import { h } from './dom.js';

const KEYWORDS = {
  python: 'False None True and as assert async await break class continue def del elif else except finally for from global if import in is lambda nonlocal not or pass raise return try while with yield match case print',
  javascript: 'async await break case catch class const continue debugger default delete do else export extends false finally for function if import in instanceof let new null of return static super switch this throw true try typeof undefined var void while with yield',
  shell: 'if then else elif fi for while until do done case esac in function return exit export local readonly set unset shift source echo printf cd test true false',
};

const COMMENT = { python: /#[^\n]*/y, javascript: /\/\/[^\n]*|\/\*[\s\S]*?(?:\*\/|$)/y, shell: /#[^\n]*/y };
const STRING = {
  python: /(?:[rRbBfFuU]{0,2})(?:"""[\s\S]*?(?:"""|$)|'''[\s\S]*?(?:'''|$)|"(?:\\.|[^"\\\n])*(?:"|$)|'(?:\\.|[^'\\\n])*(?:'|$))/y,
  javascript: /"(?:\\.|[^"\\\n])*(?:"|$)|'(?:\\.|[^'\\\n])*(?:'|$)|`(?:\\[\s\S]|[^`\\])*(?:`|$)/y,
  shell: /"(?:\\[\s\S]|[^"\\])*(?:"|$)|'[^']*(?:'|$)/y,
};
const NUMBER = /(?:0[xX][\da-fA-F_]+|\d[\d_]*(?:\.\d+)?(?:[eE][+-]?\d+)?)\b/y;
const WORD = /[A-Za-z_$][\w$]*/y;
const VARIABLE = /\$(?:\{[^}\n]*\}?|[A-Za-z_]\w*|[0-9#?@*$!-])/y;

// language maps what an approval names to one the highlighter knows ('' for none).
export function language(name) {
  const n = String(name || '').toLowerCase();
  if (/^(py|python\d?)$/.test(n)) return 'python';
  if (/^(js|javascript|node|mjs|ts|typescript)$/.test(n)) return 'javascript';
  if (/^(sh|bash|shell|zsh|exec|command)$/.test(n)) return 'shell';
  return '';
}

// highlight returns a <code> of text, its tokens wrapped in spans of class tok-kw,
// tok-str, tok-com, tok-num (and tok-var for shell variables).
export function highlight(text, lang) {
  text = String(text ?? '');
  const l = language(lang);
  const code = h('code', { dataset: { lang: l || 'text' } });
  if (!l) {
    code.append(text);
    return code;
  }
  const kw = new Set(KEYWORDS[l].split(' '));
  let plain = '';
  const flush = () => {
    if (plain) code.append(plain);
    plain = '';
  };
  const token = (cls, s) => {
    flush();
    code.append(h('span.' + cls, s));
  };
  const at = (re, i) => {
    re.lastIndex = i;
    const m = re.exec(text);
    return m && m[0] ? m[0] : null;
  };
  let i = 0;
  while (i < text.length) {
    const c = text[i];
    const prev = i ? text[i - 1] : '\n';
    let m;
    // A shell comment starts a word: "a#b" is one word.
    if ((l !== 'shell' || /\s|;/.test(prev)) && (m = at(COMMENT[l], i))) {
      token('tok-com', m);
    } else if ((m = at(STRING[l], i))) {
      token('tok-str', m);
    } else if (l === 'shell' && c === '$' && (m = at(VARIABLE, i))) {
      token('tok-var', m);
    } else if (/\d/.test(c) && !/[\w$.]/.test(prev) && (m = at(NUMBER, i))) {
      token('tok-num', m);
    } else if (/[A-Za-z_$]/.test(c) && !/[\w$]/.test(prev) && (m = at(WORD, i))) {
      if (kw.has(m) && !(l === 'shell' && /[-./=]/.test(text[i + m.length] || ''))) token('tok-kw', m);
      else plain += m;
    } else {
      plain += c;
      i++;
      continue;
    }
    i += m.length;
  }
  flush();
  return code;
}
