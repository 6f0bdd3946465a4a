"""A stand-in for vLLM around a KV connector: its objects, and an engine that calls the connector's
methods in the order vLLM's scheduler and worker do, with plain buffers standing in for tensors.

The order, from vllm-project/vllm (docs/kv-connector.md cites the files):
  scheduler (Scheduler.schedule, one step)
    for each waiting request: get_num_new_matched_tokens(request, num_local_computed_tokens)
                              -> allocate slots -> update_state_after_alloc(request,
                                 kv_cache_manager.get_blocks(request_id), num_external_tokens)
    build_connector_meta(scheduler_output) -> scheduler_output.kv_connector_metadata
  worker (KVConnectorModelRunnerMixin._get_kv_connector_output around the forward)
    bind_connector_metadata -> start_load_kv(forward_context)
    forward: per attention layer wait_for_layer_load(layer) ... save_kv_layer(layer, kv, attn_md)
    wait_for_save -> get_finished(finished_req_ids) -> get_block_ids_with_load_errors
    -> clear_connector_metadata
  scheduler, once a request ends: request_finished(request, block_ids)
Blocks reported by get_block_ids_with_load_errors are recomputed (vLLM's load-failure recovery).
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import json
from types import SimpleNamespace

from cgn_kv_connector.vllm_base import KVConnectorRole

# The exact --kv-transfer-config the agent's vLLM driver emits with kv_offload = "cgn"
# (src/agent/vllm_driver.cpp, docs/agent.md), with the target filled in by the test.
AGENT_KV_TRANSFER_CONFIG = ('{"kv_connector":"CognitoraConnector","kv_role":"kv_both",'
                            '"kv_connector_module_path":"cgn_kv_connector.connector",'
                            '"kv_connector_extra_config":{"kvcached_target":"127.0.0.1:9400",'
                            '"kvcached_socket":"/run/cognitora/kvcached.sock"}}')


def vllm_config(target: str, *, block_size=16, model="meta-llama/Llama-3.1-8B-Instruct", tp_size=1, rank=0,
                extra=None):
    kv = json.loads(AGENT_KV_TRANSFER_CONFIG)
    kv["kv_connector_extra_config"]["kvcached_target"] = target
    kv["kv_connector_extra_config"].update(extra or {})
    return SimpleNamespace(
        kv_transfer_config=SimpleNamespace(is_kv_producer=True, **kv),
        model_config=SimpleNamespace(model=model, dtype="torch.bfloat16"),
        cache_config=SimpleNamespace(block_size=block_size, cache_dtype="auto"),
        parallel_config=SimpleNamespace(tensor_parallel_size=tp_size, rank=rank),
    )


def load_connector(config, role, num_blocks):
    """What vLLM's KVConnectorFactory does for an out-of-tree connector: import the module path,
    take the class by name, construct it with (vllm_config, role, kv_cache_config)."""
    kv = config.kv_transfer_config
    cls = getattr(importlib.import_module(kv.kv_connector_module_path), kv.kv_connector)
    return cls(config, role, SimpleNamespace(num_blocks=num_blocks))


def digests_for(tokens, block_size, salt=b""):
    """Chained digests of the prompt's full blocks, as the agent would send them (any 32-byte
    chain serves here: the connector never computes them)."""
    out, prev = [], salt
    for i in range(len(tokens) // block_size):
        h = hashlib.sha256(prev + bytes(str(tokens[i * block_size:(i + 1) * block_size]), "ascii")).digest()
        out.append(h)
        prev = h
    return out


@dataclasses.dataclass
class Request:
    request_id: str
    prompt_token_ids: list[int]
    kv_transfer_params: object = None
    num_computed_tokens: int = 0


@dataclasses.dataclass
class KVCacheBlocks:
    blocks: list[int]

    def get_block_ids(self):
        return (list(self.blocks),)


@dataclasses.dataclass
class NewRequestData:
    req_id: str
    prompt_token_ids: list[int]
    block_ids: tuple
    num_computed_tokens: int


@dataclasses.dataclass
class CachedRequestData:
    req_ids: list[str]
    resumed_req_ids: set[str]
    new_token_ids: list[list[int]]
    new_block_ids: list
    num_computed_tokens: list[int]


@dataclasses.dataclass
class SchedulerOutput:
    scheduled_new_reqs: list[NewRequestData]
    scheduled_cached_reqs: CachedRequestData
    num_scheduled_tokens: dict[str, int]
    finished_req_ids: set[str]
    kv_connector_metadata: object = None


@dataclasses.dataclass
class StepResult:
    external_tokens: int
    computed: list[tuple[int, int]]  # token ranges the engine's "attention" computed
    invalid_block_ids: set[int]
    finished: tuple


class Engine:
    """One vLLM-shaped engine: a scheduler-side and a worker-side connector instance, a block
    pool, and per-layer KV buffers (bytearray, [K pages][V pages] per layer)."""

    def __init__(self, target, *, layers=3, num_blocks=64, page_bytes=512, block_size=16, extra=None,
                 tp_size=1, rank=0, model_seed=b"model"):
        self.config = vllm_config(target, block_size=block_size, extra=extra, tp_size=tp_size, rank=rank)
        self.block_size = block_size
        self.num_blocks = num_blocks
        self.page_bytes = page_bytes
        self.model_seed = model_seed
        self.layer_names = [f"model.layers.{i}.self_attn.attn" for i in range(layers)]
        self.kv = {name: bytearray(2 * num_blocks * page_bytes) for name in self.layer_names}
        self.scheduler = load_connector(self.config, KVConnectorRole.SCHEDULER, num_blocks)
        self.worker = load_connector(self.config, KVConnectorRole.WORKER, num_blocks)
        self.worker.register_kv_caches(self.kv)
        self._free = list(range(num_blocks))
        self.blocks: dict[str, list[int]] = {}
        self.requests: dict[str, Request] = {}

    def close(self):
        self.scheduler.shutdown()
        self.worker.shutdown()

    # The deterministic "model": a block's page for (layer, K|V) depends on every token up to the
    # block's end, as real KV does.
    def page(self, layer: int, kv: int, tokens, block_index: int) -> bytes:
        seed = hashlib.sha256(self.model_seed + bytes([layer, kv]) +
                              bytes(str(tokens[:(block_index + 1) * self.block_size]), "ascii")).digest()
        return (seed * (self.page_bytes // len(seed) + 1))[:self.page_bytes]

    def read_page(self, layer: int, kv: int, block_id: int) -> bytes:
        start = (kv * self.num_blocks + block_id) * self.page_bytes
        return bytes(self.kv[self.layer_names[layer]][start:start + self.page_bytes])

    def block_pages(self, block_id: int) -> list[bytes]:
        return [self.read_page(layer, kv, block_id) for layer in range(len(self.layer_names)) for kv in (0, 1)]

    def _compute(self, layer_name: str, req: Request, start: int, end: int):
        layer = self.layer_names.index(layer_name)
        buf = self.kv[layer_name]
        ids = self.blocks[req.request_id]
        for b in range(start // self.block_size, -(-end // self.block_size)):
            for kv in (0, 1):
                off = (kv * self.num_blocks + ids[b]) * self.page_bytes
                buf[off:off + self.page_bytes] = self.page(layer, kv, req.prompt_token_ids, b)

    def add(self, req: Request):
        self.requests[req.request_id] = req

    def step(self, req_id: str, max_tokens: int | None = None, *, resumed: bool = False,
             before_worker=None, local_blocks: int = 0) -> StepResult:
        """One engine step for one request: schedule (a chunk of at most max_tokens), run the
        worker around a forward over every layer, recover from load errors. before_worker runs
        between the scheduler's half and the worker's (the tests stop the daemon there).
        local_blocks: the first blocks are hits in the engine's own prefix cache."""
        req = self.requests[req_id]
        external = 0
        new_reqs, cached = [], CachedRequestData([], set(), [], [], [])
        if req_id not in self.blocks:
            # Scheduler.schedule, a waiting request: its local prefix-cache hit, then the connector.
            local = local_blocks * self.block_size
            external, load_async = self.scheduler.get_num_new_matched_tokens(req, local)
            assert load_async is False
            n_blocks = -(-len(req.prompt_token_ids) // self.block_size)
            self.blocks[req_id] = [self._free.pop(0) for _ in range(n_blocks)]
            for name in self.layer_names:  # what the prefix cache holds for those blocks
                self._compute(name, req, 0, local)
            self.scheduler.update_state_after_alloc(req, KVCacheBlocks(self.blocks[req_id]), external)
            req.num_computed_tokens = local + external
            todo = len(req.prompt_token_ids) - req.num_computed_tokens
            scheduled = todo if max_tokens is None else min(todo, max_tokens)
            new_reqs.append(NewRequestData(req_id, req.prompt_token_ids, (list(self.blocks[req_id]),),
                                           req.num_computed_tokens))
        else:
            todo = len(req.prompt_token_ids) - req.num_computed_tokens
            scheduled = todo if max_tokens is None else min(todo, max_tokens)
            cached = CachedRequestData([req_id], {req_id} if resumed else set(), [[]],
                                       [(list(self.blocks[req_id]),) if resumed else None],
                                       [req.num_computed_tokens])
        so = SchedulerOutput(new_reqs, cached, {req_id: scheduled}, set())
        so.kv_connector_metadata = self.scheduler.build_connector_meta(so)
        if before_worker is not None:
            before_worker()

        # The worker: KVConnectorModelRunnerMixin around the forward.
        w = self.worker
        w.bind_connector_metadata(so.kv_connector_metadata)
        w.start_load_kv(None)
        start, end = req.num_computed_tokens, req.num_computed_tokens + scheduled
        for name in self.layer_names:
            w.wait_for_layer_load(name)
            self._compute(name, req, start, end)
            w.save_kv_layer(name, self.kv[name], None)
        w.wait_for_save()
        finished = w.get_finished(so.finished_req_ids)
        invalid = w.get_block_ids_with_load_errors()
        w.clear_connector_metadata()
        computed = [(start, end)]
        if invalid:
            # vLLM reschedules from the first block that failed to load; the harness recomputes it
            # and everything after it at once.
            first = min(self.blocks[req_id].index(b) for b in invalid)
            redo = first * self.block_size
            for name in self.layer_names:
                self._compute(name, req, redo, start)
            computed.insert(0, (redo, start))
        req.num_computed_tokens = end
        return StepResult(external, computed, invalid, finished)

    def run(self, req: Request, chunk: int | None = None, local_blocks: int = 0) -> list[StepResult]:
        self.add(req)
        results = [self.step(req.request_id, chunk, local_blocks=local_blocks)]
        while req.num_computed_tokens < len(req.prompt_token_ids):
            results.append(self.step(req.request_id, chunk))
        return results

    def finish(self, req_id: str):
        req = self.requests.pop(req_id)
        ids = self.blocks.pop(req_id)
        delay, params = self.scheduler.request_finished(req, ids)
        self._free.extend(ids)
        return delay, params

    def expected_pages(self, tokens, block_index: int) -> list[bytes]:
        return [self.page(layer, kv, tokens, block_index) for layer in range(len(self.layer_names)) for kv in (0, 1)]


def tokens(n: int, seed: int = 1) -> list[int]:
    return [(seed * 7919 + i * 104729) % 32000 for i in range(n)]


def params(digests, resident=None, until_ms=None):
    p = {"cgn_prefix_digests": [d.hex() for d in digests]}
    if resident is not None:
        p["cgn_resident_digests"] = [d.hex() for d in resident]
    if until_ms is not None:
        p["cgn_resident_until_ms"] = until_ms
    return p
