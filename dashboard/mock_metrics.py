#!/usr/bin/env python3
"""Simulated Cognitora router /metrics for the fleet dashboard (Python standard library only).

Serves a moving, plausible picture of a mixed GPU fleet under the metric names a real router
emits (dashboard/metric_names.txt, from docs/design/principles.md), and nothing else: the browser tests
check every family and label set against that file. /metrics answers CORS like the router
(Access-Control-Allow-Origin: * and an OPTIONS preflight), so the dashboard opened from disk can
scrape it. The dashboard itself is served at /dashboard/ as the router does.

    python3 dashboard/mock_metrics.py                      # port 8080; then open dashboard/index.html
    python3 dashboard/mock_metrics.py --port 0 --nodes 32  # port 0: pick a free one, print it

The simulation is driven by wall time, not by scrape count: counters grow by rate * elapsed time,
so rates look the same whatever interval the dashboard polls at. One thread-safe Fleet object
owns all state; the HTTP server (one thread per connection) reads it under its lock.
"""

import argparse
import http.server
import math
import os
import random
import sys
import threading
import time

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
DASHBOARD_DIR = os.path.dirname(os.path.abspath(__file__))
# Files the mock serves under /dashboard/: only what the page needs, never a path from the URL.
DASHBOARD_FILES = {
    "index.html": "text/html; charset=utf-8",
    "dashboard.js": "text/javascript; charset=utf-8",
    "prom.js": "text/javascript; charset=utf-8",
    "dashboard.css": "text/css; charset=utf-8",
}

# name, watt limit (W), idle draw (W), KV-cache GiB, max batch
GPUS = {
    "h200": ("NVIDIA H200", 700, 95, 110, 256),
    "h100": ("NVIDIA H100 80GB HBM3", 700, 80, 55, 192),
    "b200": ("NVIDIA B200", 1000, 140, 150, 320),
    "a100": ("NVIDIA A100-SXM4-80GB", 400, 55, 50, 128),
    "l40s": ("NVIDIA L40S", 350, 40, 30, 64),
    "mi300x": ("AMD Instinct MI300X", 750, 110, 160, 256),
}

# The 16-node reference fleet: gpu, engine, model, role. Larger fleets repeat it.
FLEET = [
    ("h200", "vllm", "llama-3.1-70b-instruct", "prefill"),
    ("h200", "vllm", "llama-3.1-70b-instruct", "decode"),
    ("h200", "vllm", "llama-3.1-70b-instruct", "decode"),
    ("h100", "vllm", "llama-3.1-70b-instruct", "prefill"),
    ("h100", "sglang", "llama-3.1-70b-instruct", "decode"),
    ("h100", "sglang", "qwen2.5-32b-instruct", "both"),
    ("h100", "trtllm", "llama-3.1-8b-instruct", "both"),
    ("b200", "trtllm", "llama-3.1-70b-instruct", "both"),
    ("mi300x", "vllm", "llama-3.1-70b-instruct", "both"),
    ("mi300x", "vllm", "qwen2.5-72b-instruct", "both"),
    ("a100", "vllm", "qwen2.5-32b-instruct", "both"),
    ("a100", "sglang", "qwen2.5-32b-instruct", "both"),
    ("a100", "trtllm", "llama-3.1-8b-instruct", "both"),
    ("l40s", "llamacpp", "llama-3.1-8b-instruct", "both"),
    ("l40s", "llamacpp", "mistral-7b-instruct", "both"),
    ("l40s", "vllm", "mistral-7b-instruct", "both"),
]
DOWN_SLOT = 13  # index in FLEET of a node reported down (engine crashed, agent still heartbeats)
CORDONED_SLOT = 11  # index in FLEET of a node being drained for maintenance

# Relative cost of one request per model: scales latency and per-node load.
MODEL_COST = {
    "llama-3.1-70b-instruct": 1.6,
    "qwen2.5-72b-instruct": 1.7,
    "qwen2.5-32b-instruct": 1.0,
    "llama-3.1-8b-instruct": 0.45,
    "mistral-7b-instruct": 0.4,
}
ENDPOINTS = [("/v1/chat/completions", 0.82), ("/v1/completions", 0.18)]
TTFT_BUCKETS = [0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]
DURATION_BUCKETS = [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60]
ROUTING_BUCKETS = [1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 5e-3]
OVERLAP_BUCKETS = [0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1]
ADMISSION_REASONS = ["queue_full", "watt_cap", "rate_limit", "carbon"]
RETRY_REASONS = ["upstream_5xx", "connect_failed"]
PEERS = ["eu-west-1", "us-east-2"]
MAX_STEP_S = 30.0  # a long pause between scrapes is simulated as this much time at most


def lognormal_cdf(x, median, sigma):
    if x <= 0:
        return 0.0
    return 0.5 * (1 + math.erf(math.log(x / median) / (sigma * math.sqrt(2))))


def overlap_cdf(x):
    # 30 % of requests share no prefix; the rest skew towards long shared prefixes.
    return 0.0 if x < 0 else min(1.0, 0.3 + 0.7 * x * x)


class Histogram:
    """Fractional cumulative bucket counts; emitted floored, so buckets stay monotonic."""

    def __init__(self, bounds):
        self.bounds = bounds
        self.cum = [0.0] * (len(bounds) + 1)  # last entry: +Inf
        self.sum = 0.0

    def observe_many(self, n, cdf, mean):
        for i, b in enumerate(self.bounds):
            self.cum[i] += n * cdf(b)
        self.cum[-1] += n
        self.sum += n * mean


class Node:
    def __init__(self, index, rng):
        gpu, engine, model, role = FLEET[index % len(FLEET)]
        gpu_name, limit, idle, _kv_gib, max_batch = GPUS[gpu]
        self.name = "%s-%02d" % (gpu, index + 1)
        self.gpu_name, self.engine, self.model, self.role = gpu_name, engine, model, role
        # A few nodes run under an administrative power cap below the board limit.
        self.watt_limit = limit - (100 if index % 5 == 3 else 0)
        self.idle_w = idle
        self.max_batch = max_batch
        self.up = (index % len(FLEET)) != DOWN_SLOT
        self.cordoned = (index % len(FLEET)) == CORDONED_SLOT
        self.bias = rng.uniform(-0.12, 0.12)
        self.phase = rng.uniform(0, 2 * math.pi)
        self.load = 0.4
        self.queue = 0.0
        self.kv = 0.3
        self.power = idle


class Fleet:
    """All simulated state. Thread-safe: every public method takes the lock."""

    def __init__(self, nodes, seed, energy):
        self.rng = random.Random(seed)
        self.energy = energy
        self.nodes = [Node(i, self.rng) for i in range(nodes)]
        self.models = sorted({n.model for n in self.nodes})
        self.scale = nodes / 16.0
        self.lock = threading.Lock()
        self.t0 = time.monotonic()
        self.last = self.t0
        self.requests = {}  # (model, endpoint, code) -> count
        self.gen_tokens = {m: 0.0 for m in self.models}
        self.prompt_tokens = {m: 0.0 for m in self.models}
        self.rejections = {(m, r): 0.0 for m in self.models for r in ADMISSION_REASONS}
        self.retries = {(m, r): 0.0 for m in self.models for r in RETRY_REASONS}
        self.forwards = {(m, p): 0.0 for m in self.models for p in PEERS}
        self.ttft = Histogram(TTFT_BUCKETS)
        self.duration = {
            (m, e): Histogram(DURATION_BUCKETS) for m in self.models for e, _ in ENDPOINTS
        }
        self.routing = Histogram(ROUTING_BUCKETS)
        self.overlap = Histogram(OVERLAP_BUCKETS)
        # The mock fleet serves aggregated: no prefill/decode legs, an empty handoff histogram.
        self.pd_handoff = Histogram(ROUTING_BUCKETS)
        # No cascade alias in the mock fleet: zero step counts and an empty gate histogram.
        self.cascade_gate = Histogram(DURATION_BUCKETS)
        self.index_entries = 120000.0 * self.scale
        self.gen_rate = 0.0
        for _ in range(40):  # warm up: gauges settle and counters start from a running fleet
            self._step(1.0)

    def _global_load(self, t):
        # A slow "daily" swell, a faster ripple and a little noise: 0.25 .. 0.95.
        base = 0.6 + 0.22 * math.sin(2 * math.pi * t / 180) + 0.08 * math.sin(2 * math.pi * t / 23)
        return min(0.95, max(0.25, base + self.rng.gauss(0, 0.02)))

    def _step(self, dt):
        t = time.monotonic() - self.t0
        load = self._global_load(t)
        alpha = 1 - math.exp(-dt / 4.0)  # gauges follow their targets with a 4 s time constant
        for n in self.nodes:
            if not n.up:
                n.load, n.queue, n.kv, n.power = 0.0, 0.0, 0.0, n.idle_w * 0.5
                continue
            wobble = 0.08 * math.sin(2 * math.pi * t / 41 + n.phase)
            target = load + n.bias + wobble
            if n.cordoned:
                target *= 0.15  # draining: no new work, the last requests finish
            target = min(0.99, max(0.02, target + self.rng.gauss(0, 0.03)))
            n.load += alpha * (target - n.load)
            q_target = max(0.0, (n.load - 0.72) * 120) if not n.cordoned else 0.0
            n.queue += alpha * (q_target - n.queue) + self.rng.gauss(0, 0.4)
            n.queue = max(0.0, n.queue)
            n.kv += alpha * (min(0.97, 0.12 + 0.85 * n.load) - n.kv)
            draw = n.idle_w + (n.watt_limit * 0.97 - n.idle_w) * n.load ** 0.8
            n.power += alpha * (min(n.watt_limit, draw) - n.power)
            n.power = max(n.idle_w * 0.8, n.power + self.rng.gauss(0, 3))
        for n in self.nodes:
            n.energy_j = getattr(n, "energy_j", 0.0) + n.power * dt

        rps = 46.0 * load * self.scale
        n_req = rps * dt
        weights = {m: 0.0 for m in self.models}
        for n in self.nodes:
            if n.up and not n.cordoned:
                weights[n.model] += 1.0 / MODEL_COST[n.model]
        total_w = sum(weights.values()) or 1.0
        reject_frac = 0.004 + 0.05 * max(0.0, load - 0.75)
        gen_rate = 0.0
        for m in self.models:
            share = n_req * weights[m] / total_w
            cost = MODEL_COST[m]
            for ep, ep_share in ENDPOINTS:
                k = share * ep_share
                ok = 1 - reject_frac - 0.003
                codes = (("200", ok), ("429", reject_frac), ("503", 0.002), ("400", 0.001))
                for code, frac in codes:
                    key = (m, ep, code)
                    self.requests[key] = self.requests.get(key, 0.0) + k * frac
                med = 1.2 * cost * (1 + load)
                self.duration[(m, ep)].observe_many(
                    k, lambda x, med=med: lognormal_cdf(x, med, 0.75), med * math.exp(0.75**2 / 2)
                )
            gen = share * 210 / math.sqrt(cost)
            gen_rate += gen / dt
            self.gen_tokens[m] += gen
            self.prompt_tokens[m] += share * 860
            for i, r in enumerate(ADMISSION_REASONS):
                self.rejections[(m, r)] += share * reject_frac * (0.55, 0.25, 0.1, 0.1)[i]
            for i, r in enumerate(RETRY_REASONS):
                self.retries[(m, r)] += share * 0.004 * (0.7, 0.3)[i]
            for p in PEERS:
                self.forwards[(m, p)] += share * 0.015
        chat = n_req * ENDPOINTS[0][1]
        ttft_med = 0.09 * (1 + 2.5 * load**3)
        self.ttft.observe_many(
            chat, lambda x: lognormal_cdf(x, ttft_med, 0.65), ttft_med * math.exp(0.65**2 / 2)
        )
        self.routing.observe_many(n_req, lambda x: lognormal_cdf(x, 6e-5, 0.5), 6.8e-5)
        self.overlap.observe_many(n_req, overlap_cdf, 0.7 * 2 / 3)
        target_entries = (150000 + 60000 * math.sin(2 * math.pi * t / 300)) * self.scale
        self.index_entries += alpha * (target_entries - self.index_entries)
        self.gen_rate = gen_rate

    def advance(self):
        with self.lock:
            now = time.monotonic()
            dt = min(MAX_STEP_S, now - self.last)
            if dt > 0.05:
                self.last = now
                self._step(dt)

    def render(self):
        with self.lock:
            return self._render()

    def _render(self):
        out = []

        def family(name, typ, help_text):
            out.append("# HELP %s %s" % (name, help_text))
            out.append("# TYPE %s %s" % (name, typ))

        def sample(name, labels, value):
            if labels:
                body = ",".join('%s="%s"' % (k, escape(v)) for k, v in labels)
                out.append("%s{%s} %s" % (name, body, fmt(value)))
            else:
                out.append("%s %s" % (name, fmt(value)))

        def histogram(name, labels, h):
            for b, c in zip(h.bounds + [math.inf], h.cum):
                sample(name + "_bucket", labels + [("le", fmt_le(b))], math.floor(c))
            sample(name + "_sum", labels, h.sum)
            sample(name + "_count", labels, math.floor(h.cum[-1]))

        family("cgn_router_requests_total", "counter",
               "Requests answered, by model, endpoint and HTTP status.")
        for (m, ep, code), v in sorted(self.requests.items()):
            labels = [("model", m), ("endpoint", ep), ("code", code)]
            sample("cgn_router_requests_total", labels, math.floor(v))
        family("cgn_router_chat_ttft_seconds", "histogram", "Time to first streamed token.")
        histogram("cgn_router_chat_ttft_seconds", [], self.ttft)
        family("cgn_router_request_duration_seconds", "histogram", "Request duration, by model and endpoint.")
        for (m, ep), h in sorted(self.duration.items()):
            histogram("cgn_router_request_duration_seconds", [("model", m), ("endpoint", ep)], h)
        family("cgn_router_generation_tokens_total", "counter", "Completion tokens streamed to clients.")
        for m, v in sorted(self.gen_tokens.items()):
            sample("cgn_router_generation_tokens_total", [("model", m)], math.floor(v))
        family("cgn_router_prompt_tokens_total", "counter", "Prompt tokens received.")
        for m, v in sorted(self.prompt_tokens.items()):
            sample("cgn_router_prompt_tokens_total", [("model", m)], math.floor(v))
        family("cgn_router_routing_decision_seconds", "histogram", "Time to pick a node.")
        histogram("cgn_router_routing_decision_seconds", [], self.routing)
        family("cgn_router_prefix_overlap_ratio", "histogram",
               "Share of the prompt already cached on the chosen node.")
        histogram("cgn_router_prefix_overlap_ratio", [], self.overlap)
        family("cgn_router_prefix_index_entries", "gauge", "Block digests in the prefix index.")
        sample("cgn_router_prefix_index_entries", [], round(self.index_entries))
        family("cgn_router_admission_rejections_total", "counter", "Requests shed at admission, by reason.")
        for (m, r), v in sorted(self.rejections.items()):
            sample("cgn_router_admission_rejections_total", [("model", m), ("reason", r)], math.floor(v))
        # [router.carbon]: a grid whose intensity swells over the 400 gCO2/kWh threshold and back.
        t = time.monotonic() - self.t0
        gco2 = 380 + 60 * math.sin(2 * math.pi * t / 240)
        family("cgn_router_carbon_intensity_gco2_per_kwh", "gauge", "Latest grid carbon intensity.")
        sample("cgn_router_carbon_intensity_gco2_per_kwh", [("provider", "electricitymaps"), ("zone", "DE")],
               round(gco2, 1))
        family("cgn_router_carbon_reading_age_seconds", "gauge", "Age of the latest carbon reading.")
        sample("cgn_router_carbon_reading_age_seconds", [("provider", "electricitymaps"), ("zone", "DE")],
               round(t % 60, 1))
        family("cgn_router_carbon_gate_state", "gauge", "Carbon gate state (1 on the current one).")
        for st in ("no_reading", "stale", "admit", "defer"):
            on = st == ("defer" if gco2 > 400 else "admit")
            sample("cgn_router_carbon_gate_state", [("state", st)], 1 if on else 0)
        family("cgn_router_carbon_poll_failures_total", "counter", "Failed carbon-provider polls by reason.")
        sample("cgn_router_carbon_poll_failures_total", [("reason", "rate_limited")], 0)
        family("cgn_router_pd_legs_total", "counter",
               "Disaggregated prefill/decode legs by model, leg and outcome.")
        # The mock fleet has no prefill/decode nodes: its legs stay at 0, but the series exist so
        # that the contract test sees the family's labels (a real router creates them on the first leg).
        for m in self.models:
            for leg, outcome in (("prefill", "handoff"), ("decode", "pull")):
                sample("cgn_router_pd_legs_total", [("model", m), ("leg", leg), ("outcome", outcome)], 0)
        family("cgn_router_pd_handoff_seconds", "histogram",
               "Time from the prefill leg's answer to the decode leg's first byte.")
        histogram("cgn_router_pd_handoff_seconds", [], self.pd_handoff)
        family("cgn_router_cascade_steps_total", "counter",
               "Cascade steps by alias, step (1-based) and outcome (accepted, escalated, failed, skipped).")
        # The mock fleet has no [router.cascade] alias: the series stay at 0 but exist, so the
        # contract test sees the family's labels (a real router creates them on the first step).
        for step, outcome in (("1", "accepted"), ("1", "escalated"), ("2", "accepted")):
            sample("cgn_router_cascade_steps_total", [("alias", "auto"), ("step", step), ("outcome", outcome)], 0)
        family("cgn_router_cascade_gate_seconds", "histogram",
               "Time a gated cascade step took (added before the answer), by alias.")
        histogram("cgn_router_cascade_gate_seconds", [("alias", "auto")], self.cascade_gate)
        family("cgn_router_state_events_total", "counter",
               "Node, prefix, policy and connection events applied from the state backend.")
        sample("cgn_router_state_events_total", [("backend", "static"), ("kind", "upsert")], len(self.nodes))
        family("cgn_router_retries_total", "counter", "Requests retried on another node, by reason.")
        for (m, r), v in sorted(self.retries.items()):
            sample("cgn_router_retries_total", [("model", m), ("reason", r)], math.floor(v))
        family("cgn_router_rejections_total", "counter",
               "Requests refused at intake (bad key, caps, fields only Cognitora sets), by reason.")
        sample("cgn_router_rejections_total", [("reason", "auth")], 0)
        family("cgn_router_federation_forwards_total", "counter", "Requests forwarded to a peer cluster.")
        for (m, p), v in sorted(self.forwards.items()):
            sample("cgn_router_federation_forwards_total", [("model", m), ("peer", p)], math.floor(v))
        family("cgn_router_grpc_requests_total", "counter", "gRPC calls by method and status code.")
        sample("cgn_router_grpc_requests_total", [("method", "Generate"), ("code", "OK")], 0)

        nodes = sorted(self.nodes, key=lambda n: n.name)
        family("cgn_cluster_node_info", "gauge", "Node identity; always 1.")
        for n in nodes:
            labels = [("node", n.name), ("model", n.model), ("engine", n.engine), ("role", n.role),
                      ("gpu_name", n.gpu_name)]
            sample("cgn_cluster_node_info", labels, 1)
        per_node = [
            ("cgn_cluster_node_up", "1 when the node is healthy.", lambda n: 1 if n.up else 0),
            ("cgn_cluster_node_queue_depth", "Requests waiting on the node.", lambda n: round(n.queue)),
            ("cgn_cluster_node_running", "Requests running on the node.",
             lambda n: round(n.load * n.max_batch * 0.5)),
            ("cgn_cluster_node_kv_used_ratio", "KV cache in use, 0..1.", lambda n: round(n.kv, 4)),
        ]
        if self.energy:
            per_node += [
                ("cgn_cluster_node_power_watts", "GPU board power.", lambda n: round(n.power, 1)),
                ("cgn_cluster_node_watt_limit", "GPU power cap.", lambda n: n.watt_limit),
            ]
        per_node.append(("cgn_cluster_node_cordoned", "1 when the node takes no new work.",
                         lambda n: 1 if n.cordoned else 0))
        for name, help_text, get in per_node:
            family(name, "gauge", help_text)
            for n in nodes:
                sample(name, [("node", n.name)], get(n))
        if self.energy:
            total_w = sum(n.power for n in self.nodes)
            family("cgn_cluster_power_watts_total", "untyped", "Fleet GPU power.")
            sample("cgn_cluster_power_watts_total", [], round(total_w, 1))
            family("cgn_cluster_tokens_per_watt", "gauge", "Generated tokens per second per watt.")
            sample("cgn_cluster_tokens_per_watt", [], round(self.gen_rate / total_w, 5) if total_w > 0 else 0)
            family("cgn_cluster_node_energy_joules_total", "counter", "Energy the node's power reader counted.")
            for n in nodes:
                sample("cgn_cluster_node_energy_joules_total", [("node", n.name)], round(getattr(n, "energy_j", 0.0), 1))
            jpt = total_w / self.gen_rate if self.gen_rate > 0 else 0
            mean_w = total_w / max(1, len(self.nodes))
            family("cgn_cluster_node_joules_per_token", "gauge", "Energy per generated token of the node.")
            for n in nodes:
                sample("cgn_cluster_node_joules_per_token", [("node", n.name)], round(jpt * n.power / mean_w, 5))
            family("cgn_cluster_joules_per_token", "gauge", "Energy per generated token of the fleet.")
            sample("cgn_cluster_joules_per_token", [], round(jpt, 5))
        return ("\n".join(out) + "\n").encode()


def escape(v):
    return str(v).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def fmt(v):
    if isinstance(v, int) or (isinstance(v, float) and v.is_integer() and abs(v) < 1e15):
        return str(int(v))
    return repr(float(v))


def fmt_le(b):
    return "+Inf" if b == math.inf else repr(float(b))


def make_handler(fleet, quiet):
    class Handler(http.server.BaseHTTPRequestHandler):
        server_version = "cgn-mock-metrics"
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt_, *args):
            if not quiet:
                super().log_message(fmt_, *args)

        def _send(self, code, ctype, body, extra=()):
            self.send_response(code)
            if ctype:
                self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            for k, v in extra:
                self.send_header(k, v)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def _cors(self):
            return [("Access-Control-Allow-Origin", "*"), ("Vary", "Origin")]

        def do_OPTIONS(self):
            if self.path.split("?")[0] != "/metrics":
                return self._send(404, "text/plain", b"not found\n")
            extra = self._cors() + [
                ("Access-Control-Allow-Methods", "GET, OPTIONS"),
                ("Access-Control-Allow-Headers", self.headers.get("Access-Control-Request-Headers", "*")),
                ("Access-Control-Max-Age", "600"),
            ]
            self._send(204, None, b"", extra)

        def do_GET(self):
            path = self.path.split("?")[0]
            if path == "/metrics":
                fleet.advance()
                extra = self._cors() + [("Cache-Control", "no-store")]
                return self._send(200, CONTENT_TYPE, fleet.render(), extra)
            if path == "/":
                return self._send(302, "text/plain", b"", [("Location", "/dashboard/")])
            if path == "/dashboard" or path.startswith("/dashboard/"):
                # /dashboard itself gets the page too, as a router may serve it; the page then
                # adds the slash its relative asset URLs need.
                name = path[len("/dashboard/"):] or "index.html"
                if name in DASHBOARD_FILES:
                    with open(os.path.join(DASHBOARD_DIR, name), "rb") as f:
                        return self._send(200, DASHBOARD_FILES[name], f.read())
            self._send(404, "text/plain", b"not found\n")

        do_HEAD = do_GET

    return Handler


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--port", type=int, default=8080,
                   help="TCP port (default 8080, what the dashboard tries first); 0 picks a free one")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--nodes", type=int, default=16, help="fleet size (1..1024, default 16)")
    p.add_argument("--seed", type=int, default=1, help="random seed")
    p.add_argument("--no-energy", action="store_true",
                   help="omit the power families, like a router without power sensors")
    p.add_argument("--verbose", action="store_true", help="log every request")
    args = p.parse_args(argv)
    if not 1 <= args.nodes <= 1024:
        p.error("--nodes must be in 1..1024")
    fleet = Fleet(args.nodes, args.seed, energy=not args.no_energy)
    server = http.server.ThreadingHTTPServer((args.host, args.port), make_handler(fleet, not args.verbose))
    server.daemon_threads = True
    host, port = server.server_address[:2]
    print("mock_metrics: %d nodes on http://%s:%d/metrics (dashboard: http://%s:%d/dashboard/)"
          % (args.nodes, host, port, host, port), flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
