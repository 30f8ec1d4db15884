# The Code Mode bootstrap for Python: run by the harness as `python3 -u -c <this>` in the
# session's sandbox. Its stdin and stdout are the bridge to the harness, one JSON object
# per line; the script never touches them:
#   harness -> here, first line: {"code": "...", "api": "<stub module source>"}
#   here -> harness: {"id": N, "tool": "<server>__<tool>", "args": {...}}
#   harness -> here: {"id": N, "result": ...} or {"id": N, "error": "..."}
# The script's stdout goes to stderr (the output the model sees); its stdin is /dev/null.
# The bridge descriptors are duplicates the script's children do not inherit (Python
# creates them close-on-exec), and they die with this process: no token, no reusable
# capability.
import builtins, json, linecache, os, sys, threading, types

_bridge_in = os.fdopen(os.dup(0), "rb")
_bridge_out = os.fdopen(os.dup(1), "wb", buffering=0)
_null = os.open(os.devnull, os.O_RDONLY)
os.dup2(_null, 0)
os.close(_null)
os.dup2(2, 1)
sys.stdout.reconfigure(line_buffering=True)


def _readline():
    line = _bridge_in.readline()
    return line.rstrip(b"\n") if line else None


_first = json.loads(_readline())


class ToolError(Exception):
    """An MCP call the harness refused or the tool failed; its message says why."""


_lock = threading.Lock()
_pending = {}
_next = [0]
_closed = [None]


def _reader():
    while True:
        line = _readline()
        if line is None:
            break
        msg = json.loads(line)
        slot = _pending.pop(msg.get("id"), None)
        if slot is not None:
            slot[1].append(msg)
            slot[0].set()
    with _lock:
        _closed[0] = "the harness ended the bridge"
        for ev, box in list(_pending.values()):
            box.append({"error": _closed[0]})
            ev.set()
        _pending.clear()


threading.Thread(target=_reader, daemon=True).start()


def __trueforge_call__(name, args):
    frame = json.dumps({"tool": name, "args": args}, separators=(",", ":"))
    ev, box = threading.Event(), []
    with _lock:
        if _closed[0]:
            raise ToolError(_closed[0])
        _next[0] += 1
        n = _next[0]
        _pending[n] = (ev, box)
        _bridge_out.write(('{"id":%d,' % n + frame[1:] + "\n").encode())
    ev.wait()
    msg = box[0]
    if "error" in msg:
        raise ToolError(msg["error"])
    return msg.get("result")


builtins.__trueforge_call__ = __trueforge_call__
builtins.ToolError = ToolError
_api = types.ModuleType("tools")
_api.ToolError = ToolError
# The stubs' source: tools.__source__, and lines in tracebacks through them.
_api.__source__ = _first.get("api", "")
linecache.cache["<tools>"] = (len(_api.__source__), None, _api.__source__.splitlines(True), "<tools>")
exec(compile(_api.__source__, "<tools>", "exec"), _api.__dict__)
sys.modules["tools"] = _api
_globals = {"__name__": "__main__", "__builtins__": builtins}
_globals.update({k: v for k, v in _api.__dict__.items() if not k.startswith("_")})
del _first["api"]
exec(compile(_first.pop("code"), "<script>", "exec"), _globals)
