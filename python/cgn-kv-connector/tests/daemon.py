"""A real cgn-kvcached on loopback for the tests: started from $CGN_BIN_DIR, ports from its port file."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time


def binary() -> str:
    bin_dir = os.environ.get("CGN_BIN_DIR", "")
    path = os.path.join(bin_dir, "cgn-kvcached")
    if not bin_dir or not os.access(path, os.X_OK):
        raise RuntimeError(f"cgn-kvcached not found at {path!r}: set CGN_BIN_DIR to the build's bin/ "
                           "(ctest sets it)")
    return path


def wait_for(condition, timeout_s: float, what: str, interval_s: float = 0.02):
    """Polls `condition` until it returns a true value; fails after `timeout_s` naming `what`."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(interval_s)


class Daemon:
    """One cgn-kvcached process: RAM tier only, no fast-path socket, gRPC on 127.0.0.1:<any>."""

    def __init__(self, ram_bytes: int = 256 << 20, config_text: str | None = None):
        self._dir = tempfile.TemporaryDirectory(prefix="cgn-kvconn-")
        self.dir = self._dir.name
        self._ram_bytes = ram_bytes
        self._config_text = config_text
        self.proc: subprocess.Popen | None = None
        self.port = 0

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> "Daemon":
        port_file = os.path.join(self.dir, "port")
        if os.path.exists(port_file):
            os.unlink(port_file)
        args = [binary(), "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", "--socket", "",
                "--ram-bytes", str(self._ram_bytes), "--port-file", port_file, "--log-level", "warn"]
        if self._config_text is not None:
            cfg = os.path.join(self.dir, "cognitora.toml")
            with open(cfg, "w", encoding="utf-8") as f:
                f.write(self._config_text)
            args += ["--config", cfg]
        self._log = open(os.path.join(self.dir, "daemon.log"), "ab")
        self.proc = subprocess.Popen(_die_with_parent(args), stdout=self._log, stderr=subprocess.STDOUT)

        def ready():
            if self.proc.poll() is not None:
                raise AssertionError(f"cgn-kvcached exited with {self.proc.returncode}: {self.log()}")
            try:
                with open(port_file, encoding="utf-8") as f:
                    text = f.read().strip()
            except FileNotFoundError:
                return 0
            return int(text) if text.isdigit() else 0

        self.port = wait_for(ready, 30, "cgn-kvcached's port file")
        return self

    def log(self) -> str:
        try:
            with open(os.path.join(self.dir, "daemon.log"), encoding="utf-8", errors="replace") as f:
                return f.read()[-4000:]
        except FileNotFoundError:
            return ""

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=20)
        self.proc = None
        if getattr(self, "_log", None) is not None:
            self._log.close()
            self._log = None

    def close(self) -> None:
        self.stop()
        self._dir.cleanup()


def _die_with_parent(args: list[str]) -> list[str]:
    """The command under util-linux's setpriv --pdeathsig KILL, so a killed test leaves no daemon.

    Not preexec_fn: that runs Python in the forked child, which deadlocks when another thread
    (gRPC's) held a lock at the fork; without it subprocess uses vfork + exec and runs no Python
    in between."""
    setpriv = shutil.which("setpriv")
    return [setpriv, "--pdeathsig", "KILL", "--", *args] if setpriv else args


def closed_port_target() -> str:
    """A loopback HOST:PORT nothing listens on (bound, then released)."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"127.0.0.1:{port}"
