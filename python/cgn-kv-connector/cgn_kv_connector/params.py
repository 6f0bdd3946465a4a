"""The request's kv_transfer_params the agent adds, read defensively.

    cgn_prefix_digests     list of hex strings: the chained prefix digest of each of the prompt's
                           blocks, in order (entry i names the engine's block i)
    cgn_resident_digests   list of hex strings: those of the prompt's digests the agent found
                           resident in the node's cgn-kvcached (its own BatchLookup)
    cgn_resident_until_ms  optional integer: unix ms until which that answer holds (the agent's
                           lease); past it the connector looks the prompt up itself

Anything else in the dict is not ours and is left alone. A field of the wrong type, a digest
that is not 64 hex digits, or a list longer than MAX_DIGESTS is ignored with a warning (the
request then runs as if the field were absent); the warnings are rate-limited (WarnLimiter), and
a list is measured before a single entry is parsed, so a huge list costs nothing.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

DIGEST_HEX = 64
# At most this many digests per field: the daemon's limit for one lookup (src/kvcached/wire.cpp),
# 16384 blocks of 16 tokens or more is a prompt of 256 K tokens or more.
MAX_DIGESTS = 16384

_HEX = frozenset("0123456789abcdefABCDEF")


class WarnLimiter:
    """Logs the first `first` warnings of each kind, then one in every `every` with a count."""

    def __init__(self, logger: logging.Logger, first: int = 5, every: int = 1000):
        self._logger = logger
        self._first = first
        self._every = every
        self.counts: dict[str, int] = {}
        self.logged = 0

    def warn(self, kind: str, message: str) -> None:
        n = self.counts.get(kind, 0) + 1
        self.counts[kind] = n
        if n <= self._first:
            self._logger.warning("%s", message)
        elif n % self._every == 0:
            self._logger.warning("%s (%d such so far; the rest are not logged)", message, n)
        else:
            return
        self.logged += 1


@dataclasses.dataclass
class TransferParams:
    prefix: list[bytes]                 # empty: none given (or ignored)
    resident: frozenset[bytes] | None   # None: none given (or ignored)
    resident_until_ms: int | None       # None: not given


def _digests(params: dict, field: str, warn: WarnLimiter, req_id: str) -> list[bytes] | None:
    value = params.get(field)
    if value is None:
        return None
    if not isinstance(value, (list, tuple)):
        warn.warn(f"{field}:type", f"request {req_id!r}: kv_transfer_params.{field} is a "
                                   f"{type(value).__name__}, not a list of hex digests; ignored")
        return None
    if len(value) > MAX_DIGESTS:
        warn.warn(f"{field}:size", f"request {req_id!r}: kv_transfer_params.{field} has {len(value)} "
                                   f"digests, over the limit of {MAX_DIGESTS}; ignored")
        return None
    out = []
    for i, item in enumerate(value):
        if not isinstance(item, str) or len(item) != DIGEST_HEX or not _HEX.issuperset(item):
            shown = repr(item)[:40]
            warn.warn(f"{field}:entry", f"request {req_id!r}: kv_transfer_params.{field}[{i}] = {shown} is "
                                        f"not {DIGEST_HEX} hex digits; the field is ignored")
            return None
        out.append(bytes.fromhex(item))
    return out


def read_transfer_params(params: Any, warn: WarnLimiter, req_id: str) -> TransferParams:
    empty = TransferParams([], None, None)
    if params is None:
        return empty
    if not isinstance(params, dict):
        warn.warn("params:type", f"request {req_id!r}: kv_transfer_params is a {type(params).__name__}, "
                                 "not an object; ignored")
        return empty
    prefix = _digests(params, "cgn_prefix_digests", warn, req_id) or []
    resident = _digests(params, "cgn_resident_digests", warn, req_id)
    until = params.get("cgn_resident_until_ms")
    if until is not None and (isinstance(until, bool) or not isinstance(until, int) or until < 0):
        warn.warn("cgn_resident_until_ms:type",
                  f"request {req_id!r}: kv_transfer_params.cgn_resident_until_ms = {repr(until)[:40]} is not "
                  "a non-negative integer; ignored")
        until = None
    return TransferParams(prefix, None if resident is None else frozenset(resident), until)


def resident_run(prefix: list[bytes], resident: frozenset[bytes], limit: int) -> int:
    """The number of leading prefix digests (at most `limit`) that are in `resident`."""
    n = 0
    for digest in prefix[:limit]:
        if digest not in resident:
            break
        n += 1
    return n
