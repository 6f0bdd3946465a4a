// Shared pieces of the browser tests: Debian's chromium under playwright-core, the mock router
// as a child process on port 0, tiny stand-in servers for failure cases, and the metric-name
// contract (dashboard/metric_names.txt).
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, mkdirSync } from "node:fs";
import { createServer } from "node:http";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
export const repoRoot = path.resolve(here, "..", "..");
export const dashboardDir = path.join(repoRoot, "dashboard");
export const artifactsDir = path.join(here, "artifacts");
export const require = createRequire(import.meta.url);
export const prom = require(path.join(dashboardDir, "prom.js"));

// A real router to test against instead of the mock: CGN_DASHBOARD_ENDPOINT=http://host:port/metrics
// (run.sh --endpoint sets it). Unset: the tests start dashboard/mock_metrics.py themselves.
export const externalEndpoint = process.env.CGN_DASHBOARD_ENDPOINT || "";

export const CHROMIUM = process.env.CGN_CHROMIUM || "/usr/bin/chromium";
// Flags that keep chromium quiet on a closed network: no updater, sync, field trials or QUIC.
export const CHROMIUM_ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
  "--disable-dev-shm-usage",
  "--hide-scrollbars",
];

// Launches chromium with a fresh profile; close() also removes the profile.
export async function launchBrowser() {
  const { chromium } = require("playwright-core");
  const profile = mkdtempSync(path.join(tmpdir(), "cgn-chromium-"));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: CHROMIUM_ARGS,
    viewport: { width: 1920, height: 1080 },
    timeout: 90000, // outer bound: chromium starts in ~1 s idle, 20+ s on a loaded 2-core host
  });
  return {
    context,
    async newPage() {
      const page = await context.newPage();
      page.setDefaultTimeout(60000); // outer bound for waits on a loaded host, not a target
      return page;
    },
    async close() {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

// Starts dashboard/mock_metrics.py on port 0 and waits for the line that names its port.
export function startMock(extraArgs = []) {
  return new Promise((resolve, reject) => {
    const child = spawn(
      "python3",
      [path.join(dashboardDir, "mock_metrics.py"), "--port", "0", ...extraArgs],
      {
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    let out = "";
    let err = "";
    const timer = setTimeout(() => {
      child.kill();
      reject(new Error("mock_metrics.py did not report its port within 10 s: " + out + err));
    }, 10000);
    child.stderr.on("data", (d) => (err += d));
    child.stdout.on("data", (d) => {
      out += d;
      const m = /http:\/\/([\d.]+):(\d+)\/metrics/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve({
          port: Number(m[2]),
          endpoint: `http://${m[1]}:${m[2]}/metrics`,
          origin: `http://${m[1]}:${m[2]}`,
          stop: () =>
            new Promise((done) => {
              if (child.exitCode !== null) {
                return done();
              }
              child.once("exit", () => done());
              child.kill("SIGTERM");
            }),
        });
      }
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`mock_metrics.py exited with ${code}: ${err}`));
    });
  });
}

// A one-route HTTP server on 127.0.0.1:0 answering every request with `handler(req, res)`.
export async function startServer(handler) {
  const server = createServer(handler);
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  const { port } = server.address();
  return {
    port,
    url: `http://127.0.0.1:${port}/metrics`,
    close: () => new Promise((r) => server.close(() => r())),
  };
}

// A loopback port that nothing listens on: bind port 0, note the port, close it.
export async function deadPort() {
  const s = await startServer(() => {});
  await s.close();
  return s.port;
}

export function pageUrl(params) {
  const u = pathToFileURL(path.join(dashboardDir, "index.html"));
  for (const [k, v] of Object.entries(params || {})) {
    u.searchParams.set(k, v);
  }
  return u.href;
}

export function screenshotPath(name) {
  mkdirSync(artifactsDir, { recursive: true });
  return path.join(artifactsDir, name);
}

// dashboard/metric_names.txt -> Map name -> {type, labels: sorted array}
export function metricContract() {
  const text = readFileSync(path.join(dashboardDir, "metric_names.txt"), "utf8");
  const out = new Map();
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (!line || line.startsWith("#")) {
      continue;
    }
    const [name, type, labels, ...rest] = line.split(/\s+/);
    if (!name || !type || !labels || rest.length) {
      throw new Error("metric_names.txt: bad line: " + line);
    }
    out.set(name, { type, labels: labels === "-" ? [] : labels.split(",").sort() });
  }
  return out;
}

export async function fetchText(url) {
  const r = await fetch(url);
  return { status: r.status, headers: r.headers, text: await r.text() };
}
