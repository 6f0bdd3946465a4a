// The metric-name contract (dashboard/metric_names.txt, from docs/design/principles.md).
// Against the mock: it emits only listed families, with exactly the listed types and labels, and
// well-formed values; /metrics answers CORS like the router. Against a real router
// (CGN_DASHBOARD_ENDPOINT, or run.sh --endpoint): it emits every listed family, so everything the
// mock emits is something a real router emits too.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { externalEndpoint, fetchText, metricContract, prom, startMock } from "./harness.mjs";

const contract = metricContract();
let mock = null;
let endpoint = externalEndpoint;

before(async () => {
  if (!externalEndpoint) {
    mock = await startMock();
    endpoint = mock.endpoint;
  }
});
after(async () => {
  if (mock) {
    await mock.stop();
  }
});

async function scrape(url) {
  const r = await fetchText(url);
  assert.equal(r.status, 200);
  const parsed = prom.parse(r.text);
  assert.equal(parsed.ok, true, parsed.error && JSON.stringify(parsed.error));
  return { ...r, families: parsed.families };
}

// Labelled counters whose series appear with the first event of their kind, which the plain
// chat workload of scripts/browser-vs-router.sh does not cause. Every other family must have
// samples; the mock must have samples for all of them.
const eventOnly = new Map([
  ["cgn_router_admission_rejections_total", "no admission caps in that run"],
  ["cgn_router_pd_legs_total", "no prefill/decode nodes in that run"],
  ["cgn_router_cascade_steps_total", "no [router.cascade] alias in that run"],
  ["cgn_router_cascade_gate_seconds", "no [router.cascade] alias in that run"],
  ["cgn_router_retries_total", "no upstream failure in that run"],
  ["cgn_router_rejections_total", "no request refused at intake in that run"],
  ["cgn_router_federation_forwards_total", "no federation peers in that run"],
  ["cgn_router_grpc_requests_total", "no gRPC call in that run"],
  ["cgn_router_state_events_total", "static nodes, no state backend events"],
  // Unknown power is absent, never 0 W: the simulators report no power, so these have no sample.
  ["cgn_cluster_node_power_watts", "no node reports power in that run"],
  ["cgn_cluster_power_watts_total", "no node reports power in that run"],
  ["cgn_cluster_tokens_per_watt", "no node reports power in that run"],
  ["cgn_cluster_node_watt_limit", "no node reports a power limit in that run"],
  ["cgn_cluster_node_energy_joules_total", "no node reports an energy counter in that run"],
  ["cgn_cluster_node_joules_per_token", "no node reports an energy counter in that run"],
  ["cgn_cluster_joules_per_token", "no node reports an energy counter in that run"],
  // Without a [router.carbon] provider the carbon gate is off and reports nothing.
  ["cgn_router_carbon_intensity_gco2_per_kwh", "no [router.carbon] provider in that run"],
  ["cgn_router_carbon_reading_age_seconds", "no [router.carbon] provider in that run"],
  ["cgn_router_carbon_gate_state", "no [router.carbon] provider in that run"],
  ["cgn_router_carbon_poll_failures_total", "no [router.carbon] provider in that run"],
]);

// The label names a sample carries, without the histogram's le.
function labelSet(sample) {
  return Object.keys(sample.labels)
    .filter((k) => k !== "le")
    .sort();
}

test("metric_names.txt lists the design principles' families with valid types", () => {
  assert.ok(contract.size >= 21, "expected the 21 router and cluster families");
  for (const [name, c] of contract) {
    assert.match(name, /^cgn_(router|cluster)_[a-z0-9_]+$/);
    assert.ok(["counter", "gauge", "histogram", "untyped"].includes(c.type), name + ": " + c.type);
    if (c.type === "counter") {
      assert.match(name, /_total$/, name + ": counters end in _total");
    }
  }
});

test(
  "every family the mock emits is in metric_names.txt, with its type and labels",
  { skip: !!externalEndpoint && "real router: see the next test" },
  async () => {
    const { families } = await scrape(endpoint);
    for (const [name, fam] of families) {
      const c = contract.get(name);
      assert.ok(c, `the mock emits ${name}, which metric_names.txt (the router's list) does not have`);
      assert.equal(fam.type, c.type, name + " type");
      const suffixes = c.type === "histogram" ? ["_bucket", "_sum", "_count"] : [""];
      for (const s of fam.samples) {
        assert.ok(
          suffixes.some((x) => s.name === name + x),
          `${s.name} is not a series of ${name}`,
        );
        assert.deepEqual(labelSet(s), c.labels, `${s.name} labels`);
        if (s.name.endsWith("_bucket")) {
          assert.ok("le" in s.labels, s.name + " without le");
        }
      }
    }
    // And the mock shows the dashboard everything it can draw: every family with samples, not
    // just its HELP and TYPE lines.
    assert.deepEqual([...families.keys()].sort(), [...contract.keys()].sort());
    for (const [name, fam] of families) {
      assert.ok(fam.samples.length > 0, `the mock emits ${name} with HELP/TYPE lines but no sample`);
    }
  },
);

test(
  "the router emits every family in metric_names.txt, and no other cgn_router_/cgn_cluster_ one",
  { skip: !externalEndpoint && "no CGN_DASHBOARD_ENDPOINT: the mock is checked above" },
  async () => {
    const { families } = await scrape(endpoint);
    for (const [name, c] of contract) {
      const fam = families.get(name);
      assert.ok(fam, `the router does not emit ${name}`);
      assert.equal(fam.type, c.type, name + " type");
      // A family with HELP and TYPE lines only proves nothing about its labels or values.
      if (fam.samples.length === 0 && eventOnly.has(name)) {
        console.log(`# ${name}: no sample yet (${eventOnly.get(name)})`);
        continue;
      }
      assert.ok(fam.samples.length > 0, `the router emits ${name} with HELP/TYPE lines but no sample`);
      for (const s of fam.samples) {
        assert.deepEqual(labelSet(s), c.labels, `${s.name} labels`);
      }
    }
    for (const name of families.keys()) {
      if (/^cgn_(router|cluster)_/.test(name)) {
        assert.ok(contract.has(name), `${name} is emitted but missing from metric_names.txt`);
      }
    }
  },
);

test("counters never fall and histograms are consistent across scrapes", async () => {
  const first = await scrape(endpoint);
  const second = await scrape(endpoint);
  for (const [name, c] of contract) {
    if (c.type === "counter") {
      const a = prom.counterValues(first.families, name);
      const b = prom.counterValues(second.families, name);
      for (const [key, v] of b) {
        assert.ok(v >= 0 && Number.isFinite(v), key);
        if (a.has(key)) {
          assert.ok(v >= a.get(key), `${key} fell from ${a.get(key)} to ${v}`);
        }
      }
    }
    if (c.type === "histogram") {
      const fam = second.families.get(name);
      if (!fam) {
        continue;
      }
      const bySeries = new Map();
      for (const s of fam.samples) {
        const key = prom.seriesKey({ name: "", labels: s.labels }, ["le"]);
        if (!bySeries.has(key)) {
          bySeries.set(key, { buckets: [], count: null });
        }
        const e = bySeries.get(key);
        if (s.name.endsWith("_bucket")) {
          e.buckets.push({ le: prom.parseValue(s.labels.le), count: s.value });
        } else if (s.name.endsWith("_count")) {
          e.count = s.value;
        }
      }
      for (const [key, e] of bySeries) {
        e.buckets.sort((x, y) => x.le - y.le);
        for (let i = 1; i < e.buckets.length; i++) {
          assert.ok(e.buckets[i].count >= e.buckets[i - 1].count, `${name}${key}: buckets not cumulative`);
        }
        const inf = e.buckets[e.buckets.length - 1];
        assert.equal(inf.le, Infinity, `${name}${key}: no +Inf bucket`);
        assert.equal(inf.count, e.count, `${name}${key}: +Inf bucket != _count`);
      }
    }
  }
});

test("/metrics answers CORS: a header on GET and an OPTIONS preflight", async () => {
  const get = await fetchText(endpoint);
  assert.equal(get.headers.get("access-control-allow-origin"), "*");
  assert.match(get.headers.get("content-type") || "", /^text\/plain/);
  const pre = await fetch(endpoint, {
    method: "OPTIONS",
    headers: {
      Origin: "null",
      "Access-Control-Request-Method": "GET",
      "Access-Control-Request-Headers": "accept",
    },
  });
  assert.ok(pre.status === 200 || pre.status === 204, "preflight status " + pre.status);
  assert.equal(pre.headers.get("access-control-allow-origin"), "*");
  assert.match(pre.headers.get("access-control-allow-methods") || "", /GET/);
});

test(
  "the mock's fleet: 16 mixed nodes by default, --nodes resizes it",
  { skip: !!externalEndpoint && "mock only" },
  async () => {
    const { families } = await scrape(endpoint);
    const info = families.get("cgn_cluster_node_info").samples.map((s) => s.labels);
    assert.equal(new Set(info.map((l) => l.node)).size, 16);
    assert.ok(new Set(info.map((l) => l.gpu_name)).size >= 5, "mixed GPUs");
    assert.deepEqual([...new Set(info.map((l) => l.engine))].sort(), [
      "llamacpp",
      "sglang",
      "trtllm",
      "vllm",
    ]);
    assert.deepEqual([...new Set(info.map((l) => l.role))].sort(), ["both", "decode", "prefill"]);
    const big = await startMock(["--nodes", "40"]);
    try {
      const r = await scrape(big.endpoint);
      const nodes = new Set(r.families.get("cgn_cluster_node_info").samples.map((s) => s.labels.node));
      assert.equal(nodes.size, 40);
      assert.equal(r.families.get("cgn_cluster_node_up").samples.length, 40);
    } finally {
      await big.stop();
    }
  },
);

test(
  "the mock without power sensors (--no-energy) omits exactly the energy families",
  { skip: !!externalEndpoint && "mock only" },
  async () => {
    const m = await startMock(["--no-energy"]);
    try {
      const { families } = await scrape(m.endpoint);
      const energy = [
        "cgn_cluster_node_power_watts",
        "cgn_cluster_node_watt_limit",
        "cgn_cluster_power_watts_total",
        "cgn_cluster_tokens_per_watt",
        "cgn_cluster_node_energy_joules_total",
        "cgn_cluster_node_joules_per_token",
        "cgn_cluster_joules_per_token",
      ];
      for (const name of energy) {
        assert.ok(!families.has(name), name);
      }
      assert.equal(families.size, contract.size - energy.length);
    } finally {
      await m.stop();
    }
  },
);
