"""The processes' log lines: `time LEVEL logger: message` (the default), or one JSON object a line under `--log-json`
(time, level, logger, message, and the fields a line carries: an access line's request_id, route, status, tokens,
TTFT and latency; app.web.requestlog), for a log collector to index without parsing prose.

This module knows the standard library's logging, nothing else.
"""
import json
import logging
import time

TEXT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class JsonLines(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line = {"time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
                "level": record.levelname, "logger": record.name, "message": record.getMessage(),
                **getattr(record, "fields", {})}
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str)


def configure(json_lines: bool = False) -> None:
    """Log INFO and above to stderr, as text or as JSON lines."""
    handler = logging.StreamHandler()
    handler.setFormatter(JsonLines() if json_lines else logging.Formatter(TEXT))
    logging.basicConfig(level=logging.INFO, handlers=[handler], force=True)
