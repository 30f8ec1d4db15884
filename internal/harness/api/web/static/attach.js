// Attachments in the composer: files picked with the button, dropped on the chat or
// pasted, shown as chips above the message; uploaded one by one when the message is
// sent (each with its own progress bar), then carried by the message by id. A file
// that fails to upload stays in the list with the harness's reason, and nothing is
// sent, so nothing is lost.

import { h, clear, icon, formatBytes } from './dom.js';

// CLASSIFICATIONS are what an uploader may say a file is (the harness refuses others).
const CLASSIFICATIONS = ['untrusted', 'internal', 'confidential', 'restricted', 'public'];

// Attachments manages the pending files of the composer whose list element is list;
// onChange runs when the list changes (the send button's state depends on it).
export class Attachments {
  constructor(list, onChange) {
    this.list = list;
    this.onChange = onChange;
    this.items = []; // {file, id, sent, progress, error, xhr, node}
    this.busy = false;
  }

  get count() {
    return this.items.length;
  }

  add(files) {
    for (const file of files) {
      if (this.items.some((it) => it.file.name === file.name && it.file.size === file.size && it.file.lastModified === file.lastModified)) continue;
      this.items.push({ file, id: '', progress: 0, error: '', classification: 'untrusted' });
    }
    this.render();
  }

  remove(item) {
    if (item.xhr) item.xhr.abort();
    this.items = this.items.filter((it) => it !== item);
    this.render();
  }

  clear() {
    for (const it of this.items) if (it.xhr) it.xhr.abort();
    this.items = [];
    this.render();
  }

  // names lists the files, for a message sent without text.
  names() {
    return this.items.map((it) => it.file.name).join(', ');
  }

  render() {
    const list = clear(this.list);
    list.hidden = this.items.length === 0;
    for (const it of this.items) {
      const bar = h('span.attach-progress', { role: 'progressbar', 'aria-valuemin': '0', 'aria-valuemax': '100', 'aria-label': `Uploading ${it.file.name}` },
        h('span.attach-progress-fill'));
      const meta = h('span.attach-meta', it.error ? it.error : it.id ? `${formatBytes(it.file.size)} · uploaded` : formatBytes(it.file.size));
      const cls = h('select.attach-class', { 'aria-label': `Classification of ${it.file.name}`, title: 'Who may see what the agent makes from it: untrusted unless you say otherwise',
        disabled: this.busy || !!it.id, onchange: (ev) => { it.classification = ev.target.value; } },
        CLASSIFICATIONS.map((c) => h('option', { value: c, selected: c === it.classification }, c)));
      it.node = h('div.attach-chip' + (it.error ? '.failed' : '') + (it.id ? '.done' : ''), { title: it.file.name },
        icon(it.error ? 'alert' : it.id ? 'check' : 'file'),
        h('span.attach-text', h('span.attach-name', it.file.name), h('span.attach-sub', meta, cls)),
        bar,
        h('button.attach-x', { type: 'button', 'aria-label': `Remove ${it.file.name}`, title: 'Remove', disabled: this.busy && !it.error, onclick: () => this.remove(it) }, icon('x')));
      it.bar = bar;
      this.setProgress(it, it.id ? 1 : it.progress);
      list.append(it.node);
    }
    this.onChange();
  }

  setProgress(it, fraction) {
    it.progress = fraction;
    if (!it.bar) return;
    const pct = Math.round(fraction * 100);
    it.bar.hidden = !this.busy || !!it.error || !!it.id;
    it.bar.setAttribute('aria-valuenow', String(pct));
    it.bar.firstChild.style.width = pct + '%';
  }

  // uploadAll uploads the files not uploaded yet to session sid and returns every
  // file's attachment id; the first failure stops it and is thrown (with the harness's
  // message), the failed file marked with it.
  async uploadAll(sid, csrf) {
    this.busy = true;
    this.render();
    try {
      for (const it of this.items) {
        if (it.id && it.sid === sid) continue;
        it.error = '';
        it.id = '';
        try {
          const att = await upload(sid, csrf, it, (f) => this.setProgress(it, f));
          it.id = att.id;
          it.sid = sid;
        } catch (e) {
          it.error = e.message;
          throw e;
        } finally {
          it.xhr = null;
          this.render();
        }
      }
      return this.items.map((it) => it.id);
    } finally {
      this.busy = false;
      this.render();
    }
  }
}

// UploadError is an upload the harness refused (status, code, message) or that did
// not reach it (status 0).
export class UploadError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

// upload sends one file's bytes as the request body (streamed by the browser), with
// progress from XMLHttpRequest, which fetch cannot report for uploads.
function upload(sid, csrf, it, onProgress) {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    it.xhr = xhr;
    const q = new URLSearchParams({ name: it.file.name, classification: it.classification });
    xhr.open('POST', `/api/v1/sessions/${encodeURIComponent(sid)}/attachments?${q}`);
    xhr.setRequestHeader('Accept', 'application/json');
    xhr.setRequestHeader('Content-Type', it.file.type || 'application/octet-stream');
    if (csrf) xhr.setRequestHeader('X-Trueforge-CSRF', csrf);
    xhr.upload.onprogress = (ev) => {
      if (ev.lengthComputable && ev.total > 0) onProgress(ev.loaded / ev.total);
    };
    xhr.onload = () => {
      let data = null;
      try {
        data = JSON.parse(xhr.responseText);
      } catch {
        data = null;
      }
      if (xhr.status === 201 && data) {
        onProgress(1);
        resolve(data);
        return;
      }
      const e = (data && data.error) || {};
      reject(new UploadError(xhr.status, e.code || String(xhr.status), `${it.file.name}: ${e.message || xhr.statusText || 'upload failed'}`));
    };
    xhr.onerror = () => reject(new UploadError(0, 'network', `${it.file.name}: the harness cannot be reached. Check your connection and send again.`));
    xhr.onabort = () => reject(new UploadError(0, 'aborted', `${it.file.name}: upload cancelled`));
    xhr.send(it.file);
  });
}

// attachmentChips shows the files a user message carried: name, size, type and
// classification, and the path the agent finds them at.
export function attachmentChips(atts) {
  if (!Array.isArray(atts) || atts.length === 0) return null;
  return h('div.msg-attachments',
    atts.map((a) => h('span.msg-attachment', { title: `${a.path}\nsha256 ${a.sha256}` },
      icon('file'),
      h('span.attach-name', a.name),
      h('span.attach-meta', [formatBytes(a.size), a.detected_type, a.classification].filter(Boolean).join(' · ')))));
}

// dropTarget makes el take dropped files (handed to onFiles), marking target while a
// drag with files is over it.
export function dropTarget(el, target, onFiles) {
  let depth = 0;
  const hasFiles = (ev) => ev.dataTransfer && Array.from(ev.dataTransfer.types || []).includes('Files');
  el.addEventListener('dragenter', (ev) => {
    if (!hasFiles(ev)) return;
    ev.preventDefault();
    depth++;
    target.classList.add('dragging');
  });
  el.addEventListener('dragover', (ev) => {
    if (!hasFiles(ev)) return;
    ev.preventDefault();
    ev.dataTransfer.dropEffect = 'copy';
  });
  el.addEventListener('dragleave', () => {
    depth = Math.max(0, depth - 1);
    if (depth === 0) target.classList.remove('dragging');
  });
  el.addEventListener('drop', (ev) => {
    if (!hasFiles(ev)) return;
    ev.preventDefault();
    depth = 0;
    target.classList.remove('dragging');
    onFiles(Array.from(ev.dataTransfer.files));
  });
}
