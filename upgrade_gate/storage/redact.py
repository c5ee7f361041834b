"""Credentials out of every text we show or keep: errors, log lines, upgrade records, XCom, reports.

A user may put `user:password@` in a `flink-rest://` URI or in the host field of an Airflow connection;
the URL then travels into exception texts (ours and the HTTP libraries'), and from there into stderr,
task logs and the durable upgrade record. Stripping the userinfo where text is made is the one rule that
covers all of them; `one_line` also keeps a value a server sent from breaking the one-line error contract.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit, urlunsplit

# scheme://userinfo@ ; userinfo runs up to the last '@' before the path, query, fragment or whitespace
_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.\-]*://)[^/?#\s]*@")
_CONTROL = re.compile(r"[\x00-\x1f\x7f\u2028\u2029\x85]")


def redact(text: str) -> str:
    """`text` with the userinfo (`user:password@`) of every URL in it removed."""
    return _USERINFO.sub(r"\g<scheme>", text) if "@" in text else text


def redact_value(value: Any) -> Any:
    """`redact` applied to every string inside a JSON-like value (dicts, lists, tuples)."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {redact_value(k): redact_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(redact_value(v) for v in value)
    return value


def public_url(url: str) -> str:
    """`url` without its userinfo (what may be shown); unparseable input is redacted as text."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        if ":" in host:
            host = f"[{host}]"
        port = parts.port
    except ValueError:
        return redact(url)
    if "@" not in parts.netloc:
        return url
    netloc = f"{host}:{port}" if port is not None else host
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def one_line(value: object, limit: int = 200) -> str:
    """A value from a server or a file, fit for a one-line message: control characters escaped, cut short."""
    text = redact(value if isinstance(value, str) else str(value))
    if len(text) > limit:
        text = text[:limit] + f"... ({len(text)} characters)"
    return _CONTROL.sub(lambda m: repr(m.group(0))[1:-1], text)
