// Unit tests of dashboard/prom.js (Prometheus text parsing, counter increases, quantiles):
// plain node, no browser.
import assert from "node:assert/strict";
import { test } from "node:test";
import { prom } from "./harness.mjs";

test("parses families, types, help, labels with escapes, timestamps and special values", () => {
  const text = [
    "# HELP cgn_router_requests_total Requests answered.",
    "# TYPE cgn_router_requests_total counter",
    'cgn_router_requests_total{model="a",endpoint="/v1/chat/completions",code="200"} 10',
    'cgn_router_requests_total{model="q\\"uo\\\\te\\n",endpoint="/x",code="429",} 2 1700000000000',
    "# TYPE g gauge",
    "g NaN",
    "g2 +Inf",
    "g3 -Inf",
    "g4 1.5e3",
    "# a comment line",
    "",
  ].join("\r\n");
  const r = prom.parse(text);
  assert.equal(r.ok, true, JSON.stringify(r.error));
  assert.equal(r.sampleCount, 6);
  const req = r.families.get("cgn_router_requests_total");
  assert.equal(req.type, "counter");
  assert.equal(req.help, "Requests answered.");
  assert.equal(req.samples.length, 2);
  assert.deepEqual(req.samples[1].labels, { model: 'q"uo\\te\n', endpoint: "/x", code: "429" });
  assert.equal(req.samples[1].value, 2);
  assert.ok(Number.isNaN(r.families.get("g").samples[0].value));
  assert.equal(r.families.get("g2").samples[0].value, Infinity);
  assert.equal(r.families.get("g3").samples[0].value, -Infinity);
  assert.equal(r.families.get("g4").samples[0].value, 1500);
  assert.equal(r.families.get("g2").type, "untyped");
});

test("groups _bucket/_sum/_count under their histogram family", () => {
  const r = prom.parse(
    ["# TYPE h histogram", 'h_bucket{le="0.1"} 1', 'h_bucket{le="+Inf"} 3', "h_sum 0.7", "h_count 3"].join(
      "\n",
    ),
  );
  assert.equal(r.ok, true);
  assert.deepEqual([...r.families.keys()], ["h"]);
  assert.equal(r.families.get("h").samples.length, 4);
});

test("stops at # EOF (OpenMetrics)", () => {
  const r = prom.parse("a 1\n# EOF\nthis is not parsed\n");
  assert.equal(r.ok, true);
  assert.equal(r.sampleCount, 1);
});

test("rejects HTML, JSON, empty bodies and broken lines with a line number", () => {
  const cases = [
    ["<!doctype html><html><body>router</body></html>", /HTML/],
    ['{"data": []}', /JSON/],
    ["", /no metric samples/],
    ["# HELP only comments\n", /no metric samples/],
    ['ok 1\nbad{a="x} 1\n', /line 2|unterminated/],
    ["ok 1\nbad{a=x} 1\n", /expected =\"/],
    ['x{a="1",a="2"} 1', /duplicate label/],
    ["x 1 2 3", /value and an optional timestamp/],
    ["x one", /bad value/],
    ['x{a="\\q"} 1', /bad escape/],
    ["# TYPE x counter\n# TYPE x gauge\nx 1", /second # TYPE/],
    ["# TYPE x bogus\nx 1", /bad type/],
    ["x 1 notatime", /bad timestamp/],
    ["1x 1", /metric name/],
  ];
  for (const [text, re] of cases) {
    const r = prom.parse(text);
    assert.equal(r.ok, false, "should reject: " + JSON.stringify(text));
    assert.match(`line ${r.error.line}: ${r.error.message}`, re, JSON.stringify(text));
  }
  const bad = prom.parse("a 1\nb 2\nc three\n");
  assert.equal(bad.error.line, 3);
});

test("enforces its bounds", () => {
  const limits = {
    maxBytes: 64,
    maxLines: 3,
    maxSamples: 2,
    maxLabelsPerSample: 2,
    maxLabelValueLength: 8,
    maxNameLength: 10,
  };
  assert.match(prom.parse("x".repeat(65), limits).error.message, /larger than 64/);
  assert.match(prom.parse("a 1\nb 1\nc 1\n", limits).error.message, /more than 2 samples/);
  assert.match(prom.parse("\n\n\n\na 1", limits).error.message, /more than 3 lines/);
  assert.match(prom.parse('a{x="1",y="2",z="3"} 1', limits).error.message, /more than 2 labels/);
  assert.match(prom.parse('a{x="123456789"} 1', limits).error.message, /longer than 8/);
  assert.match(prom.parse("abcdefghijk 1", limits).error.message, /longer than 10/);
});

test("never throws on random bytes (seeded)", () => {
  let seed = 12345;
  const rnd = () => (seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff;
  const alphabet = 'abc_:{}="\\, \n#+-.eE0123456789InfNaTYPEHELP\tle';
  for (let i = 0; i < 3000; i++) {
    let s = "";
    const n = Math.floor(rnd() * 80);
    for (let k = 0; k < n; k++) {
      s += alphabet[Math.floor(rnd() * alphabet.length)];
    }
    const r = prom.parse(s);
    assert.equal(typeof r.ok, "boolean");
    if (!r.ok) {
      assert.equal(typeof r.error.message, "string");
    }
  }
});

test("counterValues finds an OpenMetrics counter (family x, samples x_total)", () => {
  const r = prom.parse('# TYPE req counter\nreq_total{code="200"} 7\nreq_created 1700000000\n# EOF\n');
  assert.equal(r.ok, true);
  assert.deepEqual([...prom.counterValues(r.families, "req_total").values()], [7]);
});

test("counter increase sums over series and treats a drop as a reset", () => {
  const prev = new Map([
    ["a", 10],
    ["b", 100],
    ["gone", 5],
  ]);
  const cur = new Map([
    ["a", 15],
    ["b", 3],
    ["new", 50],
  ]);
  // a: +5; b reset: +3; new: unknown history, 0.
  assert.equal(prom.increase(prev, cur), 8);
});

test("counterValues filters by label and picks the exact sample name", () => {
  const r = prom.parse(
    [
      "# TYPE r counter",
      'r{code="200"} 5',
      'r{code="503"} 2',
      "# TYPE h histogram",
      'h_bucket{le="+Inf"} 4',
      "h_sum 2",
      "h_count 4",
    ].join("\n"),
  );
  const errors = prom.counterValues(r.families, "r", (l) => l.code !== "200");
  assert.deepEqual([...errors.values()], [2]);
  assert.deepEqual([...prom.counterValues(r.families, "h", null, "h_sum").values()], [2]);
  assert.equal(prom.counterValues(r.families, "missing").size, 0);
  assert.equal(prom.gaugeSum(r.families, "missing"), null);
});

test("histogramQuantile matches Prometheus' histogram_quantile", () => {
  const b = (pairs) => pairs.map(([le, count]) => ({ le, count }));
  // 100 observations spread evenly over (0, 1]: p50 = 0.5.
  const even = b([
    [0.25, 25],
    [0.5, 50],
    [0.75, 75],
    [1, 100],
    [Infinity, 100],
  ]);
  assert.equal(prom.histogramQuantile(0.5, even), 0.5);
  assert.equal(prom.histogramQuantile(0.95, even), 0.95);
  // Interpolation inside a bucket: rank 9 of 10 falls 4/5 into (1, 2].
  assert.equal(
    prom.histogramQuantile(
      0.9,
      b([
        [1, 5],
        [2, 10],
        [Infinity, 10],
      ]),
    ),
    1.8,
  );
  // Rank in the +Inf bucket: the highest finite bound.
  assert.equal(
    prom.histogramQuantile(
      0.99,
      b([
        [1, 1],
        [2, 2],
        [Infinity, 10],
      ]),
    ),
    2,
  );
  // No observations, or no +Inf bucket: nothing to say.
  assert.equal(
    prom.histogramQuantile(
      0.5,
      b([
        [1, 0],
        [Infinity, 0],
      ]),
    ),
    null,
  );
  assert.equal(
    prom.histogramQuantile(
      0.5,
      b([
        [1, 3],
        [2, 4],
      ]),
    ),
    null,
  );
  assert.equal(prom.histogramQuantile(0.5, []), null);
  // A bucket count that dips (series scraped mid-update) is read as cumulative-max: counts
  // 4, 3, 8 become 4, 4, 8, so rank 5 lands 1/4 into (2, 3], not 2/5 as the raw dip would give.
  assert.equal(
    prom.histogramQuantile(
      0.625,
      b([
        [1, 4],
        [2, 3],
        [3, 8],
        [Infinity, 8],
      ]),
    ),
    2.25,
  );
});

test("bucketIncrease sums buckets over series between two scrapes", () => {
  const scrape = (n) =>
    prom.parse(
      [
        "# TYPE d histogram",
        `d_bucket{model="a",le="0.5"} ${n}`,
        `d_bucket{model="a",le="+Inf"} ${2 * n}`,
        `d_bucket{model="b",le="0.5"} ${3 * n}`,
        `d_bucket{model="b",le="+Inf"} ${4 * n}`,
      ].join("\n"),
    ).families;
  const inc = prom.bucketIncrease(prom.bucketValues(scrape(1), "d"), prom.bucketValues(scrape(3), "d"));
  assert.deepEqual(inc, [
    { le: 0.5, count: 2 + 6 },
    { le: Infinity, count: 4 + 8 },
  ]);
});
