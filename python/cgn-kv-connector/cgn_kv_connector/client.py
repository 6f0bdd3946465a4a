"""A small gRPC client of cgn-kvcached's KvCache service (proto/cognitora/v1/kvcached.proto).

Blocks are named by a namespace (model, KV dtype, tensor-parallel rank and size, tokens per
block, tenant) and a 32-byte chained prefix digest; the daemon derives the storage key from
both. Bulk bytes travel in chunks of at most 1 MiB, so a block of many MiB never has to fit one
gRPC message (the daemon accepts messages of at most 1 MiB + 64 KiB).

Every failure is a KvCachedError whose `code` is the gRPC status name in lower case
("not_found", "unavailable", "invalid_argument", ...) or "protocol" when the daemon's answer
breaks the protocol (a wrong length, a missing first chunk).

Every call carries a gRPC deadline and, behind it, a watchdog that cancels the call a moment
after the deadline: grpcio (1.51, Debian bookworm) can leave a call to a daemon that died
mid-connection waiting forever despite its deadline, and an engine must never hang on its cache.
"""

from __future__ import annotations

import dataclasses
import threading
from typing import Iterable, Iterator, Sequence

import grpc
import grpc.experimental

from cgn_kv_connector._proto import kvcached_pb2 as pb
from cgn_kv_connector._proto import kvcached_pb2_grpc as pb_grpc

CHUNK_BYTES = 1 << 20
DIGEST_BYTES = 32
# The daemon's limits on one BatchLookup (src/kvcached/wire.cpp).
MAX_LOOKUP_REQUESTS = 1024
MAX_LOOKUP_DIGESTS = 16384
# How long past a call's own deadline the watchdog waits before cancelling it.
WATCHDOG_GRACE_S = 0.5


class KvCachedError(Exception):
    """A failed call: `code` names the gRPC status (lower case) or "protocol"."""

    def __init__(self, code: str, message: str):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


@dataclasses.dataclass(frozen=True)
class Namespace:
    """The explicit fields a block key is derived from (docs/kvcached.md "Block keys")."""

    model: str
    dtype: str
    tp_rank: int
    tp_size: int
    block_tokens: int
    tenant: str = ""

    def to_proto(self) -> pb.BlockNamespace:
        return pb.BlockNamespace(model=self.model, dtype=self.dtype, tp_rank=self.tp_rank,
                                 tp_size=self.tp_size, block_tokens=self.block_tokens,
                                 tenant=self.tenant)


@dataclasses.dataclass(frozen=True)
class Block:
    data: bytes
    tier: str  # "ram" | "ssd"


@dataclasses.dataclass(frozen=True)
class LookupResult:
    # Per request, the tier ("ram" | "ssd") of each block of the unbroken resident run from the
    # request's first digest; the run's length is the list's length.
    tiers: list[list[str]]
    lease_until_unix_ms: int  # 0: nothing leased


@dataclasses.dataclass(frozen=True)
class Tls:
    """PEM file paths; `ca` verifies the daemon, `cert` and `key` are this client's (mTLS)."""

    ca: str = ""
    cert: str = ""
    key: str = ""


def _read(path: str) -> bytes | None:
    if not path:
        return None
    with open(path, "rb") as f:
        return f.read()


def _check_digest(digest: bytes) -> bytes:
    if not isinstance(digest, (bytes, bytearray)) or len(digest) != DIGEST_BYTES:
        raise KvCachedError("invalid_argument", f"a digest is {DIGEST_BYTES} bytes")
    return bytes(digest)


def _error(e: grpc.RpcError) -> KvCachedError:
    code = e.code() if hasattr(e, "code") else None
    name = code.name.lower() if code is not None else "unknown"
    details = e.details() if hasattr(e, "details") else str(e)
    return KvCachedError(name, details or name)


class KvCachedClient:
    """One channel to one daemon. Thread-safe (gRPC channels are)."""

    def __init__(self, target: str, *, tls: Tls | None = None, timeout_s: float = 10.0,
                 lookup_timeout_s: float = 2.0, max_block_bytes: int = 256 << 20):
        if not target:
            raise ValueError("the kvcached target is empty (HOST:PORT)")
        self.target = target
        self._timeout_s = timeout_s
        self._lookup_timeout_s = lookup_timeout_s
        self._max_block_bytes = max_block_bytes
        options = [("grpc.max_receive_message_length", CHUNK_BYTES + (64 << 10)),
                   ("grpc.max_send_message_length", CHUNK_BYTES + (64 << 10)),
                   # GetBlock streams driven on the caller's thread: with grpcio's default
                   # (a channel thread feeding the iterator) a GetBlock to a daemon that had
                   # just died could wait forever, its deadline and a cancel both ignored.
                   (grpc.experimental.ChannelOptions.SingleThreadedUnaryStream, 1)]
        if tls is not None and (tls.ca or tls.cert or tls.key):
            if bool(tls.cert) != bool(tls.key):
                raise ValueError("TLS: a client certificate and its key go together")
            creds = grpc.ssl_channel_credentials(root_certificates=_read(tls.ca),
                                                 private_key=_read(tls.key),
                                                 certificate_chain=_read(tls.cert))
            self._channel = grpc.secure_channel(target, creds, options=options)
        else:
            self._channel = grpc.insecure_channel(target, options=options)
        self._stub = pb_grpc.KvCacheStub(self._channel)
        self._lock = threading.Lock()
        self._closed = False

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                self._channel.close()

    def __enter__(self) -> "KvCachedClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def put(self, ns: Namespace, digest: bytes, data) -> bool:
        """Stores one block; True when it was already resident (nothing written)."""
        digest = _check_digest(digest)
        view = memoryview(data).cast("B")
        return self._call(lambda: self._result(
            self._stub.PutBlock.future(_put_messages(ns, digest, view), timeout=self._timeout_s),
            self._timeout_s)).already_resident

    def get(self, ns: Namespace, digest: bytes) -> Block:
        """Reads one block; KvCachedError("not_found") when absent, evicted or corrupt."""
        req = pb.GetBlockRequest(namespace=ns.to_proto(), digest=_check_digest(digest))

        def run() -> Block:
            buf = None
            tier = ""
            length = 0
            pos = 0
            call = self._stub.GetBlock(req, timeout=self._timeout_s)
            with _Watchdog(call, self._timeout_s):
                for chunk in call:
                    if buf is None:
                        length, tier = chunk.length, chunk.tier
                        if length > self._max_block_bytes:
                            raise KvCachedError("protocol", f"a {length}-byte block is over the client's "
                                                            f"limit of {self._max_block_bytes}")
                        buf = bytearray(length)
                    n = len(chunk.data)
                    if pos + n > length:
                        raise KvCachedError("protocol", f"the daemon sent more than the {length} bytes announced")
                    buf[pos:pos + n] = chunk.data
                    pos += n
            if buf is None:
                raise KvCachedError("protocol", "GetBlock ended without a chunk")
            if pos != length:
                raise KvCachedError("protocol", f"GetBlock ended after {pos} of {length} bytes")
            return Block(bytes(buf), tier)

        return self._call(run)

    def batch_lookup(self, ns: Namespace, requests: Sequence[Sequence[bytes]], lease_ms: int = 0) -> LookupResult:
        """Per request (a prompt's digests in order) the resident run's tiers, and the lease."""
        if len(requests) > MAX_LOOKUP_REQUESTS:
            raise KvCachedError("invalid_argument", f"{len(requests)} requests; at most {MAX_LOOKUP_REQUESTS}")
        if sum(len(r) for r in requests) > MAX_LOOKUP_DIGESTS:
            raise KvCachedError("invalid_argument", f"more than {MAX_LOOKUP_DIGESTS} digests in one lookup")
        msg = pb.BatchLookupRequest(namespace=ns.to_proto(), lease_ms=max(0, int(lease_ms)))
        for digests in requests:
            msg.requests.add(digests=[_check_digest(d) for d in digests])
        resp = self._call(lambda: self._result(
            self._stub.BatchLookup.future(msg, timeout=self._lookup_timeout_s), self._lookup_timeout_s))
        if len(resp.results) != len(requests):
            raise KvCachedError("protocol", f"{len(resp.results)} results for {len(requests)} requests")
        return LookupResult([list(r.tiers) for r in resp.results], resp.lease_until_unix_ms)

    def stats(self) -> pb.StatsResponse:
        return self._call(lambda: self._result(
            self._stub.Stats.future(pb.StatsRequest(), timeout=self._lookup_timeout_s), self._lookup_timeout_s))

    @staticmethod
    def _result(future, timeout_s: float):
        """The answer of a unary-response call, waited for at most the deadline plus the
        watchdog's grace; past that the call is cancelled and reported as deadline_exceeded."""
        try:
            return future.result(timeout=timeout_s + WATCHDOG_GRACE_S)
        except grpc.FutureTimeoutError:
            future.cancel()
            raise KvCachedError("deadline_exceeded",
                                f"no answer within {timeout_s + WATCHDOG_GRACE_S:.1f} s") from None

    def _call(self, fn):
        try:
            return fn()
        except grpc.RpcError as e:
            raise _error(e) from None


class _Watchdog:
    """Cancels a streaming call still running WATCHDOG_GRACE_S past its deadline; the iteration
    that was waiting then ends in KvCachedError("deadline_exceeded")."""

    def __init__(self, call, timeout_s: float):
        self._call = call
        self._timeout_s = timeout_s
        self._fired = threading.Event()
        self._timer = threading.Timer(timeout_s + WATCHDOG_GRACE_S, self._fire)
        self._timer.daemon = True

    def _fire(self) -> None:
        self._fired.set()
        self._call.cancel()

    def __enter__(self) -> "_Watchdog":
        self._timer.start()
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        self._timer.cancel()
        if exc_type is not None:
            self._call.cancel()  # a stream abandoned mid-way (a refused length) stops at the daemon too
        if self._fired.is_set() and exc_type is not None and issubclass(exc_type, grpc.RpcError):
            raise KvCachedError("deadline_exceeded",
                                f"no answer within {self._timeout_s + WATCHDOG_GRACE_S:.1f} s") from None
        return False


def _put_messages(ns: Namespace, digest: bytes, view: memoryview) -> Iterator[pb.PutBlockRequest]:
    first = pb.PutBlockRequest(namespace=ns.to_proto(), digest=digest, length=len(view),
                               data=bytes(view[:CHUNK_BYTES]))
    yield first
    for pos in range(CHUNK_BYTES, len(view), CHUNK_BYTES):
        yield pb.PutBlockRequest(data=bytes(view[pos:pos + CHUNK_BYTES]))


def chunk_count(length: int) -> int:
    """How many PutBlock messages a block of `length` bytes takes (at least one: the header)."""
    return max(1, -(-length // CHUNK_BYTES))


def hex_digests(digests: Iterable[bytes]) -> list[str]:
    return [d.hex() for d in digests]
