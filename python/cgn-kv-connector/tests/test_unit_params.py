"""kv_transfer_params from the agent: good ones read, garbage ignored with bounded warnings."""

import logging
import time
import unittest

from cgn_kv_connector.params import MAX_DIGESTS, WarnLimiter, read_transfer_params, resident_run
from cgn_kv_connector.vllm_base import KVConnectorRole
from daemon import closed_port_target
from harness import Request, digests_for, load_connector, params, tokens, vllm_config


class ReadParamsTest(unittest.TestCase):
    def setUp(self):
        self.warn = WarnLimiter(logging.getLogger("test"))

    def test_good_params(self):
        d = digests_for(tokens(64), 16)
        p = read_transfer_params(params(d, d[:2], until_ms=123), self.warn, "r")
        self.assertEqual(p.prefix, d)
        self.assertEqual(p.resident, frozenset(d[:2]))
        self.assertEqual(p.resident_until_ms, 123)
        self.assertEqual(self.warn.logged, 0)
        self.assertEqual(resident_run(p.prefix, p.resident, 10), 2)
        self.assertEqual(resident_run(p.prefix, frozenset([d[0], d[2]]), 10), 1)
        self.assertEqual(resident_run(p.prefix, frozenset(d), 3), 3)

    def test_absent_params_are_no_params(self):
        for value in (None, {}, {"other_connector": 1}):
            p = read_transfer_params(value, self.warn, "r")
            self.assertEqual((p.prefix, p.resident, p.resident_until_ms), ([], None, None))
        self.assertEqual(self.warn.logged, 0)

    def test_garbage_is_ignored_with_a_warning(self):
        good = "ab" * 32
        cases = [
            ("a string", "kv_transfer_params is a str"),
            ({"cgn_prefix_digests": "ab" * 32}, "is a str, not a list"),
            ({"cgn_prefix_digests": [good, "zz" * 32]}, "[1]"),
            ({"cgn_prefix_digests": [good, good[:-1]]}, "[1]"),
            ({"cgn_prefix_digests": [1, 2]}, "[0] = 1"),
            ({"cgn_prefix_digests": [good] * (MAX_DIGESTS + 1)}, "over the limit"),
            ({"cgn_prefix_digests": {"0": good}}, "is a dict"),
        ]
        for value, message in cases:
            with self.subTest(value=str(value)[:60]):
                warn = WarnLimiter(logging.getLogger("test"))
                with self.assertLogs("test", level="WARNING") as logs:
                    p = read_transfer_params(value, warn, "req-1")
                self.assertEqual(p.prefix, [])
                self.assertIn(message, logs.output[0])
                self.assertIn("req-1", logs.output[0])
        with self.assertLogs("test", level="WARNING"):
            p = read_transfer_params({"cgn_prefix_digests": [good], "cgn_resident_digests": [None],
                                      "cgn_resident_until_ms": "soon"}, self.warn, "r")
        self.assertEqual(p.prefix, [bytes.fromhex(good)])
        self.assertIsNone(p.resident)
        self.assertIsNone(p.resident_until_ms)

    def test_warnings_are_rate_limited(self):
        warn = WarnLimiter(logging.getLogger("test"), first=5, every=1000)
        with self.assertLogs("test", level="WARNING") as logs:
            for _ in range(2500):
                read_transfer_params({"cgn_prefix_digests": "nope"}, warn, "r")
        self.assertEqual(len(logs.output), 5 + 2)  # the first five, then the 1000th and 2000th
        self.assertEqual(warn.counts["cgn_prefix_digests:type"], 2500)
        self.assertIn("2000 such so far", logs.output[-1])


class ConnectorGarbageTest(unittest.TestCase):
    """Garbage reaches get_num_new_matched_tokens: zero tokens, no exception, bounded cost."""

    def setUp(self):
        self.c = load_connector(vllm_config(closed_port_target()), KVConnectorRole.SCHEDULER, 64)
        self.addCleanup(self.c.shutdown)

    def test_garbage_requests_match_nothing(self):
        huge = ["ab" * 32] * (MAX_DIGESTS * 4)
        values = ["x", 5, [1], {"cgn_prefix_digests": "x"}, {"cgn_prefix_digests": [3.5]},
                  {"cgn_prefix_digests": huge}, {"cgn_prefix_digests": ["g" * 64]}, {"cgn_prefix_digests": None}]
        logging.getLogger("cgn_kv_connector").setLevel(logging.ERROR)
        self.addCleanup(logging.getLogger("cgn_kv_connector").setLevel, logging.NOTSET)
        start = time.monotonic()
        n = 0
        for round_ in range(300):
            for i, value in enumerate(values):
                req = Request(f"r{round_}-{i}", tokens(128), value)
                self.assertEqual(self.c.get_num_new_matched_tokens(req, 0), (0, False))
                self.c.update_state_after_alloc(req, _Blocks(list(range(8))), 0)
                self.c.request_finished(req, list(range(8)))
                n += 1
        elapsed = time.monotonic() - start
        self.assertLess(elapsed, 30, f"{n} garbage requests took {elapsed:.1f} s")
        self.assertLessEqual(self.c.warn.logged, 7 * (5 + 1))
        self.assertEqual(self.c.counters["lookups"], 0)
        self.assertEqual(self.c._requests, {})

    def test_no_params_means_no_work(self):
        req = Request("plain", tokens(100), None)
        self.assertEqual(self.c.get_num_new_matched_tokens(req, 0), (0, False))
        meta = self.c.build_connector_meta(_Output())
        self.assertEqual((meta.loads, meta.saves), ([], []))
        self.assertEqual(self.c.counters["lookups"], 0)


class _Blocks:
    def __init__(self, ids):
        self.ids = ids

    def get_block_ids(self):
        return (self.ids,)


class _Output:
    scheduled_new_reqs = []
    scheduled_cached_reqs = None
    num_scheduled_tokens = {}
    finished_req_ids = set()


if __name__ == "__main__":
    unittest.main()
