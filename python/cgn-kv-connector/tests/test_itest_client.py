"""KvCachedClient against a real cgn-kvcached on loopback."""

import hashlib
import os
import shutil
import socket
import subprocess
import time
import unittest

from cgn_kv_connector.client import (CHUNK_BYTES, KvCachedClient, KvCachedError, Namespace, Tls,
                                     chunk_count)
from daemon import Daemon, closed_port_target

NS = Namespace(model="m", dtype="bfloat16", tp_rank=0, tp_size=1, block_tokens=16)


def digest(i: int, salt: str = "") -> bytes:
    return hashlib.sha256(f"{salt}{i}".encode()).digest()


def pattern(n: int, seed: int) -> bytes:
    block = hashlib.sha256(f"{seed}".encode()).digest() * 2048  # 64 KiB
    return (block * (n // len(block) + 1))[:n]


class ClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.daemon = Daemon(ram_bytes=512 << 20).start()
        cls.client = KvCachedClient(cls.daemon.target, timeout_s=60)

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        cls.daemon.close()

    def test_round_trips_up_to_16_mib(self):
        sizes = [1, 4096, CHUNK_BYTES - 1, CHUNK_BYTES, CHUNK_BYTES + 1, 5 * CHUNK_BYTES + 3, 16 * CHUNK_BYTES]
        for i, size in enumerate(sizes):
            with self.subTest(size=size):
                data = pattern(size, i)
                self.assertFalse(self.client.put(NS, digest(i, "rt"), data))
                got = self.client.get(NS, digest(i, "rt"))
                self.assertEqual(got.tier, "ram")
                self.assertEqual(len(got.data), size)
                self.assertEqual(got.data, data)
        self.assertEqual(chunk_count(16 * CHUNK_BYTES), 16)
        self.assertEqual(chunk_count(CHUNK_BYTES + 1), 2)
        self.assertEqual(chunk_count(0), 1)

    def test_put_takes_any_buffer_and_a_second_put_is_already_resident(self):
        data = bytearray(pattern(3 * CHUNK_BYTES + 17, 9))
        self.assertFalse(self.client.put(NS, digest(1, "twice"), memoryview(data)))
        self.assertTrue(self.client.put(NS, digest(1, "twice"), data))
        self.assertEqual(self.client.get(NS, digest(1, "twice")).data, bytes(data))

    def test_missing_block_and_other_namespace_are_not_found(self):
        with self.assertRaises(KvCachedError) as ctx:
            self.client.get(NS, digest(0, "never"))
        self.assertEqual(ctx.exception.code, "not_found")
        self.client.put(NS, digest(0, "ns"), b"x" * 100)
        for other in (Namespace("m", "bfloat16", 1, 2, 16), Namespace("m", "float16", 0, 1, 16),
                      Namespace("m", "bfloat16", 0, 1, 32), Namespace("m", "bfloat16", 0, 1, 16, "t"),
                      Namespace("m2", "bfloat16", 0, 1, 16)):
            with self.subTest(ns=other):
                with self.assertRaises(KvCachedError) as ctx:
                    self.client.get(other, digest(0, "ns"))
                self.assertEqual(ctx.exception.code, "not_found")

    def test_bad_requests_are_refused(self):
        with self.assertRaises(KvCachedError) as ctx:
            self.client.put(NS, b"short", b"x")
        self.assertEqual(ctx.exception.code, "invalid_argument")
        with self.assertRaises(KvCachedError) as ctx:
            self.client.put(Namespace("", "bf16", 0, 1, 16), digest(0), b"x")
        self.assertEqual(ctx.exception.code, "invalid_argument")
        self.assertIn("model", ctx.exception.message)
        with self.assertRaises(KvCachedError) as ctx:
            self.client.batch_lookup(Namespace("m", "bf16", 2, 2, 16), [[digest(0)]])
        self.assertEqual(ctx.exception.code, "invalid_argument")
        with self.assertRaises(KvCachedError) as ctx:
            self.client.batch_lookup(NS, [[digest(0)]] * 1025)
        self.assertEqual(ctx.exception.code, "invalid_argument")

    def test_batch_lookup_runs_and_leases(self):
        d = [digest(i, "lk") for i in range(5)]
        for i in (0, 1, 3):
            self.client.put(NS, d[i], pattern(1000, i))
        before = self.client.stats()
        now_ms = int(time.time() * 1000)
        res = self.client.batch_lookup(NS, [d, [d[3], d[4]], [d[2]], [d[0]], []], lease_ms=5000)
        self.assertEqual([len(t) for t in res.tiers], [2, 1, 0, 1, 0])
        self.assertEqual(res.tiers[0], ["ram", "ram"])
        self.assertGreaterEqual(res.lease_until_unix_ms, now_ms + 4000)
        self.assertLessEqual(res.lease_until_unix_ms, int(time.time() * 1000) + 5000 + 1000)
        after = self.client.stats()
        self.assertGreater(after.leases_granted, before.leases_granted)
        unleased = self.client.batch_lookup(NS, [d], lease_ms=0)
        self.assertEqual([len(t) for t in unleased.tiers], [2])
        self.assertEqual(unleased.lease_until_unix_ms, 0)

    def test_stats_count_puts(self):
        before = self.client.stats().puts
        for i in range(3):
            self.client.put(NS, digest(i, "stats"), b"s" * 10)
        self.assertEqual(self.client.stats().puts, before + 3)
        self.assertGreater(self.client.stats().ram.blocks, 0)

    def test_a_block_over_the_clients_limit_is_refused(self):
        self.client.put(NS, digest(0, "big"), pattern(2 * CHUNK_BYTES, 3))
        with KvCachedClient(self.daemon.target, max_block_bytes=CHUNK_BYTES) as small:
            with self.assertRaises(KvCachedError) as ctx:
                small.get(NS, digest(0, "big"))
        self.assertEqual(ctx.exception.code, "protocol")


class UnreachableTest(unittest.TestCase):
    def test_a_daemon_that_is_down_is_unavailable_within_the_timeout(self):
        with KvCachedClient(closed_port_target(), timeout_s=3, lookup_timeout_s=3) as c:
            for call in (lambda: c.get(NS, digest(0)), lambda: c.put(NS, digest(0), b"x"),
                         lambda: c.batch_lookup(NS, [[digest(0)]], 100), c.stats):
                start = time.monotonic()
                with self.assertRaises(KvCachedError) as ctx:
                    call()
                self.assertIn(ctx.exception.code, ("unavailable", "deadline_exceeded"))
                self.assertLess(time.monotonic() - start, 20)

    def test_a_daemon_that_accepts_but_never_answers_times_out(self):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as silent:
            silent.bind(("127.0.0.1", 0))
            silent.listen(16)  # the kernel completes handshakes; nothing ever reads or writes
            target = f"127.0.0.1:{silent.getsockname()[1]}"
            with KvCachedClient(target, timeout_s=0.5, lookup_timeout_s=0.5) as c:
                for call in (lambda: c.get(NS, digest(0)), lambda: c.put(NS, digest(0), b"x"),
                             lambda: c.batch_lookup(NS, [[digest(0)]], 100), c.stats):
                    start = time.monotonic()
                    with self.assertRaises(KvCachedError) as ctx:
                        call()
                    self.assertIn(ctx.exception.code, ("unavailable", "deadline_exceeded"))
                    self.assertLess(time.monotonic() - start, 10)

    def test_a_get_right_after_the_daemon_died_ends_every_time(self):
        # grpcio's threaded stream iterator could hang here about one time in ten; the client
        # drives GetBlock on the caller's thread instead. Twenty rounds: a regression shows.
        for i in range(20):
            daemon = Daemon(ram_bytes=64 << 20).start()
            try:
                with KvCachedClient(daemon.target, timeout_s=2, lookup_timeout_s=2) as c:
                    c.put(NS, digest(i), b"x" * 3000)
                    self.assertEqual(c.get(NS, digest(i)).data, b"x" * 3000)
                    daemon.stop()
                    start = time.monotonic()
                    with self.assertRaises(KvCachedError) as ctx:
                        c.get(NS, digest(i))
                    self.assertIn(ctx.exception.code, ("unavailable", "deadline_exceeded"))
                    self.assertLess(time.monotonic() - start, 10, f"round {i}")
            finally:
                daemon.close()

    def test_an_empty_target_or_half_a_client_certificate_is_a_config_error(self):
        with self.assertRaises(ValueError):
            KvCachedClient("")
        with self.assertRaises(ValueError):
            KvCachedClient("127.0.0.1:1", tls=Tls(cert="/x.pem"))


def _openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


class TlsTest(unittest.TestCase):
    """mTLS: the daemon's [tls] with require_client_cert; the client's ca/cert/key paths."""

    @classmethod
    def setUpClass(cls):
        if shutil.which("openssl") is None:
            raise unittest.SkipTest("openssl not found: cannot make test certificates")
        import tempfile

        cls._dir = tempfile.TemporaryDirectory(prefix="cgn-kvconn-tls-")
        d = cls._dir.name
        _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                 "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=test-ca", cwd=d)
        for name in ("server", "client"):
            _openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                     "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={name}", cwd=d)
            with open(os.path.join(d, f"{name}.ext"), "w", encoding="utf-8") as f:
                f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
            _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                     "-CAcreateserial", "-out", f"{name}.pem", "-days", "2", "-extfile", f"{name}.ext", cwd=d)
        def p(name):
            return os.path.join(d, name)

        cls.daemon = Daemon(config_text=f'[tls]\nca_file = "{p("ca.pem")}"\ncert_file = "{p("server.pem")}"\n'
                                        f'key_file = "{p("server.key")}"\nrequire_client_cert = true\n').start()
        cls.paths = staticmethod(p)

    @classmethod
    def tearDownClass(cls):
        cls.daemon.close()
        cls._dir.cleanup()

    def test_mutual_tls_round_trip(self):
        p = self.paths
        with KvCachedClient(self.daemon.target, tls=Tls(p("ca.pem"), p("client.pem"), p("client.key"))) as c:
            self.assertFalse(c.put(NS, digest(0, "tls"), b"secret-kv" * 1000))
            self.assertEqual(c.get(NS, digest(0, "tls")).data, b"secret-kv" * 1000)

    def test_without_a_client_certificate_or_without_tls_the_daemon_refuses(self):
        p = self.paths
        for tls in (Tls(ca=p("ca.pem")), None):
            with self.subTest(tls=tls):
                with KvCachedClient(self.daemon.target, tls=tls, timeout_s=5, lookup_timeout_s=5) as c:
                    with self.assertRaises(KvCachedError) as ctx:
                        c.stats()
                self.assertIn(ctx.exception.code, ("unavailable", "deadline_exceeded"))


if __name__ == "__main__":
    unittest.main()
