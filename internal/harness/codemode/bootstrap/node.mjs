// The Code Mode bootstrap for JavaScript and TypeScript: run by the harness as
// `node --input-type=module -e <this> <language>` in the session's sandbox (with
// --experimental-strip-types for TypeScript). Its stdin and stdout are the bridge to the
// harness, one JSON object per line (see python.py for the frames). The script's
// console output goes to stderr (the output the model sees). Nothing in the bridge is a
// token or a reusable capability: it is this process's stdio, which dies with it.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";

const language = process.argv[1] === "typescript" ? "typescript" : "javascript";
const realWrite = process.stdout.write.bind(process.stdout);
process.stdout.write = process.stderr.write.bind(process.stderr);

class ToolError extends Error {
  constructor(message) {
    super(message);
    this.name = "ToolError";
  }
}
globalThis.ToolError = ToolError;

let buffered = "";
let first = null;
let closed = null;
let next = 0;
const pending = new Map();
let started;
const ready = new Promise((resolve) => (started = resolve));

function onLine(line) {
  const msg = JSON.parse(line);
  if (first === null) {
    first = msg;
    started();
    return;
  }
  const p = pending.get(msg.id);
  if (!p) return;
  pending.delete(msg.id);
  if ("error" in msg) p.reject(new ToolError(msg.error));
  else p.resolve(msg.result);
}

process.stdin.setEncoding("utf8");
process.stdin.on("data", (chunk) => {
  buffered += chunk;
  let i;
  while ((i = buffered.indexOf("\n")) >= 0) {
    const line = buffered.slice(0, i);
    buffered = buffered.slice(i + 1);
    if (line) onLine(line);
  }
});
process.stdin.on("end", () => {
  closed = "the harness ended the bridge";
  for (const p of pending.values()) p.reject(new ToolError(closed));
  pending.clear();
});

globalThis.__trueforge_call__ = (name, args) =>
  new Promise((resolve, reject) => {
    if (closed) return reject(new ToolError(closed));
    const id = ++next;
    pending.set(id, { resolve, reject });
    realWrite(JSON.stringify({ id, tool: name, args: args ?? {} }) + "\n");
  });

await ready;
(0, eval)(first.api ?? "");
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "trueforge-code-"));
const file = path.join(dir, language === "typescript" ? "script.mts" : "script.mjs");
fs.writeFileSync(file, first.code);
first = {};
let status = 0;
try {
  await import(pathToFileURL(file).href);
} catch (err) {
  process.stderr.write((err && err.stack) || String(err));
  process.stderr.write("\n");
  status = 1;
} finally {
  fs.rmSync(dir, { recursive: true, force: true });
}
process.exit(status);
