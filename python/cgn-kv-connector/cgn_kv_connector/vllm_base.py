"""vLLM's KV connector interface v1, or a stand-in with the same method list.

With vllm importable, the real classes from vllm.distributed.kv_transfer.kv_connector.v1.base
are re-exported and CognitoraConnector subclasses them. Without it (here, in tests, on a host
with no GPU), a stand-in with the same names and signatures is used, pinned to vllm-project/vllm
vllm/distributed/kv_transfer/kv_connector/v1/base.py at commit 003df2961dd8 (docs/kv-connector.md
lists the methods). The stand-in does only what the real base does by default: it keeps the
bound metadata and answers "nothing" everywhere else.
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from typing import Any

PINNED_VLLM_COMMIT = "003df2961dd8830c317a61f9745ccd557da9fa06"

# The methods and properties of KVConnectorBase_V1 at PINNED_VLLM_COMMIT, with their parameters
# (self and cls left out). tests/test_interface.py holds the stand-in and CognitoraConnector to it.
PINNED_METHODS: dict[str, tuple[str, ...]] = {
    # properties
    "prefer_cross_layer_blocks": (),
    "supports_eagle_prefix_cache_hashing": (),
    "requires_kv_delivery": (),
    "role": (),
    "__init__": ("vllm_config", "role", "kv_cache_config"),
    "set_eagle_prefix_cache_hashing": ("enabled",),
    # worker side
    "bind_connector_metadata": ("connector_metadata",),
    "clear_connector_metadata": (),
    "_get_connector_metadata": (),
    "has_connector_metadata": (),
    "register_kv_caches": ("kv_caches",),
    "register_cross_layers_kv_cache": ("kv_cache", "attn_backend"),
    "set_host_xfer_buffer_ops": ("copy_operation",),
    "handle_preemptions": ("kv_connector_metadata",),
    "start_load_kv": ("forward_context", "**kwargs"),
    "wait_for_layer_load": ("layer_name",),
    "save_kv_layer": ("layer_name", "kv_layer", "attn_metadata", "**kwargs"),
    "wait_for_save": (),
    "get_finished": ("finished_req_ids",),
    "get_block_ids_with_load_errors": (),
    "shutdown": (),
    "get_kv_connector_stats": (),
    "get_kv_connector_kv_cache_events": (),
    "get_handshake_metadata": (),
    "build_connector_worker_meta": (),
    # scheduler side
    "bind_gpu_block_pool": ("gpu_block_pool",),
    "get_num_new_matched_tokens": ("request", "num_computed_tokens"),
    "update_state_after_alloc": ("request", "blocks", "num_external_tokens"),
    "build_connector_meta": ("scheduler_output",),
    "on_new_request": ("request",),
    "update_connector_output": ("connector_output",),
    "request_finished": ("request", "block_ids"),
    "take_events": (),
    "has_pending_push_work": (),
    "get_required_kvcache_layout": ("vllm_config",),
    "requires_piecewise_for_cudagraph": ("extra_config",),
    "get_finished_count": (),
    "build_kv_connector_stats": ("data",),
    "set_xfer_handshake_metadata": ("metadata",),
    "set_xfer_handshake_metadata_pp_aware": ("metadata",),
    "build_prom_metrics": ("vllm_config", "metric_types", "labelnames", "per_engine_labelvalues"),
    "reset_cache": (),
}
PINNED_ABSTRACT = frozenset({"start_load_kv", "wait_for_layer_load", "save_kv_layer", "wait_for_save",
                             "get_num_new_matched_tokens", "update_state_after_alloc",
                             "build_connector_meta"})

try:  # pragma: no cover - only where vllm is installed
    from vllm.distributed.kv_transfer.kv_connector.v1.base import (  # type: ignore
        KVConnectorBase_V1,
        KVConnectorMetadata,
        KVConnectorRole,
    )

    HAVE_VLLM = True
except ImportError:
    HAVE_VLLM = False

    class KVConnectorRole(enum.Enum):  # type: ignore[no-redef]
        SCHEDULER = 0
        WORKER = 1

    class KVConnectorMetadata(ABC):  # type: ignore[no-redef]  # noqa: B024
        """What the scheduler-side connector hands the worker-side one each step."""

    class KVConnectorBase_V1(ABC):  # type: ignore[no-redef]  # noqa: N801
        """The stand-in base: the pinned method list, each doing what the real default does."""

        @property
        def prefer_cross_layer_blocks(self) -> bool:
            return False

        @property
        def supports_eagle_prefix_cache_hashing(self) -> bool:
            return False

        @property
        def requires_kv_delivery(self) -> bool:
            return bool(getattr(self._kv_transfer_config, "is_kv_producer", False))

        def __init__(self, vllm_config, role, kv_cache_config):
            self._connector_metadata = None
            self._vllm_config = vllm_config
            if getattr(vllm_config, "kv_transfer_config", None) is None:
                raise ValueError("kv_transfer_config must be set for KVConnectorBase_V1")
            self._kv_transfer_config = vllm_config.kv_transfer_config
            self._kv_cache_config = kv_cache_config
            self._role = role
            self.use_eagle_prefix_cache_hashing = False

        def set_eagle_prefix_cache_hashing(self, enabled: bool) -> None:
            self.use_eagle_prefix_cache_hashing = enabled

        @property
        def role(self):
            return self._role

        def bind_connector_metadata(self, connector_metadata) -> None:
            self._connector_metadata = connector_metadata

        def clear_connector_metadata(self) -> None:
            self._connector_metadata = None

        def _get_connector_metadata(self):
            assert self._connector_metadata is not None
            return self._connector_metadata

        def has_connector_metadata(self) -> bool:
            return self._connector_metadata is not None

        def register_kv_caches(self, kv_caches):
            return

        def register_cross_layers_kv_cache(self, kv_cache, attn_backend):
            return

        def set_host_xfer_buffer_ops(self, copy_operation):
            return

        def handle_preemptions(self, kv_connector_metadata):
            return

        @abstractmethod
        def start_load_kv(self, forward_context, **kwargs: Any) -> None: ...

        @abstractmethod
        def wait_for_layer_load(self, layer_name: str) -> None: ...

        @abstractmethod
        def save_kv_layer(self, layer_name: str, kv_layer, attn_metadata, **kwargs: Any) -> None: ...

        @abstractmethod
        def wait_for_save(self): ...

        def get_finished(self, finished_req_ids):
            return None, None

        def get_block_ids_with_load_errors(self) -> set[int]:
            return set()

        def shutdown(self):
            return None

        def get_kv_connector_stats(self):
            return None

        def get_kv_connector_kv_cache_events(self):
            return None

        def get_handshake_metadata(self):
            return None

        def build_connector_worker_meta(self):
            return None

        def bind_gpu_block_pool(self, gpu_block_pool) -> None:
            return

        @abstractmethod
        def get_num_new_matched_tokens(self, request, num_computed_tokens: int): ...

        @abstractmethod
        def update_state_after_alloc(self, request, blocks, num_external_tokens: int): ...

        @abstractmethod
        def build_connector_meta(self, scheduler_output): ...

        def on_new_request(self, request) -> None:
            return

        def update_connector_output(self, connector_output):
            return

        def request_finished(self, request, block_ids):
            return False, None

        def take_events(self):
            return ()

        def has_pending_push_work(self) -> bool:
            return False

        @classmethod
        def get_required_kvcache_layout(cls, vllm_config):
            if cls is KVConnectorBase_V1:
                raise TypeError("get_required_kvcache_layout should not be called on the abstract base class")
            return None

        @classmethod
        def requires_piecewise_for_cudagraph(cls, extra_config) -> bool:
            return False

        def get_finished_count(self):
            return None

        @classmethod
        def build_kv_connector_stats(cls, data=None):
            return None

        def set_xfer_handshake_metadata(self, metadata) -> None:
            return None

        def set_xfer_handshake_metadata_pp_aware(self, metadata) -> None:
            if any(pp_rank != 0 for pp_rank, _ in metadata):
                raise ValueError(f"{type(self).__name__} received pp_rank > 0 handshake metadata")
            self.set_xfer_handshake_metadata({tp_rank: meta for (_, tp_rank), meta in metadata.items()})

        @classmethod
        def build_prom_metrics(cls, vllm_config, metric_types, labelnames, per_engine_labelvalues):
            return None

        def reset_cache(self):
            return None
