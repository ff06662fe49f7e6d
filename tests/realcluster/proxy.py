"""A TCP proxy that can hold or slow the traffic through it: the network's part in the fencing
trials (a partition, a retransmitting connection, a stalled load balancer between a replica and
kube-apiserver) and in the slow-etcd runs (between kube-apiserver and etcd).

While held, the bytes the replica sends are kept, in order, and nothing reaches kube-apiserver;
answers already on their way back still arrive. :meth:`Proxy.release` lets the kept bytes go on,
as a healed partition delivers what it held. A replica that gives up on a request closes its
connection; the proxy keeps its side toward kube-apiserver open for :data:`LINGER` seconds more,
as a load balancer keeps its upstream connection until the upstream answers, so the held
request is carried out (kube-apiserver cancels a request whose client has gone). TLS passes through untouched (the replica checks
kube-apiserver's certificate for 127.0.0.1, which the proxy's address is too).
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable
from types import TracebackType

#: Seconds the connection toward kube-apiserver stays open after the replica closed its side.
LINGER = 5.0


class Proxy:
    def __init__(self, target: int | Callable[[], tuple[str, int] | None]) -> None:
        """``target``: the port on 127.0.0.1 every connection goes to, or a function choosing
        where each new one goes (None: nowhere, the connection is closed at once)."""
        self.target = target if callable(target) else (lambda: ("127.0.0.1", target))
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._open = threading.Event()
        self._open.set()
        self._stopped = threading.Event()
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        #: Bytes sent toward kube-apiserver while held, counted (the trials check a write was held).
        self.held_bytes = 0
        #: Seconds each chunk waits before it goes on, both ways (a slow link or a slow disk); a
        #: chunk toward kube-apiserver still on its way when :meth:`hold` is called is held.
        self.delay = 0.0
        #: Seconds each chunk toward kube-apiserver waits (requests only: a slow API server,
        #: whose watch streams still flow).
        self.request_delay = 0.0

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def hold(self) -> None:
        self._open.clear()

    def release(self) -> None:
        self._open.set()

    def drop(self) -> None:
        """Break every connection through it (both ends see them reset), and hold what the
        connections made from now on carry until :meth:`release`."""
        self.hold()
        with self._lock:
            sockets, self._sockets = self._sockets, []
        for s in sockets:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()

    def __enter__(self) -> Proxy:
        threading.Thread(target=self._accept, name="proxy", daemon=True).start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stopped.set()
        self._open.set()
        self._listener.close()
        with self._lock:
            for s in self._sockets:
                s.close()

    def _accept(self) -> None:
        while not self._stopped.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            target = self.target()
            try:
                if target is None:
                    raise OSError("nowhere to go")
                server = socket.create_connection(target, timeout=2)
                server.settimeout(None)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._sockets += [client, server]
            threading.Thread(target=self._pump, args=(client, server, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, False), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, outgoing: bool) -> None:
        """Copy ``source`` to ``sink``; toward kube-apiserver, wait while held (the bytes read
        meanwhile are kept in this thread, in order)."""
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                if self.delay or (outgoing and self.request_delay):
                    time.sleep(self.delay + (self.request_delay if outgoing else 0.0))
                if outgoing and not self._open.is_set():
                    self.held_bytes += len(data)
                    self._open.wait()
                if self._stopped.is_set():
                    break
                sink.sendall(data)
            if outgoing:
                self._stopped.wait(LINGER)  # the replica gave up: kube-apiserver still answers
        except OSError:
            pass
        finally:
            for s in (source, sink):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
