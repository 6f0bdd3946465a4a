"""The connector against the pinned vLLM interface, and its configuration (no daemon needed)."""

import inspect
import json
import logging
import unittest

from cgn_kv_connector import connector as conn
from cgn_kv_connector import vllm_base
from daemon import closed_port_target
from harness import (AGENT_KV_TRANSFER_CONFIG, Engine, Request, digests_for, load_connector, params, tokens,
                     vllm_config)


def _params(fn) -> tuple:
    out = []
    for p in inspect.signature(fn).parameters.values():
        if p.name in ("self", "cls"):
            continue
        out.append(("**" + p.name) if p.kind is inspect.Parameter.VAR_KEYWORD else p.name)
    return tuple(out)


class PinnedInterfaceTest(unittest.TestCase):
    def test_stand_in_base_has_exactly_the_pinned_methods(self):
        if vllm_base.HAVE_VLLM:
            self.skipTest("vllm is installed: the real base is used")
        base = vllm_base.KVConnectorBase_V1
        own = {name for name, _ in vars(base).items() if not name.startswith("__") or name == "__init__"}
        own -= {"_abc_impl"}
        self.assertEqual(sorted(own), sorted(vllm_base.PINNED_METHODS))
        for name, expected in vllm_base.PINNED_METHODS.items():
            attr = inspect.getattr_static(base, name)
            if isinstance(attr, property):
                self.assertEqual(expected, (), name)
                continue
            fn = attr.__func__ if isinstance(attr, classmethod) else attr
            self.assertEqual(_params(fn), expected, name)
        self.assertEqual(set(base.__abstractmethods__), set(vllm_base.PINNED_ABSTRACT))

    def test_connector_overrides_keep_the_pinned_signatures(self):
        cls = conn.CognitoraConnector
        self.assertFalse(getattr(cls, "__abstractmethods__", frozenset()), "abstract methods left")
        overridden = [n for n in vllm_base.PINNED_METHODS if n in vars(cls)]
        # Every abstract method and the worker/scheduler methods the connector relies on.
        for name in vllm_base.PINNED_ABSTRACT | {"register_kv_caches", "get_finished",
                                                 "get_block_ids_with_load_errors", "request_finished",
                                                 "shutdown", "__init__"}:
            self.assertIn(name, overridden)
        for name in overridden:
            self.assertEqual(_params(vars(cls)[name]), vllm_base.PINNED_METHODS[name], name)

    def test_methods_not_overridden_answer_like_the_base(self):
        c = load_connector(vllm_config(closed_port_target()), vllm_base.KVConnectorRole.SCHEDULER, 8)
        self.addCleanup(c.shutdown)
        self.assertEqual(c.get_finished({"r"}), (None, None))
        self.assertEqual(c.request_finished(type("R", (), {"request_id": "x"})(), [1]), (False, None))
        self.assertEqual(list(c.take_events()), [])
        self.assertFalse(c.has_connector_metadata())
        self.assertIsNone(c.get_required_kvcache_layout(None))
        self.assertIs(c.role, vllm_base.KVConnectorRole.SCHEDULER)


class HarnessOrderTest(unittest.TestCase):
    """The harness calls the connector in vLLM's order (docs/kv-connector.md "Tests")."""

    def test_one_request_one_step(self):
        e = Engine(closed_port_target(), layers=2)
        self.addCleanup(e.close)
        calls = []
        for side, c in (("S", e.scheduler), ("W", e.worker)):
            for name in vllm_base.PINNED_METHODS:
                attr = getattr(c, name, None)
                if callable(attr) and name != "__init__":
                    setattr(c, name, _recorder(calls, side, name, attr))
        logging.getLogger("cgn_kv_connector").setLevel(logging.ERROR)
        self.addCleanup(logging.getLogger("cgn_kv_connector").setLevel, logging.NOTSET)
        t = tokens(40)
        e.run(Request("r", t, params(digests_for(t, 16))))
        e.finish("r")
        self.assertEqual(calls, [
            "S.get_num_new_matched_tokens", "S.update_state_after_alloc", "S.build_connector_meta",
            "W.bind_connector_metadata", "W.start_load_kv",
            "W.wait_for_layer_load", "W.save_kv_layer", "W.wait_for_layer_load", "W.save_kv_layer",
            "W.wait_for_save", "W.get_finished", "W.get_block_ids_with_load_errors",
            "W.clear_connector_metadata", "S.request_finished"])


def _recorder(calls, side, name, fn):
    def call(*args, **kwargs):
        calls.append(f"{side}.{name}")
        return fn(*args, **kwargs)

    return call


class ConfigTest(unittest.TestCase):
    def test_the_agents_exact_json_loads_the_connector(self):
        kv = json.loads(AGENT_KV_TRANSFER_CONFIG)
        self.assertEqual(kv["kv_connector"], "CognitoraConnector")
        cfg = vllm_config(closed_port_target())
        c = load_connector(cfg, vllm_base.KVConnectorRole.WORKER, 8)
        self.addCleanup(c.shutdown)
        self.assertIsInstance(c, conn.CognitoraConnector)
        self.assertEqual(c.config.target, cfg.kv_transfer_config.kv_connector_extra_config["kvcached_target"])
        self.assertEqual(c.config.socket, "/run/cognitora/kvcached.sock")
        ns = c.namespace
        self.assertEqual((ns.model, ns.dtype, ns.tp_rank, ns.tp_size, ns.block_tokens, ns.tenant),
                         ("meta-llama/Llama-3.1-8B-Instruct", "bfloat16", 0, 1, 16, ""))

    def test_namespace_follows_the_engine(self):
        cfg = vllm_config(closed_port_target(), block_size=32, tp_size=4, rank=6,
                          extra={"kvcached_tenant": "acme"})
        cfg.cache_config.cache_dtype = "fp8_e4m3"
        c = load_connector(cfg, vllm_base.KVConnectorRole.WORKER, 8)
        self.addCleanup(c.shutdown)
        ns = c.namespace
        self.assertEqual((ns.dtype, ns.tp_rank, ns.tp_size, ns.block_tokens, ns.tenant),
                         ("fp8_e4m3", 2, 4, 32, "acme"))

    def test_bad_extra_config_is_a_clear_error(self):
        cases = [
            ({"kvcached_target": "127.0.0.1:1", "kvcached_trget": "x"}, "unknown"),
            ({}, "kvcached_target is required"),
            ({"kvcached_target": ""}, "kvcached_target is empty"),
            ({"kvcached_target": 9400}, "is not a str"),
            ({"kvcached_target": "h:1", "kvcached_lease_ms": "10"}, "kvcached_lease_ms"),
            ({"kvcached_target": "h:1", "kvcached_lease_ms": True}, "kvcached_lease_ms"),
            ({"kvcached_target": "h:1", "kvcached_timeout_s": -1}, "negative"),
        ]
        for extra, message in cases:
            with self.subTest(extra=extra):
                with self.assertRaises(ValueError) as ctx:
                    conn.parse_extra_config(extra)
                self.assertIn(message, str(ctx.exception))
        with self.assertRaises(ValueError):
            conn.parse_extra_config(["kvcached_target"])
        ok = conn.parse_extra_config({"kvcached_target": "h:1", "kvcached_timeout_s": 3})
        self.assertEqual(ok.timeout_s, 3.0)


if __name__ == "__main__":
    unittest.main()
