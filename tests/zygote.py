"""A fork server ("zygote") for the tests' ``python -m extender.cli ...`` and ``kubectl-dra`` processes.

Each such process, started afresh, pays about 1.8 s of CPU before it does anything: the imports
of fastapi, the Kubernetes client, aiohttp, cel-python, and the CEL LALR parser (0.4 s). The
integration and real-control-plane tests start 150-180 of them. Here, per pytest worker and on
first use, one server process imports all of that once, starts no thread, freezes its heap
(``gc.freeze``) and forks a child per request; the child becomes what the fresh process would
have been and runs the same ``main``:

- argv, environment, working directory and stdin/stdout/stderr are the request's (the file
  descriptors passed over a Unix socket, ``socket.send_fds``); every other descriptor is closed;
- signal handlers are a fresh interpreter's, ``random`` is seeded anew, a session of its own only
  when ``start_new_session`` asked for one (as ``subprocess`` does);
- at the end it does what the interpreter does at exit: joins non-daemon threads, runs the
  ``atexit`` functions, flushes stdout and stderr, and exits with ``main``'s code (or 1 and a
  traceback, or dies of SIGINT after an unhandled KeyboardInterrupt).

The server reaps its children and reports each exit status to whoever asked for it; the client
(:class:`ZygoteProcess`) has the ``subprocess.Popen`` surface the tests use, signals its child
through a pidfd (no pid reuse race: the child waits for the client to hold the pidfd before it
runs), and the server exits when the pytest worker that started it is gone.

What is not as fresh: modules that read the environment at import time saw the server's (the
worker's environment when the server started): the child reads $KUBECONFIG again for the
Kubernetes client, and a request whose environment differs in another such variable
(:data:`IMPORT_TIME_ENV`: ``PYTHON*``, locale, ``PROMETHEUS_*``, ``OTEL_*``, ...) gets a plain
subprocess. Every child shares
the server's string hash seed. ``DRA_TEST_ZYGOTE=0`` uses plain subprocesses everywhere; so does
any command that is not ``sys.executable -m extender.cli`` or the ``kubectl-dra`` entry point,
and every command when the server cannot start.

Measured on the 2-core machine, one pytest at a time (``/usr/bin/time -v``; CPU is user + system
of pytest and all it reaped), plain subprocesses against the zygote. Integration: with
``DRA_TEST_ZYGOTE=0``; real control plane: the tree before the zygote (the same code path).

=====================  =========  =================  ===================
suite                  passed     wall               CPU
=====================  =========  =================  ===================
tests/integration      82 / 82    3:35 -> 2:05       368 s -> 141 s
tests/realcluster      122 / 122  9:05 -> 5:38       730 s -> 502 s
=====================  =========  =================  ===================

A forked ``simulate`` costs about 0.2 s against 2.7 s for a fresh interpreter.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import importlib.util
import io
import json
import os
import random
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

#: Environment variables read at import time (by Python itself or by modules the server imports;
#: a scan of their module-level code): a request that differs from the server in one of these
#: runs as a plain subprocess. $KUBECONFIG, read at import by the Kubernetes client, is read
#: again in the child instead (:func:`_as_imported_now`).
IMPORT_TIME_ENV = (
    "PYTHON",
    "LC_",
    "LANG",
    "PROMETHEUS_",
    "prometheus_",
    "AIOHTTP_",
    "OTEL_",
    "FROZENLIST_",
    "MULTIDICT_",
    "PROPCACHE_",
    "YARL_",
    "PENDULUM_",
    "WEBSOCKETS_",
)

CLI_MODULE = "extender.cli"
KUBECTL_DRA = Path(sys.executable).parent / "kubectl-dra"


def enabled() -> bool:
    return os.environ.get("DRA_TEST_ZYGOTE", "1") != "0"


def entry_of(command: Sequence[str | os.PathLike[str]]) -> tuple[str, str, list[str]] | None:
    """(entry point, argv[0], arguments) when the zygote can run ``command``, else None."""
    words = [os.fspath(w) for w in command]
    if len(words) >= 3 and words[0] == sys.executable and words[1:3] == ["-m", CLI_MODULE]:
        spec = importlib.util.find_spec(CLI_MODULE)
        assert spec is not None and spec.origin is not None
        return "cli", spec.origin, words[3:]
    if words and words[0] == str(KUBECTL_DRA):
        return "kubectl-dra", words[0], words[1:]
    return None


# --------------------------------------------------------------------------- the client side


class ZygoteUnavailable(Exception):
    """The zygote cannot take this request: use a plain subprocess."""


class _Server:
    """This worker's zygote: started on first use; None of it when it could not start."""

    def __init__(self) -> None:
        self.folder = tempfile.mkdtemp(prefix="dra-zygote-")
        self.path = os.path.join(self.folder, "socket")
        self.env = dict(os.environ)
        self.log = os.path.join(self.folder, "zygote.log")
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "tests.zygote", self.path, str(os.getpid())],
                cwd=str(Path(__file__).resolve().parents[1]),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=log,
            )
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], 120)
        line = self.proc.stdout.readline() if ready else b""
        self.proc.stdout.close()
        if line.strip() != b"ready":
            self.stop()
            raise ZygoteUnavailable(f"the zygote did not start: {Path(self.log).read_text(errors='replace')}")
        atexit.register(self.stop)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.folder, ignore_errors=True)

    def alive(self) -> bool:
        return self.proc.poll() is None


_lock = threading.Lock()
_server: _Server | None = None
_failed = False


def _the_server() -> _Server:
    global _server, _failed
    with _lock:
        if _failed:
            raise ZygoteUnavailable("the zygote could not start before")
        if _server is None or not _server.alive():
            try:
                _server = _Server()
            except (OSError, ZygoteUnavailable) as exc:
                _failed = True
                print(f"tests.zygote: plain subprocesses from now on: {exc}", file=sys.stderr)
                raise ZygoteUnavailable(str(exc)) from exc
        return _server


def _fd_of(value: Any, default: int, opened: list[int]) -> int:
    if value is None:
        return default
    if value == subprocess.DEVNULL:
        fd = os.open(os.devnull, os.O_RDWR)
        opened.append(fd)
        return fd
    if isinstance(value, int) and value >= 0:
        return value
    if hasattr(value, "fileno"):
        fileno: int = value.fileno()
        return fileno
    raise ZygoteUnavailable(f"unsupported stream {value!r}")


class ZygoteProcess:
    """A child of the zygote, with the ``subprocess.Popen`` surface the tests use."""

    def __init__(
        self,
        command: Sequence[str | os.PathLike[str]],
        *,
        cwd: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] | None = None,
        stdin: Any = None,
        stdout: Any = None,
        stderr: Any = None,
        text: bool = False,
        start_new_session: bool = False,
    ) -> None:
        entry = entry_of(command)
        if entry is None:
            raise ZygoteUnavailable("not an extender command")
        environment = dict(os.environ if env is None else env)
        server = _the_server()
        for key in set(environment) | set(server.env):
            if key.startswith(IMPORT_TIME_ENV) and environment.get(key) != server.env.get(key):
                raise ZygoteUnavailable(f"{key} differs from the zygote's (read at import time)")
        self.args = list(command)
        self.returncode: int | None = None
        self.stdin: IO[Any] | None = None
        self.stdout: IO[Any] | None = None
        self.stderr: IO[Any] | None = None
        self._lock = threading.Lock()
        self._orphan = False
        self._pidfd: int | None = None
        opened: list[int] = []  # the child's ends, closed here once sent
        mine: list[int] = []  # our ends of pipes, closed if the request fails
        try:
            if stdin == subprocess.PIPE:
                raise ZygoteUnavailable("stdin=PIPE")
            fd_in = _fd_of(stdin, 0, opened)
            if stdout == subprocess.PIPE:
                read, fd_out = os.pipe()
                opened.append(fd_out)
                mine.append(read)
            else:
                fd_out = _fd_of(stdout, 1, opened)
            if stderr == subprocess.STDOUT:
                fd_err = fd_out
            elif stderr == subprocess.PIPE:
                read_err, fd_err = os.pipe()
                opened.append(fd_err)
                mine.append(read_err)
            else:
                fd_err = _fd_of(stderr, 2, opened)
            request = {
                "entry": entry[0],
                "argv": [entry[1], *entry[2]],
                "env": environment,
                "cwd": os.fspath(cwd) if cwd is not None else os.getcwd(),
                "new_session": start_new_session,
            }
            self._socket = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            try:
                self._socket.settimeout(30)
                self._socket.connect(server.path)
                socket.send_fds(self._socket, [json.dumps(request).encode()], [fd_in, fd_out, fd_err])
                answer = self._socket.recv(64)
                if not answer.startswith(b"pid "):
                    raise ZygoteUnavailable(f"the zygote answered {answer!r}")
                self.pid = int(answer[4:])
                with contextlib.suppress(OSError):
                    self._pidfd = os.pidfd_open(self.pid)
                self._socket.send(b"go")
                self._socket.settimeout(None)
            except BaseException:
                self._socket.close()
                raise
        except BaseException:
            for fd in mine:
                os.close(fd)
            raise
        finally:
            for fd in opened:
                os.close(fd)
        if stdout == subprocess.PIPE:
            self.stdout = open(mine[0], "r" if text else "rb")  # noqa: SIM115 - the caller's, as Popen's
        if stderr == subprocess.PIPE:
            self.stderr = open(mine[-1], "r" if text else "rb")  # noqa: SIM115

    def _receive(self, timeout: float | None, *, blocking: bool = True) -> bool:
        """Take the exit status if it arrives within ``timeout``; whether the child has ended."""
        if not self._lock.acquire(blocking):
            return False  # another thread waits for it (as Popen.poll then answers None)
        try:
            if self.returncode is not None:
                return True
            if self._orphan:
                return self._orphan_ended(timeout)
            ready, _, _ = select.select([self._socket], [], [], timeout)
            if not ready:
                return False
            answer = self._socket.recv(64)
            self._socket.close()
            if answer.startswith(b"exit "):
                self.returncode = os.waitstatus_to_exitcode(int(answer[5:]))
                return True
            # The zygote is gone (the worker is ending): init reaps the orphan; its status is lost.
            self._orphan = True
            return self._orphan_ended(timeout)
        finally:
            self._lock.release()

    def _orphan_ended(self, timeout: float | None) -> bool:
        if self._pidfd is not None:
            ended = bool(select.select([self._pidfd], [], [], timeout)[0])
        else:
            ended = not os.path.exists(f"/proc/{self.pid}")
        if ended:
            self.returncode = 255
        return ended

    def __del__(self) -> None:
        pidfd = getattr(self, "_pidfd", None)
        if pidfd is not None:
            with contextlib.suppress(OSError):
                os.close(pidfd)
        sock = getattr(self, "_socket", None)
        if sock is not None:
            sock.close()

    def poll(self) -> int | None:
        self._receive(0, blocking=False)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if not self._receive(timeout):
            raise subprocess.TimeoutExpired(self.args, timeout or 0)
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            if self._pidfd is not None:
                signal.pidfd_send_signal(self._pidfd, sig)
            else:
                os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def communicate(self, input: Any = None, timeout: float | None = None) -> tuple[Any, Any]:
        """Read stdout and stderr (when pipes) to their ends, then wait."""
        if input is not None:
            raise ValueError("no stdin pipe")
        deadline = None if timeout is None else time.monotonic() + timeout
        streams = [s for s in (self.stdout, self.stderr) if s is not None]
        chunks: dict[int, list[bytes]] = {s.fileno(): [] for s in streams}
        open_fds = list(chunks)
        while open_fds:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select(open_fds, [], [], left)
            if not ready:
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
            for fd in ready:
                data = os.read(fd, 65536)
                if data:
                    chunks[fd].append(data)
                else:
                    open_fds.remove(fd)
        results: list[Any] = []
        for stream in (self.stdout, self.stderr):
            if stream is None:
                results.append(None)
                continue
            data = b"".join(chunks[stream.fileno()])
            if isinstance(stream, io.TextIOBase):
                # As Popen's text mode: the locale's encoding, universal newlines.
                text = data.decode(stream.encoding or "utf-8", errors=stream.errors or "strict")
                results.append(text.replace("\r\n", "\n").replace("\r", "\n"))
            else:
                results.append(data)
            stream.close()
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        self.wait(left)
        return results[0], results[1]

    def __enter__(self) -> ZygoteProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        for stream in (self.stdout, self.stderr):
            if stream is not None:
                stream.close()
        self.wait()


#: What :func:`popen` returns: a zygote child, or a plain subprocess.
Process = subprocess.Popen[Any] | ZygoteProcess


def popen(command: Sequence[str | os.PathLike[str]], **kwargs: Any) -> Process:
    """``subprocess.Popen(command, **kwargs)``, forked from the zygote when it can be."""
    if enabled() and entry_of(command) is not None:
        try:
            return ZygoteProcess(command, **kwargs)
        except ZygoteUnavailable:
            pass
    return subprocess.Popen(command, **kwargs)


def run(
    command: Sequence[str | os.PathLike[str]],
    *,
    capture_output: bool = False,
    timeout: float | None = None,
    check: bool = False,
    **kwargs: Any,
) -> subprocess.CompletedProcess[Any]:
    """``subprocess.run`` with :func:`popen`."""
    if capture_output:
        kwargs.update(stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    process = popen(command, **kwargs)
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        raise
    except BaseException:
        process.kill()
        raise
    code = process.wait()
    if check and code:
        raise subprocess.CalledProcessError(code, list(command), out, err)
    return subprocess.CompletedProcess(list(command), code, out, err)


# --------------------------------------------------------------------------- the server side


def _entry_point(name: str) -> Any:
    if name == "cli":
        import extender.cli

        return extender.cli.main
    import extender.commands.kubectl_dra

    return extender.commands.kubectl_dra.main


def _prepare() -> None:
    """Import what ``python -m extender.cli`` (serve, simulate, explain) and ``kubectl-dra`` import."""
    import extender.cli
    import extender.cluster.kube
    import extender.commands.kubectl_dra
    import extender.explain
    import extender.serve_command
    import extender.service.cluster_mode
    import extender.simulate
    import extender.statefile
    from extender.cel.parser import build_lark

    build_lark()
    del extender
    # What serve imports only once it starts its listeners.
    for name in (
        "fastapi.telemetry._runtime",
        "pydantic.v1",
        "uvicorn.lifespan.on",
        "uvicorn.protocols.http.auto",
        "uvicorn.protocols.websockets.auto",
    ):
        with contextlib.suppress(ImportError):
            importlib.import_module(name)


def _open_fds() -> set[int]:
    """The open descriptors (not the one listing them, closed by then)."""
    found = set()
    for name in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            os.fstat(int(name))
            found.add(int(name))
    return found


def _serve(path: str, parent: int) -> None:
    fresh_handlers = {sig: signal.getsignal(sig) for sig in signal.valid_signals()}
    fresh_path0 = sys.path[0]
    _prepare()
    if threading.active_count() != 1:
        raise SystemExit(f"tests.zygote: the imports started threads: {threading.enumerate()}")
    gc.collect()
    gc.freeze()
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_read, False)
    os.set_blocking(wake_write, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(wake_write)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(path)
    listener.listen(64)
    # Descriptors the imports left open (owned by objects the child keeps): not ours to close.
    keep = _open_fds() - {listener.fileno(), wake_read, wake_write}
    children: dict[int, socket.socket] = {}
    os.write(1, b"ready\n")
    with open(os.devnull, "wb") as null:
        os.dup2(null.fileno(), 1)

    def child(conn: socket.socket, go: int, request: dict[str, Any], fds: list[int]) -> None:
        code = 1
        try:
            if request["new_session"]:
                os.setsid()
            signal.set_wakeup_fd(-1)
            for sig, handler in fresh_handlers.items():
                with contextlib.suppress(OSError, ValueError, TypeError):
                    signal.signal(sig, handler)
            listener.close()
            conn.close()
            for other in children.values():
                other.close()
            os.close(wake_read)
            os.close(wake_write)
            if os.read(go, 1) != b"g":
                os._exit(1)  # the client is gone
            for number, fd in enumerate(fds):
                os.dup2(fd, number)
            for fd in (_open_fds() - keep) | {go, *fds}:
                if fd in (0, 1, 2):
                    continue
                with contextlib.suppress(OSError):
                    os.close(fd)
            cwd = request["cwd"]
            os.chdir(cwd)
            os.environ.clear()
            os.environ.update(request["env"])
            sys.argv = list(request["argv"])
            if sys.path and sys.path[0] == fresh_path0:
                sys.path[0] = cwd if request["entry"] == "cli" else os.path.dirname(sys.argv[0])
            random.seed()
            _as_imported_now()
            if isinstance(sys.stdout, io.TextIOWrapper):
                sys.stdout.reconfigure(line_buffering=os.isatty(1))
            code = _run_main(request["entry"], sys.argv[1:])
        except BaseException:
            traceback.print_exc()
        finally:
            os._exit(code)

    try:
        while os.getppid() == parent:
            ready, _, _ = select.select([listener.fileno(), wake_read], [], [], 1.0)
            if wake_read in ready:
                with contextlib.suppress(BlockingIOError):
                    while os.read(wake_read, 512):
                        pass
            while children:
                try:
                    pid, status = os.waitpid(-1, os.WNOHANG)
                except ChildProcessError:
                    break
                if pid == 0:
                    break
                conn = children.pop(pid, None)
                if conn is not None:
                    with contextlib.suppress(OSError):
                        conn.send(b"exit %d" % status)
                    conn.close()
            if listener.fileno() not in ready:
                continue
            conn, _ = listener.accept()
            conn.settimeout(30)
            fds: list[int] = []
            go_write = -1
            try:
                message, fds, _, _ = socket.recv_fds(conn, 1 << 22, 3)
                request = json.loads(message)
                go_read, go_write = os.pipe()
                pid = os.fork()
                if pid == 0:
                    os.close(go_write)
                    child(conn, go_read, request, fds)
                os.close(go_read)
                children[pid] = conn
                conn.send(b"pid %d" % pid)
                if conn.recv(8) == b"go":
                    os.write(go_write, b"g")
                conn.settimeout(None)
            except (OSError, ValueError) as exc:
                print(f"tests.zygote: a request failed: {exc!r}", file=sys.stderr)
                if go_write == -1:
                    conn.close()
            finally:
                if go_write != -1:
                    os.close(go_write)  # without "go" the child reads an end and exits
                for fd in fds:
                    os.close(fd)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)
        with contextlib.suppress(OSError):
            os.rmdir(os.path.dirname(path))


def _as_imported_now() -> None:
    """What a module took from the environment at import and the child's environment changes."""
    from kubernetes import config
    from kubernetes.config import kube_config

    location = os.environ.get("KUBECONFIG", "~/.kube/config")
    kube_config.KUBE_CONFIG_DEFAULT_LOCATION = config.KUBE_CONFIG_DEFAULT_LOCATION = location


def _run_main(entry: str, args: list[str]) -> int:
    """``main(args)``, then what the interpreter does at exit; the exit code."""
    interrupted = False
    try:
        code = _exit_code(_entry_point(entry)(args))
    except SystemExit as exc:
        code = _exit_code(exc.code)
    except KeyboardInterrupt:
        traceback.print_exc()
        code, interrupted = 1, True
    except BaseException:
        traceback.print_exc()
        code = 1
    shutdown = getattr(threading, "_shutdown")  # noqa: B009 - the interpreter's own exit step
    shutdown()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            code = code or 120  # as the interpreter, when flushing stdout fails at exit
    if interrupted:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    return code


def _exit_code(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


if __name__ == "__main__":
    _serve(sys.argv[1], int(sys.argv[2]))
