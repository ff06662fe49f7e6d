"""Log lines: UTC ISO 8601 times, structured fields, one JSON object per line in JSON format.

A record's structured fields travel in ``extra={"fields": {...}}``. The JSON format puts them
at the top level of the line's object (``{"time", "level", "logger", "msg", **fields}``); the
text format appends them klog-style as ``key=value`` pairs (values with spaces or quotes
JSON-quoted, mappings and lists as JSON).

Lines are formatted where they are logged and written to stderr by a thread of their own: a
write to a pipe on the engine's loop waited for the interpreter lock behind the API threads (a
fifth of a bind's time on the loop in cluster mode).
"""

from __future__ import annotations

import functools
import logging
import logging.handlers
import queue
import re
import time
from collections.abc import Callable, Mapping
from typing import Any

import orjson

#: Fields a record cannot override in the JSON object.
RESERVED = ("time", "level", "logger", "msg")
#: Per-node reasons a filter line carries at most (a 5000-node filter must not log a megabyte).
MAX_REASONS = 20


def utc_time(created: float) -> str:
    """``2026-11-23T23:55:44.123Z``"""
    seconds = int(created)
    millis = int((created - seconds) * 1000)
    return _utc_second(seconds) + f".{millis:03d}Z"


@functools.lru_cache(maxsize=4)
def _utc_second(seconds: int) -> str:
    """The whole second's part, formatted once per second rather than once per line."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))


def fields_of(record: logging.LogRecord) -> Mapping[str, Any]:
    fields = getattr(record, "fields", None)
    return fields if isinstance(fields, Mapping) else {}


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, msg, then the record's fields."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": utc_time(record.created),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in fields_of(record).items():
            entry[f"field.{key}" if key in RESERVED else key] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return orjson.dumps(entry, default=str).decode()


#: What makes a text value quoted (as JSON): a space, a quote, "=", a line break, a tab, "\\".
_NEEDS_QUOTES = re.compile(r'[ "=\n\t\\]').search


def _text_value(value: Any) -> str:
    if isinstance(value, str):
        # One search in C: a generator over the six characters was a sixth of a bind line's cost.
        return value if value and not _NEEDS_QUOTES(value) else orjson.dumps(value).decode()
    if isinstance(value, bool) or value is None:
        return orjson.dumps(value).decode()
    if isinstance(value, int | float):
        return str(value)
    return orjson.dumps(value, default=str).decode()


class TextFormatter(logging.Formatter):
    """``2026-11-23T23:55:44.123Z INFO logger: message key=value ...`` (one line per record)."""

    def format(self, record: logging.LogRecord) -> str:
        parts = [utc_time(record.created), record.levelname, f"{record.name}:", record.getMessage()]
        parts.extend(f"{key}={_text_value(value)}" for key, value in fields_of(record).items())
        line = " ".join(parts)
        if record.exc_info:
            line += " exception=" + orjson.dumps(self.formatException(record.exc_info)).decode()
        return line


class _QueuedLines(logging.handlers.QueueHandler):
    """Formats a record where it is logged and queues it with that line as its message, without
    the copy the standard handler makes (a sixth of a bind line's cost, issue 54): the record
    is ours alone, made for this call, and the root logger has this one handler."""

    def prepare(self, record: logging.LogRecord) -> logging.LogRecord:
        line = self.format(record)
        record.message = record.msg = line
        record.args = record.exc_info = record.exc_text = record.stack_info = None
        return record


def configure_logging(level: str, log_format: str) -> logging.handlers.QueueListener:
    """Route every logger through a queue to stderr; stop the returned listener at exit to
    flush what is queued."""
    handler = logging.StreamHandler()
    formatter: logging.Formatter = JsonFormatter() if log_format == "json" else TextFormatter()
    lines: queue.SimpleQueue[logging.LogRecord] = queue.SimpleQueue()
    queued = _QueuedLines(lines)  # formats each line once, where it is logged
    queued.setFormatter(formatter)
    handler.setFormatter(logging.Formatter("%(message)s"))
    # Neither format prints the caller's file and line, thread, process or its name: the
    # logging module's documented switches keep it from looking them up for every record (a
    # third of a bind line's cost, issue 54).
    logging._srcfile = None
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    root = logging.getLogger()
    root.handlers[:] = [queued]
    root.setLevel(level.upper())
    # uvicorn's loggers go through ours. Its start-up lines ("Uvicorn running on ...", one per
    # listener) only at debug: our own line names both listeners with their schemes.
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        uvicorn_logger = logging.getLogger(name)
        uvicorn_logger.handlers[:] = []
        uvicorn_logger.propagate = True
        uvicorn_logger.setLevel(logging.DEBUG if level.lower() == "debug" else logging.WARNING)
    # The Kubernetes client's connection pool logs every connect retry ("Retrying (Retry(total=2
    # ..." three lines a request, every request while the API server is down); the failures
    # reach our own log once per outage with a line when it works again (reflector, discovery).
    logging.getLogger("urllib3.connectionpool").setLevel(
        logging.DEBUG if level.lower() == "debug" else logging.ERROR
    )
    writer = logging.handlers.QueueListener(lines, handler)
    writer.start()
    return writer


def decision_log() -> Callable[[dict[str, Any]], None]:
    """Where the engine reports decisions: one line each on ``dra_extender.decisions``, the
    decision's fields as the line's fields.

    Binds at INFO, failed binds at WARNING; filter and prioritize (one line per scheduling
    attempt, hundreds a second under load) at DEBUG, like kube-scheduler's own per-attempt lines
    at higher verbosity. Every decision also stays in /debug/decisions.
    """
    decisions = logging.getLogger("dra_extender.decisions")

    def sink(entry: dict[str, Any]) -> None:
        verb = entry.get("verb")
        if verb in ("filter", "prioritize"):
            level = logging.DEBUG
        else:
            level = logging.WARNING if entry.get("error") else logging.INFO
        if decisions.isEnabledFor(level):
            fields = {k: v for k, v in entry.items() if k != "time"}
            decisions.log(level, "%s %s", verb, entry.get("pod"), extra={"fields": fields})

    return sink
