"""Arbiter's persistent Python plugin worker.

    python3 -B worker.py <plugin folder> <memory cap MiB>

Started by Arbiter (src/kinds/plugin/pool.ts) with the plugin folder as its working directory,
a scrubbed environment and its own process group. It speaks a line protocol on file
descriptor 3 (a socket pair with the server), never on stdout, so whatever the plugin prints
cannot corrupt it: each message is one line of UTF-8 JSON (JSON text never holds a raw newline).

    worker -> server, once:  {"hello": {"pid", "runtime": "python", "version"}}
    server -> worker:        {"id", "module", "file", "callable", "task", "trajectory"}
    worker -> server:        {"id", "ok": true, "reward", "success"?, "message"?, "output"?}
                         or  {"id", "ok": false, "code": "ARB_PLUGIN_...", "message", "type"?, "traceback"?}

Calls are answered one at a time in the order received (the server pipelines several). Each
answer is written before the next call starts, so when the worker dies the server knows the
call that was running is the oldest unanswered one and that the others never started.
Compatible with Python 3.8 and later.
"""
import asyncio
import importlib
import inspect
import json
import math
import os
import socket
import sys
import traceback
from collections.abc import Mapping

PROTOCOL_FD = 3
_MISSING = object()


class BadReturn(Exception):
    pass


def _die_with_parent():
    # If the server is killed outright, take this worker down too (Linux only; best effort).
    try:
        import ctypes
        import signal
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
    except Exception:  # pragma: no cover - not Linux, or no libc symbol
        pass
    if os.getppid() == 1:
        os._exit(0)


def _limit_memory(memory_mb):
    if memory_mb <= 0:
        return
    try:
        import resource
        limit = memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    except Exception as error:  # pragma: no cover - platform without RLIMIT_AS
        sys.stderr.write("arbiter worker: cannot set the memory cap: %r\n" % (error,))


def _to_float(value, what):
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError) as error:
        raise BadReturn("%s is not something float() accepts: %s: %s" % (what, type(error).__name__, error))
    if not math.isfinite(number):
        raise BadReturn("%s is not a finite number (%r)" % (what, number))
    return number


def _to_success(value):
    if value is None or value is _MISSING:
        return _MISSING
    if isinstance(value, bool):
        return value
    if type(value).__name__ == "bool_":  # numpy.bool_
        return bool(value)
    raise BadReturn("success must be a bool, got %s" % (type(value).__name__,))


def _to_text(value):
    if value is None or value is _MISSING:
        return _MISSING
    return value if isinstance(value, str) else str(value)


def convert(value):
    """The verdict of a return value: Python's own float(), or the fields of a result object."""
    if isinstance(value, Mapping):
        def get(key):
            return value.get(key, _MISSING)
        shape = "mapping"
    elif not isinstance(value, (str, bytes, bytearray, int, float)) and (hasattr(value, "reward") or hasattr(value, "success")):
        def get(key):
            return getattr(value, key, _MISSING)
        shape = "object"
    else:
        return {"reward": _to_float(value, "the return value")}
    reply = {}
    reward = get("reward")
    success = _to_success(get("success"))
    if reward is not _MISSING:
        reply["reward"] = _to_float(reward, "the returned %s's reward" % shape)
    elif success is not _MISSING:
        reply["reward"] = 1.0 if success else 0.0
    else:
        raise BadReturn("the returned %s has neither reward nor success" % shape)
    if success is not _MISSING:
        reply["success"] = success
    for key in ("message", "output"):
        text = _to_text(get(key))
        if text is not _MISSING:
            reply[key] = text
    return reply


class Worker:
    def __init__(self, sock):
        self.sock = sock
        self.modules = {}
        self.loop = None

    def send(self, message):
        """Writes one line: a message, or an answer that `call` already wrote as JSON text."""
        self.sock.sendall(((message if type(message) is str else json.dumps(message)) + "\n").encode("utf-8"))

    def error(self, call_id, code, message, exc=None, with_traceback=False):
        reply = {"id": call_id, "ok": False, "code": code, "message": message}
        if exc is not None:
            reply["type"] = type(exc).__name__
            if with_traceback:
                reply["traceback"] = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-8000:]
        return reply

    def load(self, name, file):
        module = self.modules.get(name)
        if module is not None:
            return module
        module = importlib.import_module(name)
        actual = getattr(module, "__file__", None)
        if actual is None or os.path.realpath(actual) != file:
            raise LookupError("module %r imports as %s, not the plugin's %s (it is shadowed by a built-in or installed module; rename it)" % (name, actual or "a built-in", file))
        self.modules[name] = module
        return module

    def await_(self, awaitable):
        if self.loop is None:
            self.loop = asyncio.new_event_loop()

        async def run():
            return await awaitable
        return self.loop.run_until_complete(run())

    def call(self, request):
        call_id = request.get("id")
        name = request["module"]
        try:
            module = self.load(name, request["file"])
        except MemoryError:
            raise
        except LookupError as exc:
            return self.error(call_id, "ARB_PLUGIN_MODULE_NOT_FOUND", str(exc))
        except Exception as exc:
            return self.error(call_id, "ARB_PLUGIN_IMPORT_FAILED", "importing %s raised %s: %s" % (name, type(exc).__name__, exc), exc, True)
        function = getattr(module, request["callable"], _MISSING)
        if function is _MISSING:
            return self.error(call_id, "ARB_PLUGIN_CALLABLE_NOT_FOUND", "module %s has no attribute %r" % (name, request["callable"]))
        if not callable(function):
            return self.error(call_id, "ARB_PLUGIN_NOT_CALLABLE", "%s.%s is a %s, not a callable" % (name, request["callable"], type(function).__name__))
        try:
            value = function(request.get("task"), request.get("trajectory"))
            if type(value) is float and math.isfinite(value) and type(call_id) is int:
                # The common answer, a plain finite float: written directly, the same JSON that
                # json.dumps writes (a finite float's repr is a JSON number) in an eighth of the time.
                return '{"id": %d, "ok": true, "reward": %r}' % (call_id, value)
            if inspect.isawaitable(value):
                value = self.await_(value)
        except MemoryError:
            raise
        except Exception as exc:
            message = str(exc) or type(exc).__name__
            return self.error(call_id, "ARB_PLUGIN_RAISED", message, exc, True)
        try:
            reply = convert(value)
        except MemoryError:
            raise
        except BadReturn as exc:
            return self.error(call_id, "ARB_PLUGIN_BAD_RETURN", str(exc))
        except Exception as exc:
            return self.error(call_id, "ARB_PLUGIN_BAD_RETURN", "reading the return value raised %s: %s" % (type(exc).__name__, exc), exc, True)
        reply["id"] = call_id
        reply["ok"] = True
        return reply

    def flush_output(self):
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass

    def serve(self):
        buffer = bytearray()
        # recv_into one reused buffer: recv(n) would allocate n bytes per read (an mmap at 1 MiB).
        scratch = bytearray(256 * 1024)
        view = memoryview(scratch)
        while True:
            count = self.sock.recv_into(scratch)
            if count == 0:
                return
            seen = len(buffer)  # holds no newline: the search starts after it
            buffer += view[:count]
            position = 0
            end = buffer.find(b"\n", seen)
            while end != -1:
                request = json.loads(buffer[position:end].decode("utf-8"))
                position = end + 1
                try:
                    reply = self.call(request)
                except MemoryError:
                    # The cap was hit: this process can no longer be trusted to work. Say so, then go.
                    self.modules = {}
                    self.send({"id": request.get("id"), "ok": False, "code": "ARB_PLUGIN_CRASHED", "fatal": True,
                               "message": "the plugin ran out of memory (MemoryError at the worker's memory cap)"})
                    self.flush_output()
                    os._exit(137)
                self.send(reply)
                self.flush_output()
                end = buffer.find(b"\n", position)
            del buffer[:position]


def main():
    _die_with_parent()
    folder = sys.argv[1]
    memory_mb = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    os.set_inheritable(PROTOCOL_FD, False)
    sock = socket.socket(fileno=PROTOCOL_FD)
    # The script's own folder is sys.path[0] when run as a script: put the plugin there instead,
    # so the plugin's modules (and only this plugin's) import by their dotted names.
    sys.path[0] = folder
    sys.dont_write_bytecode = True
    _limit_memory(memory_mb)
    worker = Worker(sock)
    worker.send({"hello": {"pid": os.getpid(), "runtime": "python", "version": "%d.%d.%d" % sys.version_info[:3]}})
    worker.serve()
    os._exit(0)


if __name__ == "__main__":
    main()
