// The dashboard in a real browser (Debian's chromium, headless, driven by playwright-core),
// opened from disk like an operator would, scraping the mock router (or a real one: set
// CGN_DASHBOARD_ENDPOINT, or run.sh --endpoint URL). Waits are on page state (waitForFunction
// polls), never fixed sleeps. Screenshots land in tests/browser/artifacts/.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import {
  deadPort,
  externalEndpoint,
  fetchText,
  launchBrowser,
  pageUrl,
  prom,
  screenshotPath,
  startMock,
  startServer,
} from "./harness.mjs";

const KPIS = ["kpi-nodes", "kpi-rps", "kpi-tps", "kpi-latency", "kpi-ttft", "kpi-power", "kpi-carbon", "kpi-prefix"];
const CHART_IDS = ["requests", "tokens", "latency", "ttft", "queue", "kv", "power", "energy"];
const ENERGY_CHARTS = ["power", "energy"];

let browser;
let mock = null;
let endpoint = externalEndpoint;
let expectedNodes = [];

before(async () => {
  if (!externalEndpoint) {
    mock = await startMock();
    endpoint = mock.endpoint;
  }
  // The node names the endpoint reports, read straight from it.
  const parsed = prom.parse((await fetchText(endpoint)).text);
  assert.equal(parsed.ok, true);
  const info = parsed.families.get("cgn_cluster_node_info");
  expectedNodes = info ? [...new Set(info.samples.map((s) => s.labels.node))].sort() : [];
  browser = await launchBrowser();
});

after(async () => {
  if (browser) {
    await browser.close();
  }
  if (mock) {
    await mock.stop();
  }
});

// Opens the page, collects page errors (a failing test lists them), returns {page, errors}.
async function open(url) {
  const page = await browser.newPage();
  const errors = [];
  page.on("pageerror", (e) => errors.push(e.message));
  await page.goto(url);
  return { page, errors };
}

// Waits until `n` scrapes succeeded and every series of the given charts has 2+ points.
async function waitForData(page, n, chartIds) {
  await page.waitForFunction(
    ([min, ids]) => {
      const d = window.cgnDashboard;
      if (!d || d.stats().ok < min) {
        return false;
      }
      const drawn = d.drawnPoints();
      return ids.every(
        (id) => drawn[id] && Object.values(drawn[id]).length && Object.values(drawn[id]).every((p) => p >= 2),
      );
    },
    [n, chartIds],
    { timeout: 90000, polling: 100 }, // outer bound for a loaded host
  );
}

// How many pixel columns of a chart's canvas hold a given colour (within antialiasing
// distance): proof that a line, not a dot, was drawn, read back from the canvas itself rather
// than from the page's own bookkeeping.
function colourColumns(page, chartId, hex) {
  return page.evaluate(
    ([id, color]) => {
      const c = document.querySelector("#chart-" + id + " canvas");
      const data = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
      const r = parseInt(color.slice(1, 3), 16);
      const g = parseInt(color.slice(3, 5), 16);
      const b = parseInt(color.slice(5, 7), 16);
      const columns = new Set();
      for (let i = 0; i < data.length; i += 4) {
        if (
          data[i + 3] > 200 &&
          Math.abs(data[i] - r) + Math.abs(data[i + 1] - g) + Math.abs(data[i + 2] - b) < 90
        ) {
          columns.add((i / 4) % c.width);
        }
      }
      return columns.size;
    },
    [chartId, hex],
  );
}

const bannerText = (page) =>
  page.evaluate(() => {
    const b = document.getElementById("banner");
    return b.hidden ? "" : b.innerText;
  });

test("the page loads: KPIs filled, every chart draws, the node table lists the nodes", async () => {
  const { page, errors } = await open(pageUrl({ endpoint, interval: "500" }));
  const wanted = mock ? CHART_IDS : CHART_IDS.filter((id) => !ENERGY_CHARTS.includes(id));
  await waitForData(page, 8, wanted);

  for (const id of KPIS) {
    const text = (await page.locator(`#${id} .kpi-value`).innerText()).trim();
    assert.ok(text !== "" && text !== "—", `${id} shows "${text}"`);
    if (mock) {
      assert.notEqual(text, "no data", id);
    }
  }
  const series = await page.evaluate(() => window.cgnDashboard.seriesLengths());
  const charts = await page.evaluate(() => window.cgnDashboard.charts());
  for (const c of charts.filter((c) => wanted.includes(c.id))) {
    for (const s of c.series) {
      assert.ok(series[s.key] >= 2, `${s.key} has ${series[s.key]} points`);
    }
    // 8 scrapes at 500 ms span ~3.5 s of a 60 s axis: about 20 px of a ~390 px plot.
    const cols = await colourColumns(page, c.id, c.series[0].color);
    assert.ok(cols >= 8, `chart ${c.id}: its ${c.series[0].key} colour is in only ${cols} pixel columns`);
    const legend = (await page.locator(`#chart-${c.id} .legend-value`).first().innerText()).trim();
    assert.notEqual(legend, "—", `chart ${c.id} legend`);
  }

  const rows = await page
    .locator("#node-table tbody tr")
    .evaluateAll((trs) => trs.map((tr) => tr.dataset.node));
  assert.ok(expectedNodes.length > 0, "the endpoint reports no nodes");
  assert.deepEqual([...rows].sort(), expectedNodes);
  if (mock) {
    assert.equal(rows.length, 16);
    // The mock has one node down and one cordoned; the table says so.
    assert.equal(await page.locator("#node-table tr.down").count(), 1);
    assert.equal(await page.locator("#node-table .tag.cordoned").count(), 1);
    assert.match(await page.locator("#kpi-nodes .kpi-value").innerText(), /^15\s*\/\s*16$/);
  }
  const firstRow = await page.locator("#node-table tbody tr").first().locator("td").allInnerTexts();
  assert.equal(firstRow.length, 11);
  // A real router's nodes may have no GPU identity (simulators, CPU engines): never invented,
  // so the GPU cell is only required against the mock fleet.
  assert.ok(
    firstRow.slice(0, mock ? 5 : 4).every((t) => t.trim() && t.trim() !== "—"),
    "node, model, engine, role, GPU: " + firstRow.join(" | "),
  );

  assert.equal(await bannerText(page), "");
  assert.equal(await page.locator("#status").getAttribute("data-state"), "live");
  await page.screenshot({ path: screenshotPath("dashboard.png") });
  assert.deepEqual(errors, []);
  await page.close();
});

test("deep links set the endpoint and the interval", async () => {
  for (const [given, ms, label] of [
    ["1500", 1500, "1.50 s"],
    ["2s", 2000, "2 s"],
    ["750ms", 750, "750 ms"],
  ]) {
    const { page, errors } = await open(pageUrl({ endpoint, interval: given }));
    await page.waitForFunction(() => window.cgnDashboard && window.cgnDashboard.stats().ok >= 1);
    assert.deepEqual(await page.evaluate(() => window.cgnDashboard.config()), { endpoint, intervalMs: ms });
    assert.equal(await page.locator("#endpoint").inputValue(), endpoint);
    assert.equal(await page.locator("#interval").inputValue(), String(ms));
    assert.equal(await page.locator("#interval option:checked").innerText(), label);
    assert.deepEqual(errors, []);
    await page.close();
  }
  // An unreadable interval falls back to the default and says so.
  const { page } = await open(pageUrl({ endpoint, interval: "fast" }));
  await page.waitForFunction(() => window.cgnDashboard && window.cgnDashboard.stats().ok >= 1);
  assert.equal((await page.evaluate(() => window.cgnDashboard.config())).intervalMs, 2000);
  assert.match(await bannerText(page), /ignored interval=fast/);
  await page.close();
});

test("connecting from the form rewrites the deep link", async () => {
  const port = await deadPort();
  const { page } = await open(pageUrl({ endpoint: `http://127.0.0.1:${port}/metrics`, interval: "500" }));
  await page.waitForFunction(() => window.cgnDashboard && window.cgnDashboard.stats().failed >= 1);
  await page.locator("#endpoint").fill(endpoint);
  await page.locator("#apply").click();
  await page.waitForFunction(() => window.cgnDashboard.stats().ok >= 1);
  const q = new URL(page.url()).searchParams;
  assert.equal(q.get("endpoint"), endpoint);
  assert.equal(q.get("interval"), "500");
  assert.equal(await bannerText(page), "");
  await page.close();
});

test("a dead endpoint shows a visible error", async () => {
  const port = await deadPort();
  const dead = `http://127.0.0.1:${port}/metrics`;
  const { page, errors } = await open(pageUrl({ endpoint: dead, interval: "500" }));
  await page.locator("#banner").waitFor({ state: "visible" });
  const text = await bannerText(page);
  assert.match(text, /Endpoint unreachable/);
  assert.ok(text.includes(dead), text);
  assert.equal(await page.locator("#status").getAttribute("data-state"), "error");
  assert.equal(await page.evaluate(() => window.cgnDashboard.stats().lastError), "unreachable");
  await page.screenshot({ path: screenshotPath("dead-endpoint.png") });
  assert.deepEqual(errors, []);
  await page.close();
});

test("an endpoint that is not Prometheus text shows a visible error", async () => {
  const html = await startServer((req, res) => {
    res.writeHead(200, { "Content-Type": "text/html", "Access-Control-Allow-Origin": "*" });
    res.end("<!doctype html><html><body><h1>Welcome to nginx!</h1></body></html>\n");
  });
  try {
    const { page, errors } = await open(pageUrl({ endpoint: html.url, interval: "500" }));
    await page.locator("#banner").waitFor({ state: "visible" });
    const text = await bannerText(page);
    assert.match(text, /Not Prometheus text/);
    assert.match(text, /HTML/);
    assert.deepEqual(errors, []);
    await page.close();
  } finally {
    await html.close();
  }
});

test("Prometheus text without cgn_ series is read, with a warning that it is not Cognitora's", async () => {
  const other = await startServer((req, res) => {
    res.writeHead(200, { "Content-Type": "text/plain; version=0.0.4", "Access-Control-Allow-Origin": "*" });
    res.end(
      "# TYPE up gauge\nup 1\n# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total 12.5\n",
    );
  });
  try {
    const { page, errors } = await open(pageUrl({ endpoint: other.url, interval: "500" }));
    await page.locator("#banner").waitFor({ state: "visible" });
    assert.match(await bannerText(page), /No Cognitora metrics/);
    assert.equal(await page.locator("#banner").getAttribute("data-level"), "warn");
    assert.equal(await page.locator("#status").getAttribute("data-state"), "live");
    assert.equal(await page.locator("#nodes-empty").isVisible(), true);
    assert.deepEqual(errors, []);
    await page.close();
  } finally {
    await other.close();
  }
});

test("a refused CORS request and an HTTP error are told apart from a dead endpoint", async () => {
  const body = (await fetchText(endpoint)).text;
  const noCors = await startServer((req, res) => {
    res.writeHead(200, { "Content-Type": "text/plain; version=0.0.4" });
    res.end(body);
  });
  const notFound = await startServer((req, res) => {
    res.writeHead(404, { "Content-Type": "text/plain", "Access-Control-Allow-Origin": "*" });
    res.end("not found\n");
  });
  try {
    for (const [url, re, kind] of [
      [noCors.url, /Blocked by CORS/, "cors"],
      [notFound.url, /HTTP 404/, "http"],
    ]) {
      const { page, errors } = await open(pageUrl({ endpoint: url, interval: "500" }));
      await page.locator("#banner").waitFor({ state: "visible" });
      assert.match(await bannerText(page), re);
      assert.equal(await page.evaluate(() => window.cgnDashboard.stats().lastError), kind);
      assert.deepEqual(errors, []);
      await page.close();
    }
  } finally {
    await noCors.close();
    await notFound.close();
  }
});

test("an outage keeps the last data on screen, marked stale, and recovers", async () => {
  // A switchable pass-through to the endpoint: up, it relays the scrape; down, it drops the
  // connection the way a crashed router does.
  let up = true;
  const relay = await startServer(async (req, res) => {
    if (!up) {
      req.socket.destroy();
      return;
    }
    const r = await fetchText(endpoint);
    res.writeHead(r.status, {
      "Content-Type": "text/plain; version=0.0.4",
      "Access-Control-Allow-Origin": "*",
    });
    res.end(r.text);
  });
  try {
    const { page, errors } = await open(pageUrl({ endpoint: relay.url, interval: "500" }));
    await waitForData(page, 3, ["requests"]);
    up = false;
    await page.locator("#banner").waitFor({ state: "visible" });
    assert.match(await bannerText(page), /Endpoint unreachable/);
    assert.equal(await page.evaluate(() => document.body.classList.contains("stale")), true);
    assert.equal(
      await page.locator("#node-table tbody tr").count(),
      expectedNodes.length,
      "rows stay during the outage",
    );
    assert.match(await page.locator("#status-text").innerText(), /stale since/);
    const okBefore = await page.evaluate(() => window.cgnDashboard.stats().ok);
    up = true;
    await page.waitForFunction((n) => window.cgnDashboard.stats().ok > n, okBefore);
    await page.locator("#banner").waitFor({ state: "hidden" });
    assert.equal(await page.evaluate(() => document.body.classList.contains("stale")), false);
    assert.equal(await page.locator("#status").getAttribute("data-state"), "live");
    assert.deepEqual(errors, []);
    await page.close();
  } finally {
    await relay.close();
  }
});

test(
  "without energy metrics, power and J/token say no data",
  { skip: !!externalEndpoint && "mock only" },
  async () => {
    const m = await startMock(["--no-energy"]);
    try {
      const { page, errors } = await open(pageUrl({ endpoint: m.endpoint, interval: "500" }));
      await waitForData(page, 3, ["requests", "latency"]);
      assert.equal((await page.locator("#kpi-power .kpi-value").innerText()).trim(), "no data");
      const drawn = await page.evaluate(() => window.cgnDashboard.drawnPoints());
      assert.deepEqual(drawn.power, { power: 0, power_cap: 0 });
      assert.deepEqual(drawn.energy, { j_per_token: 0 });
      assert.equal(await colourColumns(page, "power", "#34d399"), 0);
      assert.equal(await page.locator("#node-table tbody tr").count(), 16);
      assert.deepEqual(errors, []);
      await page.close();
    } finally {
      await m.stop();
    }
  },
);

test(
  "served over HTTP at /dashboard or /dashboard/, it scrapes its own origin's /metrics",
  { skip: !!externalEndpoint && "the router's /dashboard is checked by its own tests" },
  async () => {
    for (const path of ["/dashboard/", "/dashboard"]) {
      const { page, errors } = await open(`${mock.origin}${path}?interval=500`);
      await waitForData(page, 2, ["requests"]);
      assert.equal(
        (await page.evaluate(() => window.cgnDashboard.config())).endpoint,
        `${mock.origin}/metrics`,
      );
      assert.equal(new URL(page.url()).pathname, "/dashboard/");
      assert.equal(await page.locator("#node-table tbody tr").count(), 16);
      // The stylesheet loaded: the dark theme is on.
      assert.equal(
        await page.evaluate(() => getComputedStyle(document.body).backgroundColor),
        "rgb(10, 14, 20)",
      );
      assert.deepEqual(errors, []);
      await page.close();
    }
  },
);
