// Cognitora fleet dashboard: polls one /metrics endpoint, keeps ring buffers, draws canvas
// charts, a KPI strip and the node table. No build step, no dependencies: prom.js (loaded
// first) parses the Prometheus text. Everything runs on the page's one thread; one poll is in
// flight at a time, and a reconnect bumps `generation` so a late answer from the old endpoint is
// dropped. Label values are outside bytes: they reach the page only through textContent.
(function () {
  "use strict";

  const P = window.CgnProm;
  const DEFAULT_INTERVAL_MS = 2000;
  const MIN_INTERVAL_MS = 250;
  const MAX_INTERVAL_MS = 60000;
  const INTERVAL_CHOICES = [500, 1000, 2000, 5000, 10000, 30000];
  const DEFAULT_FILE_ENDPOINT = "http://127.0.0.1:8080/metrics";
  const MAX_WINDOW_MS = 15 * 60 * 1000; // the widest span a chart shows
  const MIN_WINDOW_MS = 60 * 1000; // a fresh page still shows a minute, so lines grow from the right
  const RING_CAPACITY = Math.ceil(MAX_WINDOW_MS / MIN_INTERVAL_MS);
  const MAX_BODY_BYTES = P.DEFAULT_LIMITS.maxBytes;
  const MAX_TABLE_ROWS = 2000;
  const COLORS = {
    cyan: "#38bdf8",
    violet: "#a78bfa",
    green: "#34d399",
    amber: "#fbbf24",
    red: "#f87171",
    pink: "#f472b6",
  };

  // ---- formatting -------------------------------------------------------------------------

  function fmtNum(v) {
    if (v === null || !Number.isFinite(v)) {
      return "—";
    }
    const a = Math.abs(v);
    if (a >= 1e9) {
      return (v / 1e9).toFixed(a >= 1e10 ? 0 : 1) + "G";
    }
    if (a >= 1e6) {
      return (v / 1e6).toFixed(a >= 1e7 ? 0 : 1) + "M";
    }
    if (a >= 1e4) {
      return (v / 1e3).toFixed(a >= 1e5 ? 0 : 1) + "k";
    }
    if (a >= 100) {
      return Math.round(v).toString();
    }
    if (a >= 10) {
      return Number.isInteger(v) ? String(v) : v.toFixed(1);
    }
    if (a === 0 || Number.isInteger(v)) {
      return String(v);
    }
    return v.toFixed(a >= 1 ? 2 : a >= 0.01 ? 3 : 4).replace(/\.?0+$/, "");
  }
  function splitSeconds(v) {
    if (v === null || !Number.isFinite(v)) {
      return ["—", ""];
    }
    if (v === 0) {
      return ["0", ""];
    }
    if (v < 1e-3) {
      return [fmtNum(v * 1e6), "µs"];
    }
    if (v < 1) {
      return [fmtNum(v * 1e3), "ms"];
    }
    return [v < 10 ? v.toFixed(2).replace(/\.?0+$/, "") : fmtNum(v), "s"];
  }
  function splitWatts(v) {
    if (v === null || !Number.isFinite(v)) {
      return ["—", ""];
    }
    return Math.abs(v) >= 1000
      ? [(v / 1000).toFixed(v >= 1e5 ? 0 : 1), "kW"]
      : [Math.round(v).toString(), "W"];
  }
  const fmtSeconds = (v) => splitSeconds(v).join(" ").trim();
  const fmtWatts = (v) => splitWatts(v).join(" ").trim();
  const fmtPct = (v) =>
    v === null || !Number.isFinite(v) ? "—" : (v >= 10 || v === 0 ? Math.round(v) : v.toFixed(1)) + " %";
  const fmtJoules = (v) => (v === null || !Number.isFinite(v) ? "—" : fmtNum(v) + " J");
  function fmtInterval(ms) {
    return ms < 1000 ? ms + " ms" : ms % 1000 === 0 ? ms / 1000 + " s" : (ms / 1000).toFixed(2) + " s";
  }
  function fmtClock(ms) {
    const d = new Date(ms);
    return [d.getHours(), d.getMinutes(), d.getSeconds()].map((n) => String(n).padStart(2, "0")).join(":");
  }

  // ---- configuration from the URL (deep links) ---------------------------------------------

  // "500", "500ms", "2s", "1.5s" -> milliseconds, clamped; null when unreadable.
  function parseInterval(text) {
    const m = /^\s*(\d+(?:\.\d+)?)\s*(ms|s)?\s*$/i.exec(text || "");
    if (!m) {
      return null;
    }
    const ms = Number(m[1]) * (m[2] && m[2].toLowerCase() === "s" ? 1000 : 1);
    return Math.round(Math.min(MAX_INTERVAL_MS, Math.max(MIN_INTERVAL_MS, ms)));
  }

  function defaultEndpoint() {
    if (location.protocol === "http:" || location.protocol === "https:") {
      return new URL("/metrics", location.href).href; // served by the router at /dashboard
    }
    return DEFAULT_FILE_ENDPOINT;
  }

  // An http(s) URL; "host:port" alone gets /metrics.
  function normaliseEndpoint(text) {
    let s = (text || "").trim();
    if (!s) {
      return null;
    }
    if (!/^[a-z][a-z0-9+.-]*:\/\//i.test(s)) {
      s = "http://" + s;
    }
    let u;
    try {
      u = new URL(s);
    } catch (e) {
      return null;
    }
    if (u.protocol !== "http:" && u.protocol !== "https:") {
      return null;
    }
    if (u.pathname === "/" && !u.search) {
      u.pathname = "/metrics";
    }
    return u.href;
  }

  function readConfig() {
    const q = new URLSearchParams(location.search);
    const notes = [];
    let endpoint = defaultEndpoint();
    if (q.has("endpoint")) {
      const e = normaliseEndpoint(q.get("endpoint"));
      if (e) {
        endpoint = e;
      } else {
        notes.push(
          "ignored endpoint=" + q.get("endpoint").slice(0, 80) + " (not an http:// or https:// URL)",
        );
      }
    }
    let intervalMs = DEFAULT_INTERVAL_MS;
    if (q.has("interval")) {
      const i = parseInterval(q.get("interval"));
      if (i) {
        intervalMs = i;
      } else {
        notes.push("ignored interval=" + q.get("interval").slice(0, 40) + " (use e.g. 500, 500ms or 2s)");
      }
    }
    return { endpoint, intervalMs, notes };
  }

  // ---- ring buffers -------------------------------------------------------------------------

  // Fixed-capacity (time, value) buffer; NaN marks a gap (a failed scrape, a missing metric).
  class Ring {
    constructor(capacity) {
      this.cap = capacity;
      this.t = new Float64Array(capacity);
      this.v = new Float64Array(capacity);
      this.start = 0;
      this.length = 0;
    }
    push(t, v) {
      const i = (this.start + this.length) % this.cap;
      this.t[i] = t;
      this.v[i] = v === null || v === undefined ? NaN : v;
      if (this.length < this.cap) {
        this.length++;
      } else {
        this.start = (this.start + 1) % this.cap;
      }
    }
    time(k) {
      return this.t[(this.start + k) % this.cap];
    }
    value(k) {
      return this.v[(this.start + k) % this.cap];
    }
    // The newest real value (skipping gaps), or NaN.
    lastFinite() {
      for (let k = this.length - 1; k >= 0; k--) {
        const v = this.value(k);
        if (Number.isFinite(v)) {
          return v;
        }
      }
      return NaN;
    }
    finiteCount() {
      let n = 0;
      for (let k = 0; k < this.length; k++) {
        if (Number.isFinite(this.value(k))) {
          n++;
        }
      }
      return n;
    }
    clear() {
      this.start = 0;
      this.length = 0;
    }
  }

  // ---- charts ---------------------------------------------------------------------------------

  const CHARTS = [
    {
      id: "requests",
      title: "Requests / s",
      fmt: fmtNum,
      series: [
        { key: "rps", label: "total", color: COLORS.cyan, fill: true },
        { key: "rps_err", label: "errors", color: COLORS.red },
      ],
    },
    {
      id: "tokens",
      title: "Tokens / s",
      fmt: fmtNum,
      series: [
        { key: "tps_gen", label: "generated", color: COLORS.violet, fill: true },
        { key: "tps_prompt", label: "prompt", color: COLORS.cyan },
      ],
    },
    {
      id: "latency",
      title: "Request latency",
      fmt: fmtSeconds,
      series: [
        { key: "lat_p50", label: "p50", color: COLORS.green, fill: true },
        { key: "lat_p95", label: "p95", color: COLORS.amber },
      ],
    },
    {
      id: "ttft",
      title: "Time to first token",
      fmt: fmtSeconds,
      series: [
        { key: "ttft_p95", label: "p95", color: COLORS.pink, fill: true },
        { key: "ttft_p50", label: "p50", color: COLORS.violet },
      ],
    },
    {
      id: "queue",
      title: "Queue depth",
      fmt: fmtNum,
      series: [
        { key: "queue", label: "fleet", color: COLORS.amber, fill: true },
        { key: "queue_max", label: "worst node", color: COLORS.red },
      ],
    },
    {
      id: "kv",
      title: "KV cache used",
      fmt: fmtPct,
      yMax: 100,
      series: [
        { key: "kv_mean", label: "mean", color: COLORS.cyan, fill: true },
        { key: "kv_max", label: "max", color: COLORS.amber },
      ],
    },
    {
      id: "power",
      title: "Power vs cap",
      fmt: fmtWatts,
      noData: "no energy metrics at this endpoint",
      series: [
        { key: "power", label: "draw", color: COLORS.green, fill: true },
        { key: "power_cap", label: "cap", color: COLORS.red, dash: [5, 4] },
      ],
    },
    {
      id: "energy",
      title: "Energy per token",
      fmt: fmtJoules,
      noData: "no energy metrics at this endpoint",
      series: [{ key: "j_per_token", label: "J / token", color: COLORS.violet, fill: true }],
    },
  ];

  // The smallest "round" top of a 4-step axis that holds v (step = 1, 1.5, 2, ... 8 x 10^n).
  function niceAxisMax(v) {
    if (!(v > 0)) {
      return 4;
    }
    const step = v / 4;
    const exp = Math.pow(10, Math.floor(Math.log10(step)));
    for (const m of [1, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10]) {
      if (m * exp >= step) {
        return 4 * m * exp;
      }
    }
    return 40 * exp;
  }
  function timeStep(spanMs) {
    for (const s of [10e3, 15e3, 30e3, 60e3, 120e3, 300e3, 600e3]) {
      if (spanMs / s <= 5) {
        return s;
      }
    }
    return 900e3;
  }
  function fmtAgo(ms) {
    if (ms < 500) {
      return "now";
    }
    return ms < 60e3 ? "-" + Math.round(ms / 1000) + "s" : "-" + Math.round(ms / 60e3) + "m";
  }

  function buildChart(def, parent) {
    const card = document.createElement("div");
    card.className = "chart";
    card.id = "chart-" + def.id;
    const head = document.createElement("div");
    head.className = "chart-head";
    const title = document.createElement("div");
    title.className = "chart-title";
    title.textContent = def.title;
    const legend = document.createElement("div");
    legend.className = "legend";
    const values = {};
    for (const s of def.series) {
      const item = document.createElement("span");
      item.className = "legend-item";
      const sw = document.createElement("span");
      sw.className = "legend-swatch" + (s.dash ? " dashed" : "");
      sw.style.background = s.color;
      sw.style.color = s.color;
      const label = document.createElement("span");
      label.textContent = s.label;
      const value = document.createElement("span");
      value.className = "legend-value";
      value.dataset.series = s.key;
      value.textContent = "—";
      item.append(sw, label, value);
      legend.append(item);
      values[s.key] = value;
    }
    head.append(title, legend);
    const canvas = document.createElement("canvas");
    canvas.setAttribute("role", "img");
    canvas.setAttribute("aria-label", def.title);
    card.append(head, canvas);
    parent.append(card);
    return { def, card, canvas, values, drawn: {}, noDataReason: "" };
  }

  function drawChart(chart, rings, tEnd) {
    const { canvas, def } = chart;
    const w = canvas.clientWidth;
    const h = canvas.clientHeight;
    if (!w || !h) {
      return;
    }
    const dpr = window.devicePixelRatio || 1;
    if (canvas.width !== Math.round(w * dpr) || canvas.height !== Math.round(h * dpr)) {
      canvas.width = Math.round(w * dpr);
      canvas.height = Math.round(h * dpr);
    }
    const ctx = canvas.getContext("2d");
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, w, h);
    chart.drawn = {};

    let oldest = tEnd;
    for (const s of def.series) {
      const r = rings[s.key];
      if (r.length) {
        oldest = Math.min(oldest, r.time(0));
      }
    }
    const tStart = Math.max(tEnd - MAX_WINDOW_MS, Math.min(oldest, tEnd - MIN_WINDOW_MS));
    let maxV = 0;
    let any = false;
    for (const s of def.series) {
      const r = rings[s.key];
      for (let k = 0; k < r.length; k++) {
        const v = r.value(k);
        if (Number.isFinite(v) && r.time(k) >= tStart) {
          maxV = Math.max(maxV, v);
          any = true;
        }
      }
    }
    // Canvas sizes follow the page's rem (14 px at 1920 px wide, larger on a 4K wall).
    const scale = parseFloat(getComputedStyle(document.documentElement).fontSize) / 14 || 1;
    const px = (n) => Math.round(n * scale);
    const yMax = def.yMax || niceAxisMax(maxV * 1.08);
    const ticks = [0, 1, 2, 3, 4].map((i) => (yMax * i) / 4);
    ctx.font = px(11) + "px system-ui, sans-serif";
    const showTicks = any || !!def.yMax;
    const labelW = showTicks ? Math.max(...ticks.map((v) => ctx.measureText(def.fmt(v)).width)) : 0;
    const padL = Math.max(px(36), Math.ceil(labelW) + px(14));
    const padR = px(10);
    const padT = px(8);
    const padB = px(20);
    const pw = w - padL - padR;
    const ph = h - padT - padB;
    const x = (t) => padL + ((t - tStart) / (tEnd - tStart || 1)) * pw;
    const y = (v) => padT + ph - (Math.min(v, yMax) / yMax) * ph;

    ctx.textBaseline = "middle";
    ctx.lineWidth = 1;
    for (const v of ticks) {
      const yy = Math.round(y(v)) + 0.5;
      ctx.strokeStyle = v === 0 ? "#263344" : "#18222e";
      ctx.beginPath();
      ctx.moveTo(padL, yy);
      ctx.lineTo(w - padR, yy);
      ctx.stroke();
      if (showTicks) {
        ctx.fillStyle = "#6b7a8c";
        ctx.textAlign = "right";
        ctx.fillText(def.fmt(v), padL - px(8), yy);
      }
    }
    const step = timeStep(tEnd - tStart);
    ctx.fillStyle = "#6b7a8c";
    ctx.textBaseline = "alphabetic";
    for (let ago = 0; ago <= tEnd - tStart + 1; ago += step) {
      const xx = x(tEnd - ago);
      if (xx < padL + px(14)) {
        break;
      }
      ctx.textAlign = ago === 0 ? "right" : "center";
      ctx.fillText(fmtAgo(ago), ago === 0 ? w - padR : xx, h - px(5));
    }

    if (!any) {
      ctx.textAlign = "center";
      ctx.textBaseline = "middle";
      ctx.fillStyle = "#7b8898";
      ctx.font = "600 " + px(15) + "px system-ui, sans-serif";
      ctx.fillText("no data", padL + pw / 2, padT + ph / 2 - px(8));
      ctx.font = px(12) + "px system-ui, sans-serif";
      ctx.fillStyle = "#5d6b7b";
      ctx.fillText(chart.noDataReason || "waiting for samples", padL + pw / 2, padT + ph / 2 + px(12));
      for (const s of def.series) {
        chart.drawn[s.key] = 0;
      }
      return;
    }

    // Later series first, so the first (filled) one stays on top.
    for (const s of [...def.series].reverse()) {
      const r = rings[s.key];
      const segments = [];
      let seg = [];
      for (let k = 0; k < r.length; k++) {
        const t = r.time(k);
        const v = r.value(k);
        if (t < tStart) {
          continue;
        }
        if (Number.isFinite(v)) {
          seg.push([x(t), y(v)]);
        } else if (seg.length) {
          segments.push(seg);
          seg = [];
        }
      }
      if (seg.length) {
        segments.push(seg);
      }
      let points = 0;
      for (const pts of segments) {
        points += pts.length;
        if (s.fill && pts.length > 1) {
          const grad = ctx.createLinearGradient(0, padT, 0, padT + ph);
          grad.addColorStop(0, s.color + "55");
          grad.addColorStop(1, s.color + "05");
          ctx.fillStyle = grad;
          ctx.beginPath();
          ctx.moveTo(pts[0][0], padT + ph);
          for (const [px, py] of pts) {
            ctx.lineTo(px, py);
          }
          ctx.lineTo(pts[pts.length - 1][0], padT + ph);
          ctx.closePath();
          ctx.fill();
        }
        ctx.strokeStyle = s.color;
        ctx.lineWidth = (s.fill ? 2 : 1.6) * scale;
        ctx.lineJoin = "round";
        ctx.setLineDash(s.dash || []);
        ctx.beginPath();
        if (pts.length === 1) {
          ctx.arc(pts[0][0], pts[0][1], 2 * scale, 0, 2 * Math.PI);
          ctx.fillStyle = s.color;
          ctx.fill();
        } else {
          ctx.moveTo(pts[0][0], pts[0][1]);
          for (const [px, py] of pts.slice(1)) {
            ctx.lineTo(px, py);
          }
          ctx.stroke();
        }
        ctx.setLineDash([]);
      }
      chart.drawn[s.key] = points;
    }
  }

  // ---- scraping -----------------------------------------------------------------------------

  async function readBounded(resp, maxBytes) {
    const declared = Number(resp.headers.get("content-length"));
    if (declared > maxBytes) {
      return { error: "body of " + declared + " bytes is over the " + maxBytes + "-byte limit" };
    }
    if (!resp.body || !resp.body.getReader) {
      const text = await resp.text();
      return text.length > maxBytes ? { error: "body over the " + maxBytes + "-byte limit" } : { text };
    }
    const reader = resp.body.getReader();
    const decoder = new TextDecoder();
    let text = "";
    let bytes = 0;
    for (;;) {
      const { done, value } = await reader.read();
      if (done) {
        break;
      }
      bytes += value.byteLength;
      if (bytes > maxBytes) {
        reader.cancel();
        return { error: "body over the " + maxBytes + "-byte limit" };
      }
      text += decoder.decode(value, { stream: true });
    }
    return { text: text + decoder.decode() };
  }

  // One scrape. Resolves to {ok, families, bytes} or {ok: false, kind, message}; never rejects.
  async function scrape(url, timeoutMs) {
    const ctrl = new AbortController();
    const timer = setTimeout(() => ctrl.abort(), timeoutMs);
    try {
      let resp;
      try {
        resp = await fetch(url, { cache: "no-store", signal: ctrl.signal, credentials: "omit" });
      } catch (e) {
        if (ctrl.signal.aborted) {
          return { ok: false, kind: "timeout", message: "no answer within " + fmtInterval(timeoutMs) };
        }
        // fetch() says only "failed" for both a dead port and a CORS refusal. An opaque
        // (no-cors) request succeeds when something answered, so it tells the two apart.
        const answered = await fetch(url, {
          mode: "no-cors",
          cache: "no-store",
          signal: ctrl.signal,
          credentials: "omit",
        }).then(
          () => true,
          () => false,
        );
        return answered ? { ok: false, kind: "cors" } : { ok: false, kind: "unreachable" };
      }
      if (!resp.ok) {
        return {
          ok: false,
          kind: "http",
          message: "HTTP " + resp.status + (resp.statusText ? " " + resp.statusText : ""),
        };
      }
      const body = await readBounded(resp, MAX_BODY_BYTES);
      if (body.error) {
        return { ok: false, kind: "too-large", message: body.error };
      }
      const parsed = P.parse(body.text);
      if (!parsed.ok) {
        const where = parsed.error.line > 0 ? "line " + parsed.error.line + ": " : "";
        return { ok: false, kind: "not-prometheus", message: where + parsed.error.message };
      }
      return { ok: true, families: parsed.families, bytes: body.text.length };
    } catch (e) {
      if (ctrl.signal.aborted) {
        return { ok: false, kind: "timeout", message: "no answer within " + fmtInterval(timeoutMs) };
      }
      return { ok: false, kind: "unreachable", message: String(e && e.message ? e.message : e) };
    } finally {
      clearTimeout(timer);
    }
  }

  // ---- state --------------------------------------------------------------------------------

  const SERIES_KEYS = [];
  for (const c of CHARTS) {
    for (const s of c.series) {
      SERIES_KEYS.push(s.key);
    }
  }
  const rings = {};
  for (const k of SERIES_KEYS) {
    rings[k] = new Ring(RING_CAPACITY);
  }
  const cfg = readConfig();
  const stats = { ok: 0, failed: 0, lastError: null, lastOkAt: 0, nodes: 0 };
  let snapshots = []; // recent counter/histogram snapshots, oldest first
  let charts = [];
  let generation = 0;
  let timer = null;
  let lastT = 0;

  const $ = (id) => document.getElementById(id);

  function rateWindowMs() {
    return Math.max(5000, 2.5 * cfg.intervalMs);
  }

  function takeSnapshot(f, perf) {
    const notOk = (l) => !/^[23]/.test(l.code || "");
    return {
      perf,
      req: P.counterValues(f, "cgn_router_requests_total"),
      reqErr: P.counterValues(f, "cgn_router_requests_total", notOk),
      gen: P.counterValues(f, "cgn_router_generation_tokens_total"),
      prompt: P.counterValues(f, "cgn_router_prompt_tokens_total"),
      lat: P.bucketValues(f, "cgn_router_request_duration_seconds"),
      ttft: P.bucketValues(f, "cgn_router_chat_ttft_seconds"),
      overlapSum: P.counterValues(
        f,
        "cgn_router_prefix_overlap_ratio",
        null,
        "cgn_router_prefix_overlap_ratio_sum",
      ),
      overlapCount: P.counterValues(
        f,
        "cgn_router_prefix_overlap_ratio",
        null,
        "cgn_router_prefix_overlap_ratio_count",
      ),
      has: {
        req: f.has("cgn_router_requests_total"),
        gen: f.has("cgn_router_generation_tokens_total"),
        prompt: f.has("cgn_router_prompt_tokens_total"),
        lat: f.has("cgn_router_request_duration_seconds"),
        ttft: f.has("cgn_router_chat_ttft_seconds"),
      },
    };
  }

  // Per-node view of the cgn_cluster_node_* families: Map node -> record.
  function nodeRecords(f) {
    const nodes = new Map();
    const get = (name) => {
      if (!nodes.has(name)) {
        nodes.set(name, { node: name });
      }
      return nodes.get(name);
    };
    const info = f.get("cgn_cluster_node_info");
    if (info) {
      for (const s of info.samples) {
        if (s.name === "cgn_cluster_node_info" && s.labels.node !== undefined) {
          const r = get(s.labels.node);
          r.model = s.labels.model;
          r.engine = s.labels.engine;
          r.role = s.labels.role;
          r.gpu = s.labels.gpu_name;
        }
      }
    }
    const fields = {
      cgn_cluster_node_up: "up",
      cgn_cluster_node_queue_depth: "queue",
      cgn_cluster_node_running: "running",
      cgn_cluster_node_kv_used_ratio: "kv",
      cgn_cluster_node_power_watts: "power",
      cgn_cluster_node_watt_limit: "limit",
      cgn_cluster_node_cordoned: "cordoned",
    };
    for (const [family, field] of Object.entries(fields)) {
      const fam = f.get(family);
      if (!fam) {
        continue;
      }
      for (const s of fam.samples) {
        if (s.name === family && s.labels.node !== undefined) {
          get(s.labels.node)[field] = s.value;
        }
      }
    }
    return nodes;
  }

  function ingest(f, wall, perf) {
    const snap = takeSnapshot(f, perf);
    const horizon = perf - rateWindowMs();
    let base = null;
    for (const s of snapshots) {
      if (s.perf >= horizon) {
        base = s;
        break;
      }
    }
    if (!base && snapshots.length) {
      base = snapshots[snapshots.length - 1];
    }
    snapshots.push(snap);
    while (snapshots.length > 2 && snapshots[1].perf < horizon) {
      snapshots.shift();
    }

    const v = {};
    if (base) {
      const dt = (perf - base.perf) / 1000;
      const rate = (key) => (snap.has[key] ? P.increase(base[key], snap[key]) / dt : null);
      v.rps = rate("req");
      v.rps_err = snap.has.req ? P.increase(base.reqErr, snap.reqErr) / dt : null;
      v.tps_gen = rate("gen");
      v.tps_prompt = rate("prompt");
      const lat = P.bucketIncrease(base.lat, snap.lat);
      v.lat_p50 = P.histogramQuantile(0.5, lat);
      v.lat_p95 = P.histogramQuantile(0.95, lat);
      const ttft = P.bucketIncrease(base.ttft, snap.ttft);
      v.ttft_p50 = P.histogramQuantile(0.5, ttft);
      v.ttft_p95 = P.histogramQuantile(0.95, ttft);
      const oc = P.increase(base.overlapCount, snap.overlapCount);
      v.overlap = oc > 0 ? P.increase(base.overlapSum, snap.overlapSum) / oc : null;
    }

    const nodes = nodeRecords(f);
    const list = [...nodes.values()];
    const up = list.filter((n) => n.up === 1);
    const queues = list.map((n) => n.queue).filter(Number.isFinite);
    v.queue = queues.length ? queues.reduce((a, b) => a + b, 0) : null;
    v.queue_max = queues.length ? Math.max(...queues) : null;
    const kvs = (up.length ? up : list).map((n) => n.kv).filter(Number.isFinite);
    v.kv_mean = kvs.length ? (100 * kvs.reduce((a, b) => a + b, 0)) / kvs.length : null;
    v.kv_max = kvs.length ? 100 * Math.max(...kvs) : null;
    const powerTotal = P.gaugeSum(f, "cgn_cluster_power_watts_total");
    v.power = powerTotal !== null ? powerTotal : P.gaugeSum(f, "cgn_cluster_node_power_watts");
    v.power_cap = P.gaugeSum(f, "cgn_cluster_node_watt_limit");
    const tpw = P.gaugeSum(f, "cgn_cluster_tokens_per_watt");
    const jpt = P.gaugeSum(f, "cgn_cluster_joules_per_token");
    if (jpt !== null && jpt > 0) {
      v.j_per_token = jpt; // measured: energy-counter deltas over generated tokens
    } else if (tpw !== null && tpw > 0) {
      v.j_per_token = 1 / tpw; // tokens/s per W is tokens per joule
    } else if (v.power !== null && v.power > 0 && v.tps_gen > 0) {
      v.j_per_token = v.power / v.tps_gen;
    } else {
      v.j_per_token = null;
    }
    const energy = v.power !== null || v.power_cap !== null || tpw !== null || jpt !== null;

    for (const k of SERIES_KEYS) {
      rings[k].push(wall, v[k]);
    }
    lastT = wall;
    const noEnergy = energy ? "" : "no energy metrics at this endpoint";
    for (const c of charts) {
      c.noDataReason = c.def.noData ? noEnergy : "";
      if (!c.noDataReason && !base) {
        c.noDataReason = "waiting for a second sample";
      }
    }
    updateKpis(v, list, up, f, energy);
    updateTable(list);
    drawAll();
    return [...f.keys()].some((k) => k.startsWith("cgn_"));
  }

  // ---- rendering ----------------------------------------------------------------------------

  function setKpi(id, value, unit, sub) {
    const el = $(id);
    const val = el.querySelector(".kpi-value");
    val.textContent = value;
    val.classList.toggle("nodata", value === "no data");
    if (unit) {
      const u = document.createElement("span");
      u.className = "unit";
      u.textContent = unit;
      val.append(u);
    }
    const subEl = el.querySelector(".kpi-sub");
    subEl.textContent = "";
    for (const part of sub || []) {
      if (typeof part === "string") {
        subEl.append(part);
      } else {
        const span = document.createElement("span");
        span.className = part.cls;
        span.textContent = part.text;
        subEl.append(span);
      }
    }
  }

  // [router.carbon]: the latest intensity and the gate's state (the series whose value is 1).
  const CARBON_STATES = {
    admit: { cls: "", text: "admitting all" },
    defer: { cls: "warn", text: "deferring low priority" },
    no_reading: { cls: "bad", text: "fail open: no reading" },
    stale: { cls: "bad", text: "fail open: reading stale" },
  };
  function updateCarbonKpi(f) {
    const g = P.gaugeSum(f, "cgn_router_carbon_intensity_gco2_per_kwh");
    let state = null;
    for (const name of Object.keys(CARBON_STATES)) {
      if (P.gaugeSum(f, "cgn_router_carbon_gate_state", (l) => l.state === name) === 1) {
        state = name;
      }
    }
    if (state === null) {
      setKpi("kpi-carbon", "no data", "", ["carbon gate off"]);
      return;
    }
    setKpi("kpi-carbon", g === null ? "no data" : fmtNum(g), g === null ? "" : "gCO₂/kWh", [CARBON_STATES[state]]);
  }

  function updateKpis(v, list, up, f, energy) {
    const cordoned = list.filter((n) => n.cordoned === 1).length;
    const down = list.filter((n) => n.up !== undefined && n.up !== 1).length;
    const nodeSub = [list.length + " total"];
    if (down) {
      nodeSub.push(" · ", { cls: "bad", text: down + " down" });
    }
    if (cordoned) {
      nodeSub.push(" · ", { cls: "warn", text: cordoned + " cordoned" });
    }
    setKpi(
      "kpi-nodes",
      list.length ? String(up.length) : "no data",
      list.length ? "/ " + list.length : "",
      list.length ? nodeSub : ["no cgn_cluster_node_* series"],
    );

    const errPct = v.rps > 0 && Number.isFinite(v.rps_err) ? (100 * v.rps_err) / v.rps : null;
    setKpi(
      "kpi-rps",
      fmtNum(v.rps),
      "",
      errPct === null ? [] : ["errors ", { cls: errPct >= 1 ? "bad" : "", text: fmtPct(errPct) }],
    );
    setKpi(
      "kpi-tps",
      fmtNum(v.tps_gen),
      "",
      v.tps_prompt !== undefined && v.tps_prompt !== null ? ["prompt " + fmtNum(v.tps_prompt) + " / s"] : [],
    );
    const [l50, l50u] = splitSeconds(v.lat_p50);
    setKpi("kpi-latency", l50, l50u, ["p95 " + fmtSeconds(v.lat_p95)]);
    const [t95, t95u] = splitSeconds(v.ttft_p95);
    setKpi("kpi-ttft", t95, t95u, ["p50 " + fmtSeconds(v.ttft_p50)]);
    if (energy && v.power !== null) {
      const [pw, pwu] = splitWatts(v.power);
      const sub = [];
      if (v.power_cap > 0) {
        const pct = (100 * v.power) / v.power_cap;
        sub.push(
          { cls: pct >= 95 ? "bad" : pct >= 85 ? "warn" : "", text: fmtPct(pct) },
          " of " + fmtWatts(v.power_cap) + " cap",
        );
      }
      if (v.j_per_token !== null) {
        sub.push(" · " + fmtNum(v.j_per_token) + " J/tok");
      }
      setKpi("kpi-power", pw, pwu, sub);
    } else {
      setKpi("kpi-power", "no data", "", ["no energy metrics yet"]);
    }
    updateCarbonKpi(f);
    const entries = P.gaugeSum(f, "cgn_router_prefix_index_entries");
    setKpi(
      "kpi-prefix",
      entries === null ? "no data" : fmtNum(entries),
      "",
      v.overlap !== null && v.overlap !== undefined ? ["mean overlap " + fmtPct(100 * v.overlap)] : [],
    );
  }

  function meter(ratio, text, short) {
    const wrap = document.createElement("div");
    wrap.className = "meter";
    const track = document.createElement("div");
    track.className = "meter-track";
    const fill = document.createElement("div");
    const r = Number.isFinite(ratio) ? Math.max(0, Math.min(1, ratio)) : 0;
    fill.className = "meter-fill" + (r >= 0.95 ? " full" : r >= 0.85 ? " hot" : "");
    fill.style.width = (100 * r).toFixed(1) + "%";
    track.append(fill);
    const label = document.createElement("span");
    label.className = "meter-text" + (short ? " short" : "");
    label.textContent = text;
    wrap.append(track, label);
    return wrap;
  }

  const collator = new Intl.Collator(undefined, { numeric: true });

  function updateTable(list) {
    const tbody = $("node-table").querySelector("tbody");
    const rows = list
      .slice()
      .sort((a, b) => collator.compare(a.node, b.node))
      .slice(0, MAX_TABLE_ROWS);
    const frag = document.createDocumentFragment();
    for (const n of rows) {
      const tr = document.createElement("tr");
      const isDown = n.up !== undefined && n.up !== 1;
      tr.className = isDown ? "down" : "";
      tr.dataset.node = n.node;
      const cell = (text, cls) => {
        const td = document.createElement("td");
        if (cls) {
          td.className = cls;
        }
        if (text instanceof Node) {
          td.append(text);
        } else {
          td.textContent = text === undefined || text === null ? "—" : text;
        }
        tr.append(td);
        return td;
      };
      const tag = (text, cls) => {
        const s = document.createElement("span");
        s.className = "tag " + cls;
        s.textContent = text;
        return s;
      };
      cell(n.node, "node");
      cell(n.model);
      cell(n.engine, "muted");
      cell(n.role ? tag(n.role, "role-" + n.role) : "—");
      cell(n.gpu, "muted");
      cell(Number.isFinite(n.queue) ? String(Math.round(n.queue)) : "—", "num");
      cell(Number.isFinite(n.running) ? String(Math.round(n.running)) : "—", "num");
      cell(Number.isFinite(n.kv) ? meter(n.kv, fmtPct(100 * n.kv), true) : "—");
      if (Number.isFinite(n.power)) {
        const text =
          Math.round(n.power) + (Number.isFinite(n.limit) ? " / " + Math.round(n.limit) : "") + " W";
        cell(meter(Number.isFinite(n.limit) && n.limit > 0 ? n.power / n.limit : 0, text));
      } else {
        cell("—", "muted");
      }
      cell(n.cordoned === 1 ? tag("cordoned", "cordoned") : "—", n.cordoned === 1 ? "" : "muted");
      const st = document.createElement("span");
      st.className = "state" + (isDown ? " down" : "");
      st.textContent = n.up === undefined ? "?" : isDown ? "down" : "up";
      cell(st);
      frag.append(tr);
    }
    tbody.replaceChildren(frag);
    stats.nodes = rows.length;
    $("nodes-empty").hidden = rows.length > 0;
    $("nodes-note").textContent =
      list.length > rows.length ? "showing " + rows.length + " of " + list.length : "";
  }

  function drawAll() {
    for (const c of charts) {
      drawChart(c, rings, lastT || Date.now());
      for (const s of c.def.series) {
        const last = rings[s.key].lastFinite();
        c.values[s.key].textContent = Number.isFinite(last) ? c.def.fmt(last) : "—";
      }
    }
  }

  // Shows a problem in words. `parts` mixes strings and {code: text} (rendered as <code>).
  function showBanner(level, title, parts) {
    const b = $("banner");
    b.dataset.level = level;
    $("banner-title").textContent = title;
    const d = $("banner-detail");
    d.textContent = "";
    for (const p of parts) {
      if (typeof p === "string") {
        d.append(p);
      } else {
        const c = document.createElement("code");
        c.textContent = p.code;
        d.append(c);
      }
    }
    b.hidden = false;
  }
  function hideBanner() {
    $("banner").hidden = true;
  }

  const ERROR_TEXT = {
    unreachable: [
      "Endpoint unreachable",
      (u) => [
        "No answer from ",
        { code: u },
        ": the router is down, the address is wrong, or the network drops the connection.",
      ],
    ],
    cors: [
      "Blocked by CORS",
      (u) => [
        { code: u },
        " answered, but without Access-Control-Allow-Origin, so the browser does not let this page read it. Cognitora's /metrics sends it; check the address and any proxy in front.",
      ],
    ],
    timeout: ["Endpoint timed out", (u, m) => [{ code: u }, " gave " + m + "."]],
    http: ["Endpoint error", (u, m) => [{ code: u }, " answered " + m + "."]],
    "not-prometheus": [
      "Not Prometheus text",
      (u, m) => [{ code: u }, " answered, but not with Prometheus metrics: " + m + "."],
    ],
    "too-large": ["Response too large", (u, m) => [{ code: u }, ": " + m + "."]],
  };

  function setStatus(state, text) {
    $("status").dataset.state = state;
    $("status-text").textContent = text;
  }

  function onFailure(res) {
    stats.failed++;
    stats.lastError = res.kind;
    const [title, detail] = ERROR_TEXT[res.kind] || ERROR_TEXT.unreachable;
    showBanner("error", title, [
      ...detail(cfg.endpoint, res.message || ""),
      " Retrying every " + fmtInterval(cfg.intervalMs) + ".",
    ]);
    setStatus("error", stats.lastOkAt ? "stale since " + fmtClock(stats.lastOkAt) : "no data");
    document.body.classList.add("stale");
    if (!stats.ok) {
      for (const c of charts) {
        c.noDataReason = title.toLowerCase(); // never connected: say why the charts are empty
      }
    }
    // A gap in every line marks the outage; rates restart from the next good scrape.
    const now = Date.now();
    for (const k of SERIES_KEYS) {
      rings[k].push(now, null);
    }
    lastT = now;
    snapshots = [];
    drawAll();
  }

  async function poll(gen) {
    const started = performance.now();
    const res = await scrape(cfg.endpoint, Math.min(10000, Math.max(2000, cfg.intervalMs)));
    if (gen !== generation) {
      return; // the endpoint or interval changed while this was in flight
    }
    if (res.ok) {
      stats.ok++;
      stats.lastError = null;
      stats.lastOkAt = Date.now();
      document.body.classList.remove("stale");
      // Rates divide by the time between requests, not between answers: a slow first answer
      // (page still loading, new connection) would otherwise shrink the interval and spike them.
      const cgn = ingest(res.families, stats.lastOkAt, started);
      if (cgn) {
        hideBanner();
      } else {
        showBanner("warn", "No Cognitora metrics", [
          { code: cfg.endpoint },
          " serves Prometheus text but no cgn_* series: is this a Cognitora /metrics?",
        ]);
      }
      if (cfg.notes.length) {
        showBanner("warn", "Deep link", [cfg.notes.join("; ") + "."]);
      }
      setStatus("live", "live · " + fmtClock(stats.lastOkAt));
    } else {
      onFailure(res);
    }
    const elapsed = performance.now() - started;
    timer = setTimeout(() => poll(gen), Math.max(0, cfg.intervalMs - elapsed));
  }

  function restart() {
    generation++;
    clearTimeout(timer);
    snapshots = [];
    for (const k of SERIES_KEYS) {
      rings[k].clear();
    }
    lastT = 0;
    stats.ok = 0;
    stats.failed = 0;
    stats.lastError = null;
    stats.lastOkAt = 0;
    setStatus("connecting", "connecting");
    hideBanner();
    drawAll();
    poll(generation);
  }

  function syncUrl() {
    const q = new URLSearchParams(location.search);
    q.set("endpoint", cfg.endpoint);
    q.set("interval", String(cfg.intervalMs));
    try {
      history.replaceState(null, "", "?" + q.toString());
    } catch (e) {
      // Some file:// setups refuse replaceState; the page still works, the link just isn't updated.
    }
  }

  function fillIntervals() {
    const sel = $("interval");
    const choices = INTERVAL_CHOICES.includes(cfg.intervalMs)
      ? INTERVAL_CHOICES
      : [...INTERVAL_CHOICES, cfg.intervalMs].sort((a, b) => a - b);
    sel.replaceChildren(
      ...choices.map((ms) => {
        const o = document.createElement("option");
        o.value = String(ms);
        o.textContent = fmtInterval(ms);
        return o;
      }),
    );
    sel.value = String(cfg.intervalMs);
  }

  function init() {
    const grid = $("charts");
    charts = CHARTS.map((def) => buildChart(def, grid));
    $("endpoint").value = cfg.endpoint;
    fillIntervals();
    $("controls").addEventListener("submit", (ev) => {
      ev.preventDefault();
      const e = normaliseEndpoint($("endpoint").value);
      if (!e) {
        showBanner("error", "Bad endpoint", [
          "Enter an http:// or https:// URL, e.g. ",
          { code: DEFAULT_FILE_ENDPOINT },
          ".",
        ]);
        return;
      }
      cfg.endpoint = e;
      cfg.notes = [];
      $("endpoint").value = e;
      syncUrl();
      restart();
    });
    $("interval").addEventListener("change", () => {
      cfg.intervalMs = parseInterval($("interval").value) || DEFAULT_INTERVAL_MS;
      fillIntervals();
      syncUrl();
      restart();
    });
    if (typeof ResizeObserver !== "undefined") {
      new ResizeObserver(() => drawAll()).observe(grid);
    }
    restart();
  }

  // Read-only hooks for the browser tests and for poking at a wall screen from the console.
  window.cgnDashboard = {
    config: () => ({ endpoint: cfg.endpoint, intervalMs: cfg.intervalMs }),
    stats: () => Object.assign({}, stats),
    seriesLengths: () => Object.fromEntries(SERIES_KEYS.map((k) => [k, rings[k].finiteCount()])),
    drawnPoints: () => Object.fromEntries(charts.map((c) => [c.def.id, Object.assign({}, c.drawn)])),
    charts: () =>
      CHARTS.map((c) => ({ id: c.id, series: c.series.map((s) => ({ key: s.key, color: s.color })) })),
    // Exposed for the unit tests of the pure helpers.
    parseInterval,
    normaliseEndpoint,
  };

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", init);
  } else {
    init();
  }
})();
