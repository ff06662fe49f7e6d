"""A watch's answer read on the event loop, line by line, as the API server streams it.

An informer thread reading its watch wakes for every event and takes the interpreter from the
event loop, which is busy with the verbs: under load that hand-over, not the reading, is most
of what an event costs (issue 54: about 100 us of the thread's CPU per event under the real
control plane, against 34 us for the same reading with nobody else running). Read here, an
event costs the loop what the thread spent reading it, and nobody wakes. httptools (the C
parser of the bind path's connections) takes the chunked framing apart; each complete line is
handed to ``on_line`` on the loop.

One connection per watch, never pooled: a watch holds it for minutes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import cast

import httptools


class StreamEnded(Exception):
    """The answer stopped before its end: the connection closed, or nothing came for too long."""


class LineStream(asyncio.Protocol):
    """One streamed answer: its status; if 200, ``on_open`` as its head is read, then its
    body's lines to ``on_line``. An exception either raises ends the stream and is what
    :meth:`ended` raises."""

    def __init__(
        self, on_open: Callable[[], None], on_line: Callable[[bytes], None], idle_seconds: float
    ) -> None:
        loop = asyncio.get_running_loop()
        self._loop = loop
        self._on_open = on_open
        self._on_line = on_line
        self._idle_seconds = idle_seconds
        self._parser = httptools.HttpResponseParser(self)
        self.transport: asyncio.Transport | None = None
        self.status = 0
        self.reason = ""
        self._reason = bytearray()
        #: The body of an answer that is not a 200 (an error's Status object).
        self.error_body = bytearray()
        self._partial = b""
        self._head: asyncio.Future[int] = loop.create_future()
        self._end: asyncio.Future[None] = loop.create_future()
        self._heard_at = loop.time()
        self._idle = loop.call_later(idle_seconds, self._idle_expired)

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport's subclasses, but have its methods.
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        if self._end.done():
            return
        self._heard_at = self._loop.time()
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._finish(StreamEnded(f"malformed answer: {exc}"))

    def connection_lost(self, exc: Exception | None) -> None:
        self._finish(StreamEnded(f"the connection closed{f': {exc}' if exc else ''}"))

    # httptools' callbacks
    def on_status(self, reason: bytes) -> None:
        self._reason += reason

    def on_headers_complete(self) -> None:
        self.status = self._parser.get_status_code()
        self.reason = self._reason.decode("latin-1")
        if not self._head.done():
            self._head.set_result(self.status)
        if self.status == 200:
            try:
                self._on_open()  # before any line: the body may have come with the head
            except Exception as exc:
                self._finish(exc)

    def on_body(self, body: bytes) -> None:
        if self._end.done():
            return
        if self.status != 200:
            self.error_body += body
            return
        *lines, self._partial = (self._partial + body if self._partial else body).split(b"\n")
        try:
            for line in lines:
                if line.strip():
                    self._on_line(line)
        except Exception as exc:  # the reader's verdict (a relist, an error event, a stop)
            self._finish(exc)

    def on_message_complete(self) -> None:
        self._finish(None)

    # ours
    async def status_known(self) -> int:
        """The answer's status, once its head arrived (raises why the stream ended before)."""
        return await asyncio.shield(self._head)

    async def ended(self) -> None:
        """Until the answer's end; raises why it ended early."""
        await asyncio.shield(self._end)

    def close(self) -> None:
        self._finish(StreamEnded("closed"))

    def _finish(self, error: BaseException | None) -> None:
        self._idle.cancel()
        if not self._head.done():
            self._head.set_exception(error or StreamEnded("the answer ended before its head"))
            self._head.exception()  # marked as read
        if not self._end.done():
            if error is None:
                self._end.set_result(None)
            else:
                self._end.set_exception(error)
                self._end.exception()  # marked as read: a stream nobody awaits any more is quiet
        if self.transport is not None:
            self.transport.close()

    def _idle_expired(self) -> None:
        quiet = self._loop.time() - self._heard_at
        if quiet < self._idle_seconds:  # one timer, moved on when it fires early
            self._idle = self._loop.call_later(self._idle_seconds - quiet, self._idle_expired)
            return
        self._finish(StreamEnded(f"nothing heard for {self._idle_seconds:g} s"))
