// Prometheus text exposition format (0.0.4, and the OpenMetrics subset routers emit) parsed in
// the browser, plus the arithmetic the dashboard needs on top: counter increases with reset
// handling and histogram_quantile() as Prometheus defines it.
//
// A plain script (no modules, so the page works when opened from disk): it defines
// globalThis.CgnProm, and module.exports under node for the unit tests. Pure functions only; no
// state, no DOM. Every input is outside bytes, so parsing is bounded (bytes, lines, samples,
// labels, name and value lengths) and never throws: it returns {ok:false, error} instead.
(function (root) {
  "use strict";

  const DEFAULT_LIMITS = {
    maxBytes: 16 * 1024 * 1024,
    maxLines: 500000,
    maxSamples: 200000,
    maxFamilies: 20000,
    maxLabelsPerSample: 64,
    maxNameLength: 512,
    maxLabelValueLength: 4096,
  };
  const TYPES = new Set([
    "counter",
    "gauge",
    "histogram",
    "summary",
    "untyped",
    "unknown",
    "gaugehistogram",
    "stateset",
    "info",
  ]);
  const NAME_RE = /^[a-zA-Z_:][a-zA-Z0-9_:]*/;
  const LABEL_NAME_RE = /^[a-zA-Z_][a-zA-Z0-9_]*/;
  const VALUE_RE = /^[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|[Ii]nf(?:inity)?|NaN|nan)$/;
  const TIMESTAMP_RE = /^-?\d+(?:\.\d+)?$/;

  function parseValue(text) {
    if (!VALUE_RE.test(text)) {
      return null;
    }
    const lower = text.toLowerCase();
    if (lower.endsWith("inf") || lower.endsWith("infinity")) {
      return text.startsWith("-") ? -Infinity : Infinity;
    }
    if (lower === "nan") {
      return NaN;
    }
    return Number(text);
  }

  function describeStart(text) {
    const head = text.replace(/^\s+/, "").slice(0, 64).toLowerCase();
    if (head.startsWith("<!doctype") || head.startsWith("<html") || head.startsWith("<")) {
      return "it looks like HTML";
    }
    if (head.startsWith("{") || head.startsWith("[")) {
      return "it looks like JSON";
    }
    return null;
  }

  // Parses one sample line. Returns {name, labels, value} or {error}.
  function parseSampleLine(line, limits) {
    const m = NAME_RE.exec(line);
    if (!m) {
      return { error: "expected a metric name" };
    }
    const name = m[0];
    if (name.length > limits.maxNameLength) {
      return { error: "metric name longer than " + limits.maxNameLength };
    }
    let i = name.length;
    const labels = {};
    let labelCount = 0;
    if (line[i] === "{") {
      i++;
      for (;;) {
        while (line[i] === " " || line[i] === "\t") {
          i++;
        }
        if (line[i] === "}") {
          i++;
          break;
        }
        const lm = LABEL_NAME_RE.exec(line.slice(i, i + limits.maxNameLength + 1));
        if (!lm) {
          return { error: "expected a label name at column " + (i + 1) };
        }
        if (lm[0].length > limits.maxNameLength) {
          return { error: "label name longer than " + limits.maxNameLength };
        }
        i += lm[0].length;
        while (line[i] === " " || line[i] === "\t") {
          i++;
        }
        if (line[i] !== "=" || line[i + 1] !== '"') {
          return { error: 'expected =" after label ' + lm[0] };
        }
        i += 2;
        let value = "";
        for (;;) {
          if (i >= line.length) {
            return { error: "unterminated label value" };
          }
          const c = line[i];
          if (c === '"') {
            i++;
            break;
          }
          if (c === "\\") {
            const n = line[i + 1];
            if (n === "n") {
              value += "\n";
            } else if (n === "\\" || n === '"') {
              value += n;
            } else {
              return { error: "bad escape in label value at column " + (i + 1) };
            }
            i += 2;
          } else {
            value += c;
            i++;
          }
          if (value.length > limits.maxLabelValueLength) {
            return { error: "label value longer than " + limits.maxLabelValueLength };
          }
        }
        if (Object.prototype.hasOwnProperty.call(labels, lm[0])) {
          return { error: "duplicate label " + lm[0] };
        }
        labels[lm[0]] = value;
        if (++labelCount > limits.maxLabelsPerSample) {
          return { error: "more than " + limits.maxLabelsPerSample + " labels" };
        }
        while (line[i] === " " || line[i] === "\t") {
          i++;
        }
        if (line[i] === ",") {
          i++;
        } else if (line[i] !== "}") {
          return { error: "expected , or } at column " + (i + 1) };
        }
      }
    }
    if (line[i] !== " " && line[i] !== "\t") {
      return { error: "expected a space before the value" };
    }
    const rest = line
      .slice(i)
      .trim()
      .split(/[ \t]+/);
    if (rest.length < 1 || rest.length > 2 || rest[0] === "") {
      return { error: "expected a value and an optional timestamp" };
    }
    const value = parseValue(rest[0]);
    if (value === null) {
      return { error: "bad value '" + rest[0].slice(0, 32) + "'" };
    }
    if (rest.length === 2 && !TIMESTAMP_RE.test(rest[1])) {
      return { error: "bad timestamp '" + rest[1].slice(0, 32) + "'" };
    }
    return { name, labels, value };
  }

  // The family a sample belongs to: its own name, or the histogram/summary/counter it is a
  // suffixed series of (x_bucket of histogram x, x_total of an OpenMetrics counter x).
  function familyOf(name, families) {
    for (const suffix of ["_bucket", "_sum", "_count", "_created", "_total", "_gsum", "_gcount"]) {
      if (name.endsWith(suffix)) {
        const base = name.slice(0, -suffix.length);
        const fam = families.get(base);
        if (fam && fam.type !== "gauge" && fam.type !== "untyped" && !families.has(name)) {
          return fam;
        }
      }
    }
    return null;
  }

  /**
   * Parses exposition text. Returns {ok: true, families: Map<name, {name, type, help, samples}>,
   * sampleCount} or {ok: false, error: {line, message}}; a sample is {name, labels, value}.
   * Text with no samples at all is an error: an endpoint that answers 200 with nothing in it is
   * as broken, for the dashboard, as one that answers HTML.
   */
  function parse(text, limitsIn) {
    const limits = Object.assign({}, DEFAULT_LIMITS, limitsIn || {});
    const fail = (line, message) => ({ ok: false, error: { line, message } });
    if (typeof text !== "string") {
      return fail(0, "body is not text");
    }
    if (text.length > limits.maxBytes) {
      return fail(0, "body larger than " + limits.maxBytes + " bytes");
    }
    const families = new Map();
    let sampleCount = 0;
    let lineNo = 0;
    let start = 0;
    while (start <= text.length) {
      let end = text.indexOf("\n", start);
      if (end < 0) {
        end = text.length;
      }
      let line = text.slice(start, end);
      start = end + 1;
      lineNo++;
      if (lineNo > limits.maxLines) {
        return fail(lineNo, "more than " + limits.maxLines + " lines");
      }
      if (line.endsWith("\r")) {
        line = line.slice(0, -1);
      }
      if (line.trim() === "") {
        continue;
      }
      if (line[0] === "#") {
        const parts = line
          .slice(1)
          .trim()
          .split(/[ \t]+/);
        const kw = parts[0];
        if (kw === "EOF") {
          break;
        }
        if (kw !== "HELP" && kw !== "TYPE") {
          continue; // a plain comment
        }
        const name = parts[1] || "";
        const nm = NAME_RE.exec(name);
        if (!nm || nm[0] !== name || name.length > limits.maxNameLength) {
          return fail(lineNo, "bad metric name in # " + kw);
        }
        let fam = families.get(name);
        if (!fam) {
          if (families.size >= limits.maxFamilies) {
            return fail(lineNo, "more than " + limits.maxFamilies + " metric families");
          }
          fam = { name, type: "untyped", help: "", samples: [], typed: false };
          families.set(name, fam);
        }
        if (kw === "TYPE") {
          const type = (parts[2] || "").toLowerCase();
          if (!TYPES.has(type) || parts.length !== 3) {
            return fail(lineNo, "bad type '" + (parts[2] || "").slice(0, 32) + "' for " + name);
          }
          if (fam.typed) {
            return fail(lineNo, "second # TYPE for " + name);
          }
          fam.type = type === "unknown" ? "untyped" : type;
          fam.typed = true;
        } else {
          const at = line.indexOf(name) + name.length;
          fam.help = line.slice(at).trim().slice(0, 1024);
        }
        continue;
      }
      const s = parseSampleLine(line, limits);
      if (s.error) {
        const hint = lineNo === 1 ? describeStart(text) : null;
        return fail(lineNo, hint ? hint + " (" + s.error + ")" : s.error);
      }
      if (++sampleCount > limits.maxSamples) {
        return fail(lineNo, "more than " + limits.maxSamples + " samples");
      }
      let fam = familyOf(s.name, families) || families.get(s.name);
      if (!fam) {
        if (families.size >= limits.maxFamilies) {
          return fail(lineNo, "more than " + limits.maxFamilies + " metric families");
        }
        fam = { name: s.name, type: "untyped", help: "", samples: [], typed: false };
        families.set(s.name, fam);
      }
      fam.samples.push(s);
    }
    if (sampleCount === 0) {
      const hint = describeStart(text);
      return fail(0, hint ? hint + ", not metric samples" : "no metric samples in the body");
    }
    for (const fam of families.values()) {
      delete fam.typed;
    }
    return { ok: true, families, sampleCount };
  }

  // A stable identity for one series: its name and labels, sorted, without the ones in `drop`.
  function seriesKey(sample, drop) {
    const names = Object.keys(sample.labels)
      .filter((k) => !drop || !drop.includes(k))
      .sort();
    return sample.name + "{" + names.map((k) => k + "=" + JSON.stringify(sample.labels[k])).join(",") + "}";
  }

  // Per-series counter values of a family: Map key -> value (samples whose name is exactly
  // `sampleName`, default the family's own name), optionally filtered by a label predicate.
  function counterValues(families, family, filter, sampleName) {
    const out = new Map();
    // OpenMetrics names a counter family without _total ("# TYPE x counter", samples x_total).
    const fam =
      families.get(family) || (family.endsWith("_total") ? families.get(family.slice(0, -6)) : null);
    if (!fam) {
      return out;
    }
    const want = sampleName || family;
    for (const s of fam.samples) {
      if (s.name === want && Number.isFinite(s.value) && (!filter || filter(s.labels))) {
        out.set(seriesKey(s), s.value);
      }
    }
    return out;
  }

  // How much a set of counters grew between two snapshots. A series whose value fell was reset
  // (process restart): its increase is its whole new value, as in Prometheus' increase().
  // A series that only exists now contributes nothing: its history before `prev` is unknown.
  function increase(prev, cur) {
    let sum = 0;
    for (const [key, v] of cur) {
      if (!prev.has(key)) {
        continue;
      }
      const p = prev.get(key);
      sum += v >= p ? v - p : v;
    }
    return sum;
  }

  // Cumulative histogram buckets of a family, per series and bound: Map key -> {le, value}.
  // Buckets whose le is not a number are skipped.
  function bucketValues(families, family, filter) {
    const out = new Map();
    const fam = families.get(family);
    if (!fam) {
      return out;
    }
    for (const s of fam.samples) {
      if (s.name !== family + "_bucket" || !("le" in s.labels) || (filter && !filter(s.labels))) {
        continue;
      }
      const le = parseValue(s.labels.le.trim());
      if (le !== null && !Number.isNaN(le) && Number.isFinite(s.value)) {
        out.set(seriesKey(s), { le, value: s.value });
      }
    }
    return out;
  }

  // Increase of each bucket between two snapshots, summed over series: [{le, count}] sorted by
  // le. Reset handling is per series, as for counters.
  function bucketIncrease(prev, cur) {
    const byLe = new Map();
    for (const [key, c] of cur) {
      const p = prev.get(key);
      if (!p) {
        continue;
      }
      const d = c.value >= p.value ? c.value - p.value : c.value;
      byLe.set(c.le, (byLe.get(c.le) || 0) + d);
    }
    return [...byLe.entries()].map(([le, count]) => ({ le, count })).sort((a, b) => a.le - b.le);
  }

  /**
   * histogram_quantile(q) over cumulative buckets [{le, count}] sorted by le, as Prometheus
   * computes it: linear interpolation inside the bucket holding the rank, the lower bound of the
   * first bucket taken as 0 (when its upper bound is positive), and the highest finite bound
   * returned when the rank falls in +Inf. Returns null when there is nothing to rank.
   */
  function histogramQuantile(q, buckets) {
    if (!buckets.length || !Number.isFinite(q) || q < 0 || q > 1) {
      return null;
    }
    const last = buckets[buckets.length - 1];
    if (last.le !== Infinity) {
      return null; // a histogram without +Inf is malformed
    }
    // Enforce monotonic counts (floors and scrape races can break it slightly).
    const counts = [];
    let run = 0;
    for (const b of buckets) {
      run = Math.max(run, b.count);
      counts.push(run);
    }
    const total = counts[counts.length - 1];
    if (!(total > 0)) {
      return null;
    }
    const rank = q * total;
    let i = 0;
    while (i < counts.length - 1 && counts[i] < rank) {
      i++;
    }
    if (i === buckets.length - 1) {
      return buckets.length >= 2 ? buckets[buckets.length - 2].le : null;
    }
    const upper = buckets[i].le;
    let lower = 0;
    let below = 0;
    if (i > 0) {
      lower = buckets[i - 1].le;
      below = counts[i - 1];
    } else if (upper <= 0) {
      return upper;
    }
    const inBucket = counts[i] - below;
    if (inBucket <= 0) {
      return upper;
    }
    return lower + (upper - lower) * ((rank - below) / inBucket);
  }

  // Sum of a gauge family's samples (optionally filtered); null when the family is absent.
  function gaugeSum(families, family, filter) {
    const fam = families.get(family);
    if (!fam) {
      return null;
    }
    let sum = 0;
    let n = 0;
    for (const s of fam.samples) {
      if (s.name === family && Number.isFinite(s.value) && (!filter || filter(s.labels))) {
        sum += s.value;
        n++;
      }
    }
    return n ? sum : null;
  }

  const api = {
    DEFAULT_LIMITS,
    parse,
    parseValue,
    seriesKey,
    counterValues,
    increase,
    bucketValues,
    bucketIncrease,
    histogramQuantile,
    gaugeSum,
  };
  root.CgnProm = api;
  if (typeof module !== "undefined" && module.exports) {
    module.exports = api;
  }
})(typeof globalThis !== "undefined" ? globalThis : this);
