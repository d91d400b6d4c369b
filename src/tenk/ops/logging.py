"""JSON-lines logging; every record carries the request id of the request that logged it."""

from __future__ import annotations

import logging
import sys
from datetime import UTC, datetime
from typing import Any

import orjson

from tenk.platform import request_id_var

_RESERVED = set(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {"message", "asctime", "request_id"}
_base_factory = logging.getLogRecordFactory()


def _record_with_request_id(*args: Any, **kwargs: Any) -> logging.LogRecord:
    # Taken when the record is made, not when it is formatted: a handler may format later, elsewhere.
    record = _base_factory(*args, **kwargs)
    request_id = request_id_var.get()
    # The id's shape is ASCII (`request_id._ACCEPTABLE`, or hex digits).
    record.request_id = request_id.decode("ascii") if request_id is not None else None
    return record


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        request_id = getattr(record, "request_id", None)
        if request_id is not None:
            line["request_id"] = request_id
        for key, value in record.__dict__.items():
            if key not in _RESERVED and not key.startswith("_"):
                line[key] = value
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        return orjson.dumps(line, default=str).decode()


def configure_logging(level: str = "INFO") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    # Replace plain console handlers (ours from an earlier app, or a server's default); keep any others,
    # such as a test's log capture.
    root.handlers[:] = [h for h in root.handlers if type(h) is not logging.StreamHandler] + [handler]
    root.setLevel(level.upper())
    logging.setLogRecordFactory(_record_with_request_id)
    # The servers' own access loggers would duplicate ours (and cost throughput); ours is opt-in.
    for name in ("uvicorn.access", "granian.access", "gunicorn.access"):
        logging.getLogger(name).disabled = True
