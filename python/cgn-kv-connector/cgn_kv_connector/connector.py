"""CognitoraConnector: vLLM's KV connector v1 over the node's cgn-kvcached (preview).

vLLM loads it with

    --kv-transfer-config '{"kv_connector":"CognitoraConnector",
                           "kv_connector_module_path":"cgn_kv_connector.connector",
                           "kv_role":"kv_both",
                           "kv_connector_extra_config":{"kvcached_target":"127.0.0.1:9400",
                                                        "kvcached_socket":"/run/cognitora/kvcached.sock"}}'

Scheduler side: for a new request, how many tokens beyond the engine's own prefix-cache hit can
be loaded from kvcached (whole blocks, the unbroken resident run of the prompt's digests from
kv_transfer_params); which blocks to load into and which newly completed blocks to save, handed
to the workers as CognitoraConnectorMetadata each step. Worker side: GetBlock each block to load
and scatter its bytes into every layer's K and V pages (in start_load_kv, before the forward);
copy each newly completed block's pages out as each layer is computed (save_kv_layer) and
PutBlock it (wait_for_save). A failed load marks the request's blocks from the failed one on as
not loaded (get_block_ids_with_load_errors: vLLM recomputes them); nothing raises into the engine.

Digests are never computed here from tokens: they come from the agent (cgn_prefix_digests), so
they are the router's and the agent's. docs/kv-connector.md has the whole contract.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import Any

from cgn_kv_connector.kv_layout import BlockLayout, LayoutError
from cgn_kv_connector.params import WarnLimiter, read_transfer_params, resident_run
from cgn_kv_connector.vllm_base import HAVE_VLLM, KVConnectorBase_V1, KVConnectorMetadata, KVConnectorRole

logger = logging.getLogger("cgn_kv_connector")

# kv_connector_extra_config keys: name -> (type, default). kvcached_target has no default.
EXTRA_CONFIG_KEYS: dict[str, tuple[type, Any]] = {
    "kvcached_target": (str, None),
    "kvcached_socket": (str, ""),  # the local fast path; not used by this preview (gRPC only)
    "kvcached_tenant": (str, ""),
    "kvcached_model": (str, ""),  # "": the model vLLM serves (model_config.model)
    "kvcached_lease_ms": (int, 10000),
    "kvcached_hint_ttl_ms": (int, 5000),
    "kvcached_timeout_s": (float, 10.0),
    "kvcached_backoff_ms": (int, 1000),
    "kvcached_tls_ca": (str, ""),
    "kvcached_tls_cert": (str, ""),
    "kvcached_tls_key": (str, ""),
}


@dataclasses.dataclass(frozen=True)
class ConnectorConfig:
    target: str
    socket: str
    tenant: str
    model: str
    lease_ms: int
    hint_ttl_ms: int
    timeout_s: float
    backoff_ms: int
    tls_ca: str
    tls_cert: str
    tls_key: str


def parse_extra_config(extra: Any) -> ConnectorConfig:
    """kv_connector_extra_config, checked: unknown keys and wrong types are errors."""
    if not isinstance(extra, dict):
        raise ValueError(f"CognitoraConnector: kv_connector_extra_config is a {type(extra).__name__}, "
                         "not an object")
    unknown = sorted(set(extra) - set(EXTRA_CONFIG_KEYS))
    if unknown:
        raise ValueError(f"CognitoraConnector: unknown kv_connector_extra_config key(s) {unknown}; "
                         f"known: {sorted(EXTRA_CONFIG_KEYS)}")
    values = {}
    for key, (kind, default) in EXTRA_CONFIG_KEYS.items():
        value = extra.get(key, default)
        if value is None:
            raise ValueError(f"CognitoraConnector: kv_connector_extra_config.{key} is required "
                             "(HOST:PORT of the node's cgn-kvcached)")
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, kind) or isinstance(value, bool):
            raise ValueError(f"CognitoraConnector: kv_connector_extra_config.{key} = {value!r} is not "
                             f"a {kind.__name__}")
        if kind in (int, float) and value < 0:
            raise ValueError(f"CognitoraConnector: kv_connector_extra_config.{key} = {value!r} is negative")
        values[key.removeprefix("kvcached_")] = value
    if not values["target"]:
        raise ValueError("CognitoraConnector: kv_connector_extra_config.kvcached_target is empty")
    return ConnectorConfig(**values)


@dataclasses.dataclass
class LoadJob:
    req_id: str
    blocks: list[tuple[int, bytes]]  # (engine block id, digest), in prompt order


@dataclasses.dataclass
class SaveJob:
    req_id: str
    block_id: int
    digest: bytes


@dataclasses.dataclass
class CognitoraConnectorMetadata(KVConnectorMetadata):
    loads: list[LoadJob] = dataclasses.field(default_factory=list)
    saves: list[SaveJob] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class _Request:
    """Scheduler-side state of one request."""

    digests: list[bytes]
    resident: frozenset[bytes] | None
    resident_until_ms: int | None
    first_seen: float
    block_ids: list[int] = dataclasses.field(default_factory=list)
    saved_upto: int = 0  # blocks [0, saved_upto) are in kvcached or planned
    pending_load: tuple[int, int] | None = None  # [start, end) block indexes offered to vLLM
    load: LoadJob | None = None


def _namespace_fields(vllm_config, cfg: ConnectorConfig) -> dict:
    model_config = getattr(vllm_config, "model_config", None)
    cache_config = vllm_config.cache_config
    parallel = getattr(vllm_config, "parallel_config", None)
    model = cfg.model or str(getattr(model_config, "model", "") or "")
    dtype = str(getattr(cache_config, "cache_dtype", "auto") or "auto")
    if dtype == "auto":
        dtype = str(getattr(model_config, "dtype", "") or "")
    dtype = dtype.removeprefix("torch.")
    tp_size = int(getattr(parallel, "tensor_parallel_size", 1) or 1)
    if not model or not dtype:
        raise ValueError("CognitoraConnector: the block namespace needs the model and the KV dtype "
                         f"(got model {model!r}, dtype {dtype!r})")
    return {"model": model, "dtype": dtype, "tp_size": tp_size, "block_tokens": int(cache_config.block_size),
            "tenant": cfg.tenant}


def _tp_rank(vllm_config, tp_size: int) -> int:
    if HAVE_VLLM:  # pragma: no cover - needs vllm
        from vllm.distributed.parallel_state import get_tensor_model_parallel_rank

        return int(get_tensor_model_parallel_rank())
    parallel = getattr(vllm_config, "parallel_config", None)
    return int(getattr(parallel, "rank", 0) or 0) % tp_size


class CognitoraConnector(KVConnectorBase_V1):
    """vLLM KV connector v1 (preview) spilling to and loading from cgn-kvcached over gRPC."""

    def __init__(self, vllm_config, role, kv_cache_config=None):
        super().__init__(vllm_config, role, kv_cache_config)
        from cgn_kv_connector.client import KvCachedClient, Namespace, Tls

        extra = getattr(vllm_config.kv_transfer_config, "kv_connector_extra_config", None) or {}
        self.config = parse_extra_config(extra)
        fields = _namespace_fields(vllm_config, self.config)
        self.block_tokens = fields["block_tokens"]
        self.warn = WarnLimiter(logger)
        self.counters = {"lookups": 0, "lookup_errors": 0, "lookups_skipped": 0, "loaded_blocks": 0,
                         "load_errors": 0, "saved_blocks": 0, "already_resident": 0, "save_errors": 0,
                         "saves_skipped": 0}
        self._client = KvCachedClient(self.config.target,
                                      tls=Tls(self.config.tls_ca, self.config.tls_cert, self.config.tls_key),
                                      timeout_s=self.config.timeout_s,
                                      lookup_timeout_s=min(self.config.timeout_s, 2.0))
        # Scheduler side: the namespace of every TP rank (a block counts as resident only when
        # every rank's shard is). Worker side: this rank's.
        self._rank_namespaces = [Namespace(tp_rank=r, **fields) for r in range(fields["tp_size"])]
        self.namespace = self._rank_namespaces[_tp_rank(vllm_config, fields["tp_size"])]
        self._requests: dict[str, _Request] = {}
        self._layout: BlockLayout | None = None
        self._staged: dict[tuple[str, int], tuple[SaveJob, bytearray, set[int]]] = {}
        self._invalid_block_ids: set[int] = set()
        self._clock = time.monotonic
        # After a call the daemon could not answer (down, unreachable, too slow), lookups and saves
        # are skipped for kvcached_backoff_ms: a dead daemon costs the engine one timeout per
        # backoff, not one per request or per block.
        self._down_until = 0.0
        logger.info("CognitoraConnector (%s) over cgn-kvcached at %s, namespace %s", role, self.config.target,
                    self.namespace)

    # ------------------------------------------------------------------
    # Scheduler side
    # ------------------------------------------------------------------

    def _request_state(self, request) -> _Request | None:
        req_id = str(request.request_id)
        st = self._requests.get(req_id)
        if st is None:
            p = read_transfer_params(getattr(request, "kv_transfer_params", None), self.warn, req_id)
            if not p.prefix:
                return None
            st = _Request(p.prefix, p.resident, p.resident_until_ms, self._clock())
            self._requests[req_id] = st
        return st

    def _hint_fresh(self, st: _Request) -> bool:
        if st.resident is None:
            return False
        if st.resident_until_ms is not None and st.resident_until_ms <= time.time() * 1000:
            return False
        return (self._clock() - st.first_seen) * 1000 < self.config.hint_ttl_ms

    def _daemon_down(self) -> bool:
        return self._clock() < self._down_until

    def _note_failure(self, e) -> None:
        if e.code in ("unavailable", "deadline_exceeded", "cancelled"):
            self._down_until = self._clock() + self.config.backoff_ms / 1000.0

    def _lookup_run(self, req_id: str, digests: list[bytes]) -> int:
        """The resident run every TP rank holds, leased; 0 when the daemon cannot answer."""
        from cgn_kv_connector.client import KvCachedError

        if self._daemon_down():
            self.counters["lookups_skipped"] += 1
            return 0
        self.counters["lookups"] += 1
        run = len(digests)
        try:
            for ns in self._rank_namespaces:
                result = self._client.batch_lookup(ns, [digests], lease_ms=self.config.lease_ms)
                run = min(run, len(result.tiers[0]))
                if run == 0:
                    break
        except KvCachedError as e:
            self.counters["lookup_errors"] += 1
            self._note_failure(e)
            self.warn.warn("lookup", f"request {req_id!r}: cgn-kvcached lookup failed ({e}); loading nothing")
            return 0
        return run

    def get_num_new_matched_tokens(self, request, num_computed_tokens: int):
        st = self._request_state(request)
        if st is None:
            return 0, False
        st.pending_load = None
        bs = self.block_tokens
        prompt_tokens = len(getattr(request, "prompt_token_ids", None) or ())
        # Whole blocks only, and never the prompt's last token: vLLM computes at least one.
        limit = min(len(st.digests), max(0, prompt_tokens - 1) // bs)
        if num_computed_tokens % bs != 0:
            return 0, False
        local = num_computed_tokens // bs
        if local >= limit:
            return 0, False
        if self._hint_fresh(st):
            run = resident_run(st.digests, st.resident, limit)
        else:
            run = self._lookup_run(str(request.request_id), st.digests[:limit])
        run = min(run, limit)
        if run <= local:
            return 0, False
        st.pending_load = (local, run)
        return (run - local) * bs, False

    def update_state_after_alloc(self, request, blocks, num_external_tokens: int):
        st = self._requests.get(str(request.request_id))
        if st is None:
            return
        st.block_ids = list(blocks.get_block_ids()[0])
        pending, st.pending_load = st.pending_load, None
        if num_external_tokens <= 0 or pending is None:
            return
        start = pending[0]
        end = start + num_external_tokens // self.block_tokens
        if end > pending[1] or end > len(st.block_ids):
            self.warn.warn("alloc", f"request {request.request_id!r}: {num_external_tokens} external tokens "
                                    f"do not fit the offered blocks {pending}; loading nothing")
            return
        st.load = LoadJob(str(request.request_id), [(st.block_ids[i], st.digests[i]) for i in range(start, end)])
        st.saved_upto = max(st.saved_upto, end)

    def _plan_saves(self, req_id: str, st: _Request, computed_after_step: int, meta) -> None:
        full = min(computed_after_step // self.block_tokens, len(st.digests), len(st.block_ids))
        for i in range(st.saved_upto, full):
            meta.saves.append(SaveJob(req_id, st.block_ids[i], st.digests[i]))
        st.saved_upto = max(st.saved_upto, full)

    def build_connector_meta(self, scheduler_output):
        meta = CognitoraConnectorMetadata()
        for st in self._requests.values():
            if st.load is not None:
                meta.loads.append(st.load)
                st.load = None
        scheduled = getattr(scheduler_output, "num_scheduled_tokens", {}) or {}
        for new in getattr(scheduler_output, "scheduled_new_reqs", ()) or ():
            st = self._requests.get(str(new.req_id))
            if st is None:
                continue
            st.block_ids = list(new.block_ids[0])
            self._plan_saves(str(new.req_id), st, new.num_computed_tokens + scheduled.get(new.req_id, 0), meta)
        cached = getattr(scheduler_output, "scheduled_cached_reqs", None)
        if cached is not None:
            resumed_ids = set(getattr(cached, "resumed_req_ids", ()) or ())
            resumed_flags = list(getattr(cached, "resumed_from_preemption", ()) or ())
            for i, req_id in enumerate(cached.req_ids):
                st = self._requests.get(str(req_id))
                if st is None:
                    continue
                new_ids = cached.new_block_ids[i]
                resumed = req_id in resumed_ids or (i < len(resumed_flags) and resumed_flags[i])
                if resumed:
                    st.block_ids = list(new_ids[0]) if new_ids is not None else []
                elif new_ids is not None:
                    st.block_ids.extend(new_ids[0])
                self._plan_saves(str(req_id), st, cached.num_computed_tokens[i] + scheduled.get(req_id, 0), meta)
        return meta

    def request_finished(self, request, block_ids):
        self._requests.pop(str(request.request_id), None)
        return False, None

    # ------------------------------------------------------------------
    # Worker side
    # ------------------------------------------------------------------

    def register_kv_caches(self, kv_caches):
        num_blocks = int(getattr(self._kv_cache_config, "num_blocks", 0) or 0)
        self._layout = BlockLayout(dict(kv_caches), num_blocks)
        logger.info("CognitoraConnector: %d layers, %d-byte pages, %d-byte blocks", len(self._layout.layers),
                    self._layout.page_bytes, self._layout.block_bytes)

    def _metadata(self) -> CognitoraConnectorMetadata | None:
        meta = self._connector_metadata
        return meta if isinstance(meta, CognitoraConnectorMetadata) else None

    def start_load_kv(self, forward_context, **kwargs: Any) -> None:
        from cgn_kv_connector.client import KvCachedError

        meta = self._metadata()
        if meta is None or not meta.loads:
            return
        for job in meta.loads:
            for i, (block_id, digest) in enumerate(job.blocks):
                try:
                    if self._layout is None:
                        raise LayoutError("no KV caches were registered")
                    if self._daemon_down():
                        raise KvCachedError("unavailable", "skipped: the daemon failed a call less than "
                                                           f"{self.config.backoff_ms} ms ago")
                    block = self._client.get(self.namespace, digest)
                    self._layout.scatter(block.data, block_id)
                except (KvCachedError, LayoutError) as e:
                    if isinstance(e, KvCachedError) and not self._daemon_down():
                        self._note_failure(e)
                    failed = [b for b, _ in job.blocks[i:]]
                    self._invalid_block_ids.update(failed)
                    self.counters["load_errors"] += 1
                    self.warn.warn("load", f"request {job.req_id!r}: loading block {i} of {len(job.blocks)} "
                                           f"failed ({e}); {len(failed)} block(s) left to recompute")
                    break
                self.counters["loaded_blocks"] += 1

    def wait_for_layer_load(self, layer_name: str) -> None:
        # start_load_kv loads every layer before the forward starts.
        return

    def save_kv_layer(self, layer_name: str, kv_layer, attn_metadata, **kwargs: Any) -> None:
        meta = self._metadata()
        if meta is None or not meta.saves or self._layout is None:
            return
        index = self._layout.index.get(layer_name)
        if index is None:
            self.warn.warn("layer", f"save_kv_layer: layer {layer_name!r} was never registered; not saved")
            return
        try:
            layer = self._layout.accessor(kv_layer, index)
        except LayoutError as e:
            self.warn.warn("layer", f"save_kv_layer: layer {layer_name!r} not saved ({e})")
            return
        for job in meta.saves:
            key = (job.req_id, job.block_id)
            staged = self._staged.get(key)
            if staged is None:
                staged = (job, bytearray(self._layout.block_bytes), set())
                self._staged[key] = staged
            try:
                self._layout.copy_layer_out(layer, job.block_id, staged[1], index)
            except LayoutError as e:
                self.warn.warn("save", f"request {job.req_id!r}: block {job.block_id} not saved ({e})")
                continue
            staged[2].add(index)

    def wait_for_save(self):
        from cgn_kv_connector.client import KvCachedError

        if self._layout is None:
            self._staged.clear()
            return
        layers = len(self._layout.layers)
        staged, self._staged = self._staged, {}
        for job, block, done in staged.values():
            if len(done) != layers:
                self.warn.warn("save", f"request {job.req_id!r}: block {job.block_id} saw {len(done)} of "
                                       f"{layers} layers; not saved")
                continue
            if self._daemon_down():
                self.counters["saves_skipped"] += 1
                continue
            try:
                if self._client.put(self.namespace, job.digest, block):
                    self.counters["already_resident"] += 1
                else:
                    self.counters["saved_blocks"] += 1
            except KvCachedError as e:
                self.counters["save_errors"] += 1
                self._note_failure(e)
                self.warn.warn("save", f"request {job.req_id!r}: saving block {job.block_id} failed ({e})")

    def get_finished(self, finished_req_ids):
        return None, None

    def get_block_ids_with_load_errors(self) -> set[int]:
        failed, self._invalid_block_ids = self._invalid_block_ids, set()
        return failed

    def shutdown(self):
        self._client.close()


__all__ = ["CognitoraConnector", "CognitoraConnectorMetadata", "KVConnectorRole", "parse_extra_config"]
