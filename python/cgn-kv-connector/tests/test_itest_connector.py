"""CognitoraConnector driven the way vLLM drives it (tests/harness.py), against a real cgn-kvcached."""

import logging
import time
import unittest

from cgn_kv_connector.client import KvCachedClient
from daemon import Daemon, closed_port_target
from harness import Engine, Request, digests_for, params, tokens

BS = 16


def quiet(test):
    log = logging.getLogger("cgn_kv_connector")
    level = log.level
    log.setLevel(logging.ERROR)
    test.addCleanup(log.setLevel, level)


class ConnectorTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.daemon = Daemon().start()

    @classmethod
    def tearDownClass(cls):
        cls.daemon.close()

    def engine(self, **kw) -> Engine:
        e = Engine(self.daemon.target, block_size=BS, **kw)
        self.addCleanup(e.close)
        return e

    def prompt(self, n_tokens, seed):
        t = tokens(n_tokens, seed)
        return t, digests_for(t, BS, salt=bytes([seed]))

    def assert_blocks_equal(self, a: Engine, a_req: str, b: Engine, b_req: str, n_blocks: int):
        for i in range(n_blocks):
            self.assertEqual(b.block_pages(b.blocks[b_req][i]), a.block_pages(a.blocks[a_req][i]),
                             f"block {i} differs between engine A and engine B")

    def test_engine_a_saves_engine_b_loads_the_same_kv(self):
        t, d = self.prompt(5 * BS + 7, seed=1)  # 5 full blocks and a partial one
        a = self.engine()
        [ra] = a.run(Request("a", t, params(d)))
        self.assertEqual(ra.external_tokens, 0)
        self.assertEqual(a.worker.counters["saved_blocks"], 5)
        for i in range(5):  # what A's "attention" wrote is the model's KV for the prompt
            self.assertEqual(a.block_pages(a.blocks["a"][i]), a.expected_pages(t, i))

        b = self.engine()
        before = KvCachedClient(self.daemon.target).stats()
        [rb] = b.run(Request("b", t, params(d)))
        self.assertEqual(b.scheduler.counters["lookups"], 1)
        self.assertEqual(rb.external_tokens, 5 * BS)
        self.assertEqual(rb.computed, [(5 * BS, 5 * BS + 7)], "B recomputed blocks it loaded")
        self.assertEqual(rb.invalid_block_ids, set())
        self.assertEqual(b.worker.counters["loaded_blocks"], 5)
        self.assert_blocks_equal(a, "a", b, "b", 5)
        self.assertEqual(b.worker.counters["saved_blocks"], 0, "B saved the blocks it loaded")
        after = KvCachedClient(self.daemon.target).stats()
        self.assertEqual(after.ram.hits - before.ram.hits, 5)
        self.assertEqual(b.finish("b"), (False, None))
        self.assertEqual(b.scheduler._requests, {})

    def test_only_blocks_beyond_the_engines_own_prefix_hit_are_loaded(self):
        t, d = self.prompt(5 * BS + 2, seed=12)
        a = self.engine()
        a.run(Request("a", t, params(d)))
        b = self.engine()
        [rb] = b.run(Request("b", t, params(d)), local_blocks=2)
        self.assertEqual(rb.external_tokens, 3 * BS)
        self.assertEqual(b.worker.counters["loaded_blocks"], 3)
        self.assertEqual(rb.computed, [(5 * BS, 5 * BS + 2)])
        self.assert_blocks_equal(a, "a", b, "b", 5)
        # A local hit covering the whole run leaves nothing to load.
        c = self.engine()
        [rc] = c.run(Request("c", t, params(d)), local_blocks=5)
        self.assertEqual(rc.external_tokens, 0)
        self.assertEqual(c.worker.counters["loaded_blocks"], 0)

    def test_a_prompt_that_fills_whole_blocks_leaves_its_last_token_to_compute(self):
        t, d = self.prompt(4 * BS, seed=2)
        a = self.engine()
        a.run(Request("a", t, params(d)))
        self.assertEqual(a.worker.counters["saved_blocks"], 4)
        b = self.engine()
        [rb] = b.run(Request("b", t, params(d)))
        self.assertEqual(rb.external_tokens, 3 * BS)  # never the block holding the last token
        self.assertEqual(rb.computed, [(3 * BS, 4 * BS)])
        self.assert_blocks_equal(a, "a", b, "b", 4)

    def test_a_partially_resident_prompt_loads_only_the_leading_run(self):
        t, d = self.prompt(6 * BS + 3, seed=3)
        a = self.engine()
        a.run(Request("a", t[:2 * BS + 5], params(d[:2])))  # blocks 0 and 1 only
        with KvCachedClient(self.daemon.target) as c:  # and block 3, out of line
            c.put(a.worker.namespace, d[3], bytes(a.worker._layout.block_bytes))
        b = self.engine()
        [rb] = b.run(Request("b", t, params(d)))
        self.assertEqual(rb.external_tokens, 2 * BS)
        self.assertEqual(rb.computed, [(2 * BS, 6 * BS + 3)])
        self.assert_blocks_equal(a, "a", b, "b", 2)
        for i in range(2, 6):
            self.assertEqual(b.block_pages(b.blocks["b"][i]), b.expected_pages(t, i))
        # B saved what it computed beyond the run, block 3 being already there.
        self.assertEqual(b.worker.counters["saved_blocks"] + b.worker.counters["already_resident"], 4)
        self.assertEqual(b.worker.counters["already_resident"], 1)

    def test_a_fresh_resident_hint_is_used_without_a_lookup(self):
        t, d = self.prompt(3 * BS + 1, seed=4)
        a = self.engine()
        a.run(Request("a", t, params(d)))
        b = self.engine()
        [rb] = b.run(Request("b", t, params(d, resident=d[:2])))
        self.assertEqual(b.scheduler.counters["lookups"], 0)
        self.assertEqual(rb.external_tokens, 2 * BS)
        self.assert_blocks_equal(a, "a", b, "b", 2)

    def test_a_stale_hint_is_looked_up_again(self):
        t, d = self.prompt(3 * BS + 1, seed=5)
        a = self.engine()
        a.run(Request("a", t, params(d)))
        past = int(time.time() * 1000) - 1
        b = self.engine()
        [rb] = b.run(Request("b1", t, params(d, resident=[], until_ms=past)))
        self.assertEqual(b.scheduler.counters["lookups"], 1)
        self.assertEqual(rb.external_tokens, 3 * BS)
        # A hint older than kvcached_hint_ttl_ms is stale too.
        c = self.engine(extra={"kvcached_hint_ttl_ms": 1000})
        clock = [100.0]
        c.scheduler._clock = lambda: clock[0]
        req = Request("c1", t, params(d, resident=[]))
        self.assertEqual(c.scheduler.get_num_new_matched_tokens(req, 0), (0, False))
        self.assertEqual(c.scheduler.counters["lookups"], 0)
        clock[0] += 1.5
        self.assertEqual(c.scheduler.get_num_new_matched_tokens(req, 0), (3 * BS, False))
        self.assertEqual(c.scheduler.counters["lookups"], 1)

    def test_chunked_prefill_saves_each_block_once_it_is_complete(self):
        t, d = self.prompt(4 * BS + 2, seed=6)
        a = self.engine()
        steps = a.run(Request("a", t, params(d)), chunk=BS + 8)  # 24-token chunks
        self.assertEqual(len(steps), 3)
        self.assertEqual(a.worker.counters["saved_blocks"], 4)
        b = self.engine()
        [rb] = b.run(Request("b", t, params(d)))
        self.assertEqual(rb.external_tokens, 4 * BS)
        self.assert_blocks_equal(a, "a", b, "b", 4)

    def test_a_block_gone_between_lookup_and_load_is_reported_and_recomputed(self):
        t, d = self.prompt(4 * BS + 1, seed=7)
        a = self.engine()
        a.run(Request("a", t[:2 * BS + 1], params(d[:2])))  # only blocks 0 and 1 exist
        quiet(self)
        b = self.engine()
        # The agent claims all four resident: block 2 is missing when the worker loads it.
        [rb] = b.run(Request("b", t, params(d, resident=d)))
        self.assertEqual(rb.external_tokens, 4 * BS)
        self.assertEqual(rb.invalid_block_ids, {b.blocks["b"][2], b.blocks["b"][3]})
        self.assertEqual(rb.computed[0], (2 * BS, 4 * BS))
        self.assertEqual(b.worker.counters["load_errors"], 1)
        for i in range(4):
            self.assertEqual(b.block_pages(b.blocks["b"][i]), b.expected_pages(t, i), f"block {i}")

    def test_tensor_parallel_blocks_count_only_when_every_rank_holds_them(self):
        t, d = self.prompt(2 * BS + 1, seed=8)
        rank0 = self.engine(tp_size=2, rank=0)
        rank0.run(Request("r0", t, params(d)))
        sched = self.engine(tp_size=2, rank=0).scheduler
        self.assertEqual(sched.get_num_new_matched_tokens(Request("x", t, params(d)), 0), (0, False))
        rank1 = self.engine(tp_size=2, rank=1)
        rank1.run(Request("r1", t, params(d)))
        self.assertEqual(sched.get_num_new_matched_tokens(Request("y", t, params(d)), 0), (2 * BS, False))


class DaemonDownTest(unittest.TestCase):
    def test_no_daemon_means_no_extra_tokens_and_no_exception(self):
        quiet(self)
        t = tokens(3 * BS + 5, 9)
        d = digests_for(t, BS)
        e = Engine(closed_port_target(), block_size=BS, extra={"kvcached_timeout_s": 2})
        self.addCleanup(e.close)
        [r] = e.run(Request("r", t, params(d)))
        self.assertEqual(r.external_tokens, 0)
        self.assertEqual(e.scheduler.counters["lookup_errors"], 1)
        # The first save fails; the daemon is then left alone for kvcached_backoff_ms.
        self.assertEqual(e.worker.counters["save_errors"], 1)
        self.assertEqual(e.worker.counters["saves_skipped"], 2)
        for i in range(3):
            self.assertEqual(e.block_pages(e.blocks["r"][i]), e.expected_pages(t, i))

    def test_a_daemon_that_is_down_is_retried_only_after_the_backoff(self):
        quiet(self)
        t = tokens(2 * BS + 5, 11)
        d = digests_for(t, BS)
        e = Engine(closed_port_target(), block_size=BS, extra={"kvcached_backoff_ms": 5000})
        self.addCleanup(e.close)
        clock = [1000.0]
        e.scheduler._clock = e.worker._clock = lambda: clock[0]
        e.run(Request("r1", t, params(d)))
        self.assertEqual((e.scheduler.counters["lookups"], e.scheduler.counters["lookup_errors"]), (1, 1))
        self.assertEqual((e.worker.counters["save_errors"], e.worker.counters["saves_skipped"]), (1, 1))
        start = time.monotonic()
        for i in range(20):  # within the backoff: no call to the daemon at all
            [r] = e.run(Request(f"r{i + 2}", t, params(d)))
            self.assertEqual(r.external_tokens, 0)
            e.finish(f"r{i + 2}")
        self.assertLess(time.monotonic() - start, 10)
        self.assertEqual(e.scheduler.counters["lookups"], 1)
        self.assertEqual(e.scheduler.counters["lookups_skipped"], 20)
        self.assertEqual(e.worker.counters["save_errors"], 1)
        self.assertEqual(e.worker.counters["saves_skipped"], 1 + 40)
        clock[0] += 5.001
        e.run(Request("late", t, params(d)))
        self.assertEqual(e.scheduler.counters["lookups"], 2)
        self.assertEqual(e.worker.counters["save_errors"], 2)

    def test_daemon_gone_between_schedule_and_load_reports_load_errors(self):
        quiet(self)
        daemon = Daemon().start()
        self.addCleanup(daemon.close)
        t = tokens(3 * BS + 5, 10)
        d = digests_for(t, BS)
        a = Engine(daemon.target, block_size=BS, extra={"kvcached_timeout_s": 2})
        self.addCleanup(a.close)
        a.run(Request("a", t, params(d)))
        b = Engine(daemon.target, block_size=BS, extra={"kvcached_timeout_s": 2})
        self.addCleanup(b.close)
        b.add(Request("b", t, params(d)))
        r = b.step("b", before_worker=daemon.stop)
        self.assertEqual(b.scheduler.counters["lookups"], 1)
        self.assertEqual(r.external_tokens, 3 * BS)
        self.assertEqual(r.invalid_block_ids, set(b.blocks["b"][:3]))
        for i in range(3):
            self.assertEqual(b.block_pages(b.blocks["b"][i]), b.expected_pages(t, i))


if __name__ == "__main__":
    unittest.main()
