#include "bench_harness/load/load_gen.h"

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <charconv>
#include <chrono>
#include <cmath>
#include <exception>
#include <map>
#include <nlohmann/json.hpp>

#include "bench_harness/sample_stats.h"
#include "core/http/client.h"
#include "core/log.h"

// GCC 12 at -O1 with sanitizers reports -Wmismatched-new-delete on Asio coroutine frames: a
// false positive, as in src/sim/server.cpp.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

namespace cgn::bench {
namespace {

namespace asio = boost::asio;
using Steady = std::chrono::steady_clock;

log::Logger& logger() {
  static log::Logger l = log::get("bench_harness");
  return l;
}

Error<LoadError> chunk_error(std::string msg) {
  return make_error(LoadError::kBadChunk, std::move(msg));
}

// A non-negative integer field of `obj` (absent or null: nullopt; anything else: error).
Result<std::optional<uint64_t>, LoadError> uint_field(const nlohmann::json& obj, const char* name,
                                                      const std::string& where) {
  auto it = obj.find(name);
  if (it == obj.end() || it->is_null()) {
    return std::optional<uint64_t>{};
  }
  // nlohmann keeps non-negative integers unsigned (all of uint64); a signed one is negative.
  if (!it->is_number_unsigned() && !(it->is_number_integer() && it->get<int64_t>() >= 0)) {
    return chunk_error(where + "." + name + " must be a non-negative integer");
  }
  return std::optional<uint64_t>{it->get<uint64_t>()};
}

}  // namespace

Result<LoadTarget, LoadError> parse_target(std::string_view spec) {
  LoadTarget t;
  std::string_view url = spec;
  if (auto eq = spec.find('='); eq != std::string_view::npos) {
    t.policy = std::string(spec.substr(0, eq));
    url = spec.substr(eq + 1);
    if (t.policy.empty()) {
      return make_error(LoadError::kBadTarget, "target '" + std::string(spec) + "': empty label before '='");
    }
  }
  constexpr std::string_view kScheme = "http://";
  if (url.substr(0, kScheme.size()) != kScheme) {
    return make_error(LoadError::kBadTarget,
                      "target '" + std::string(spec) + "': the URL must start with http://");
  }
  std::string_view hostport = url.substr(kScheme.size());
  if (!hostport.empty() && hostport.back() == '/') {
    hostport.remove_suffix(1);
  }
  const auto colon = hostport.rfind(':');
  if (colon == std::string_view::npos || colon == 0 || hostport.find('/') != std::string_view::npos) {
    return make_error(LoadError::kBadTarget,
                      "target '" + std::string(spec) + "': expected http://HOST:PORT with no path");
  }
  t.host = std::string(hostport.substr(0, colon));
  const std::string_view port = hostport.substr(colon + 1);
  unsigned p = 0;
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), p);
  if (ec != std::errc() || end != port.data() + port.size() || p == 0 || p > 65535) {
    return make_error(LoadError::kBadTarget,
                      "target '" + std::string(spec) + "': bad port '" + std::string(port) + "'");
  }
  t.port = static_cast<uint16_t>(p);
  return t;
}

Status<LoadError> validate(const LoadOptions& o) {
  auto bad = [](std::string m) { return make_error(LoadError::kBadOptions, std::move(m)); };
  if (!(o.arrival_scale >= 0) || !std::isfinite(o.arrival_scale)) {
    return bad("the arrival time scale must be a finite number >= 0");
  }
  if (!(o.rate_rps >= 0) || !std::isfinite(o.rate_rps)) {
    return bad("the rate must be a finite number >= 0");
  }
  if (!(o.engine_time_scale > 0) || !std::isfinite(o.engine_time_scale)) {
    return bad("the engine time scale must be a finite number > 0");
  }
  if (!(o.duration_s >= 0) || !(o.drain_s >= 0) || !std::isfinite(o.duration_s) ||
      !std::isfinite(o.drain_s)) {
    return bad("duration and drain must be finite numbers >= 0");
  }
  if (o.model.empty()) {
    return bad("the model name is empty");
  }
  return Ok{};
}

std::vector<Nanos> arrival_schedule(const Workload& w, const LoadOptions& o) {
  std::vector<Nanos> due;
  const size_t n = o.max_requests == 0 ? w.requests.size() : std::min(o.max_requests, w.requests.size());
  const Nanos t0 = w.requests.empty() ? 0 : w.requests.front().arrival;
  const auto limit = static_cast<Nanos>(o.duration_s * 1e9);
  due.reserve(n);
  for (size_t k = 0; k < n; ++k) {
    const double t = o.rate_rps > 0 ? static_cast<double>(k) / o.rate_rps * 1e9
                                    : static_cast<double>(w.requests[k].arrival - t0) * o.arrival_scale;
    const auto at = static_cast<Nanos>(std::llround(t));
    if (o.duration_s > 0 && at > limit) {
      break;
    }
    due.push_back(at);
  }
  return due;
}

Result<StreamChunk, LoadError> parse_stream_chunk(std::string_view data) {
  const nlohmann::json j = nlohmann::json::parse(data, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return chunk_error("stream chunk is not JSON");
  }
  if (!j.is_object()) {
    return chunk_error("stream chunk is not a JSON object");
  }
  StreamChunk c;
  // vLLM / llama.cpp / the router: {"error":{...}}; SGLang, TRT-LLM: {"object":"error",...}.
  if (auto e = j.find("error"); e != j.end() && !e->is_null()) {
    c.error = true;
    if (e->is_object() && e->contains("message") && (*e)["message"].is_string()) {
      c.error_message = (*e)["message"].get<std::string>();
    } else {
      c.error_message = e->dump();
    }
    return c;
  }
  if (auto ob = j.find("object"); ob != j.end() && ob->is_string() && ob->get<std::string>() == "error") {
    c.error = true;
    // value() would throw on a non-string message: a stream chunk never throws.
    const auto m = j.find("message");
    c.error_message = m != j.end() && m->is_string() ? m->get<std::string>() : std::string("error");
    return c;
  }
  if (auto ch = j.find("choices"); ch != j.end() && !ch->is_null()) {
    if (!ch->is_array()) {
      return chunk_error("choices must be an array");
    }
    for (const auto& choice : *ch) {
      if (!choice.is_object()) {
        return chunk_error("choices[] must be objects");
      }
      const nlohmann::json* text = nullptr;
      if (auto t = choice.find("text"); t != choice.end()) {
        text = &*t;
      } else if (auto d = choice.find("delta"); d != choice.end() && d->is_object()) {
        if (auto ct = d->find("content"); ct != d->end()) {
          text = &*ct;
        }
      }
      if (text != nullptr && !text->is_null()) {
        if (!text->is_string()) {
          return chunk_error("choices[].text must be a string");
        }
        c.text_pieces += text->get_ref<const std::string&>().empty() ? 0 : 1;
      }
    }
  }
  if (auto u = j.find("usage"); u != j.end() && !u->is_null()) {
    if (!u->is_object()) {
      return chunk_error("usage must be an object");
    }
    c.has_usage = true;
    auto pt = uint_field(*u, "prompt_tokens", "usage");
    if (!pt) {
      return pt.error();
    }
    auto ct = uint_field(*u, "completion_tokens", "usage");
    if (!ct) {
      return ct.error();
    }
    c.prompt_tokens = pt->value_or(0);
    c.completion_tokens = ct->value_or(0);
    if (auto d = u->find("prompt_tokens_details"); d != u->end() && !d->is_null()) {
      if (!d->is_object()) {
        return chunk_error("usage.prompt_tokens_details must be an object");
      }
      auto cached = uint_field(*d, "cached_tokens", "usage.prompt_tokens_details");
      if (!cached) {
        return cached.error();
      }
      c.has_cached = cached->has_value();
      c.cached_tokens = cached->value_or(0);
    }
  }
  return c;
}

const char* to_string(Outcome o) {
  switch (o) {
    case Outcome::kCompleted:
      return "completed";
    case Outcome::kShed:
      return "shed";
    case Outcome::kHttpError:
      return "http_error";
    case Outcome::kTransportError:
      return "transport_error";
    case Outcome::kStreamError:
      return "stream_error";
    case Outcome::kCut:
      return "cut";
  }
  return "?";
}

LoadResult summarise(std::string policy, std::vector<RequestRecord> records, const LoadOptions& o) {
  LoadResult out;
  PolicyResult& r = out.result;
  LiveStats& s = out.live;
  r.policy = std::move(policy);
  const double ets = o.engine_time_scale > 0 ? o.engine_time_scale : 1.0;
  std::map<std::string, uint64_t> per_node;
  std::vector<double> ttft;
  std::vector<double> itl;
  std::vector<double> e2e;
  uint64_t good = 0;
  uint64_t output_tokens = 0;
  Nanos first_due = -1;
  Nanos last_end = -1;
  for (const RequestRecord& q : records) {
    if (q.sent < 0) {
      continue;
    }
    ++s.sent;
    first_due = first_due < 0 ? q.due : std::min(first_due, q.due);
    s.max_send_lag_s = std::max(s.max_send_lag_s, seconds(q.sent - q.due));
    if (!q.node.empty()) {
      ++per_node[q.node];
    }
    last_end = std::max(last_end, q.done);
    switch (q.outcome) {
      case Outcome::kCompleted:
        ++s.completed;
        break;
      case Outcome::kShed:
        ++s.shed;
        break;
      case Outcome::kHttpError:
        ++s.http_errors;
        break;
      case Outcome::kTransportError:
        ++s.transport_errors;
        break;
      case Outcome::kStreamError:
        ++s.stream_errors;
        break;
      case Outcome::kCut:
        ++s.cut;
        break;
    }
    if (q.outcome != Outcome::kCompleted) {
      if (s.first_error.empty() && q.outcome != Outcome::kShed) {
        s.first_error = std::string(to_string(q.outcome)) + ": " + q.error;
      }
      continue;
    }
    const double t = seconds(q.first_token - q.due) / ets;
    ttft.push_back(t);
    e2e.push_back(seconds(q.done - q.due) / ets);
    const uint64_t n = q.usage_seen ? q.completion_tokens : q.text_events;
    const double per_tok =
        n > 1 ? seconds(q.last_token - q.first_token) / ets / static_cast<double>(n - 1) : 0.0;
    itl.push_back(per_tok);
    good += (t <= o.slo_ttft_s && per_tok <= o.slo_itl_s) ? 1 : 0;
    output_tokens += n;
    if (!q.usage_seen) {
      ++s.usage_missing;
    } else {
      if (!q.cached_seen) {
        ++s.cached_missing;
      }
      r.prompt_tokens += q.prompt_tokens;
      r.cached_tokens += q.cached_tokens;
    }
  }
  r.requests = s.sent;
  r.completed = s.completed;
  r.shed = s.shed;
  r.errors = s.http_errors + s.transport_errors + s.stream_errors + s.cut;
  std::sort(ttft.begin(), ttft.end());
  std::sort(itl.begin(), itl.end());
  std::sort(e2e.begin(), e2e.end());
  r.ttft_p50_s = percentile(ttft, 50);
  r.ttft_p90_s = percentile(ttft, 90);
  r.ttft_p99_s = percentile(ttft, 99);
  r.ttft_mean_s = mean(ttft);
  r.itl_p50_s = percentile(itl, 50);
  r.itl_p90_s = percentile(itl, 90);
  r.itl_mean_s = mean(itl);
  r.e2e_p50_s = percentile(e2e, 50);
  if (first_due >= 0 && last_end > first_due) {
    s.wall_s = seconds(last_end - first_due);
    r.makespan_s = s.wall_s / ets;
    r.goodput_rps = static_cast<double>(good) / r.makespan_s;
    r.output_tok_s = static_cast<double>(output_tokens) / r.makespan_s;
  }
  r.hit_rate =
      r.prompt_tokens == 0 ? 0 : static_cast<double>(r.cached_tokens) / static_cast<double>(r.prompt_tokens);
  for (const auto& [name, count] : per_node) {
    s.nodes.push_back(name);
    r.per_node_requests.push_back(count);
  }
  out.records = std::move(records);
  return out;
}

namespace {

// One run: the client, the schedule and the records, all on one io_context / thread.
struct Run {
  const Workload& w;
  const LoadOptions& o;
  http::Upstream up;
  asio::io_context& ctx;
  http::HttpClient& client;
  std::vector<Nanos> due;
  std::vector<RequestRecord> records;
  Steady::time_point start;
  Nanos hard_deadline = 0;  // wall, after the start: running requests are cut here
  size_t running = 0;

  Nanos now() const {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(Steady::now() - start).count();
  }

  std::string body(size_t k) const {
    const WorkRequest& wr = w.requests[k];
    std::string prompt;
    build_prompt(w, wr, prompt);
    nlohmann::json j;
    j["model"] = o.model;
    j["prompt"] = std::move(prompt);
    j["max_tokens"] = wr.output_tokens;
    j["ignore_eos"] = true;
    j["stream"] = true;
    j["stream_options"] = {{"include_usage", true}};
    return j.dump();
  }

  asio::awaitable<void> one(size_t k) {
    RequestRecord& rec = records[k];
    http::Request req{http::Verb::post, "/v1/completions", 11};
    req.set(http::Field::content_type, "application/json");
    req.set("X-Request-Id", "cgn-bench-" + std::to_string(k));
    if (o.session_header && !w.requests[k].session_key.empty()) {
      req.set("X-Session-Id", w.requests[k].session_key);
    }
    req.body() = body(k);
    req.prepare_payload();
    const auto left = [this] {
      return std::chrono::milliseconds(std::max<Nanos>(1, (hard_deadline - now()) / 1'000'000));
    };
    http::ClientTimeouts t;
    t.header = left();
    t.idle = left();
    rec.sent = now();
    auto fail = [&](Outcome oc, std::string msg) {
      rec.outcome = now() >= hard_deadline ? Outcome::kCut : oc;
      rec.error = std::move(msg);
      rec.done = now();
    };
    auto st = co_await client.stream(up, std::move(req), t);
    if (!st) {
      fail(Outcome::kTransportError, st.error().message);
      co_return;
    }
    rec.status = st->status();
    if (auto it = st->headers().find("X-CGN-Node"); it != st->headers().end()) {
      rec.node = std::string(it->value());
    }
    if (rec.status != 200) {
      auto b = co_await st->read_all();
      std::string msg = "HTTP " + std::to_string(rec.status);
      if (b) {
        msg += ": " + b->substr(0, 300);
      }
      fail(rec.status == 429 ? Outcome::kShed : Outcome::kHttpError, std::move(msg));
      co_return;
    }
    bool done_seen = false;
    for (;;) {
      auto ev = co_await st->next_event();
      if (!ev) {
        fail(Outcome::kTransportError, ev.error().message);
        co_return;
      }
      if (!ev->has_value()) {
        break;
      }
      const http::SseEvent& e = **ev;
      if (e.is_done()) {
        done_seen = true;
        continue;
      }
      auto c = parse_stream_chunk(e.data);
      if (!c) {
        fail(Outcome::kStreamError, c.error().message);
        co_return;
      }
      if (c->error) {
        fail(Outcome::kStreamError, "error event: " + c->error_message);
        co_return;
      }
      if (c->text_pieces > 0) {
        const Nanos t_now = now();
        if (rec.first_token < 0) {
          rec.first_token = t_now;
        }
        rec.last_token = t_now;
        rec.text_events += 1;
      }
      if (c->has_usage) {
        rec.usage_seen = true;
        rec.cached_seen = c->has_cached;
        rec.prompt_tokens = c->prompt_tokens;
        rec.completion_tokens = c->completion_tokens;
        rec.cached_tokens = c->cached_tokens;
      }
      if (now() >= hard_deadline) {
        fail(Outcome::kCut, "still streaming when the drain bound passed");
        co_return;
      }
    }
    rec.done = now();
    if (!done_seen) {
      fail(Outcome::kStreamError, "the stream ended without [DONE]");
    } else if (rec.first_token < 0) {
      fail(Outcome::kStreamError, "the stream carried no token");
    } else {
      rec.outcome = Outcome::kCompleted;
    }
  }

  asio::awaitable<void> dispatch() {
    asio::steady_timer timer(ctx);
    for (size_t k = 0; k < due.size(); ++k) {
      timer.expires_at(start + std::chrono::nanoseconds(due[k]));
      co_await timer.async_wait(asio::use_awaitable);
      records[k].index = k;
      records[k].due = due[k];
      asio::co_spawn(ctx, one(k), [this, k](std::exception_ptr e) {
        if (e) {  // nothing in one() throws by design; keep the count honest if it does
          records[k].outcome = Outcome::kTransportError;
          records[k].error = "internal exception";
          try {
            std::rethrow_exception(e);
          } catch (const std::exception& ex) {
            records[k].error += std::string(": ") + ex.what();
          } catch (...) {
          }
        }
      });
    }
  }
};

}  // namespace

Result<LoadResult, LoadError> run_load(const Workload& w, const LoadTarget& target, const LoadOptions& o) {
  if (auto v = validate(o); !v) {
    return v.error();
  }
  if (target.host.empty() || target.port == 0) {
    return make_error(LoadError::kBadTarget, "no target host:port");
  }
  asio::io_context ctx;
  http::ClientConfig cc;
  cc.max_idle_per_upstream = 1024;
  cc.timeouts.connect = std::chrono::seconds(5);
  http::HttpClient client(ctx, cc);
  Run run{w, o, http::Upstream{target.host, target.port, false}, ctx, client, {}, {}, {}, 0, 0};
  run.due = arrival_schedule(w, o);
  run.records.resize(run.due.size());
  const Nanos last_due = run.due.empty() ? 0 : run.due.back();
  run.hard_deadline = last_due + static_cast<Nanos>(o.drain_s * 1e9);
  CGN_LOG_INFO(logger(), "load run starting", log::kv("target", target.policy),
               log::kv("requests", run.due.size()), log::kv("span_s", seconds(last_due)));
  // A short lead so the first request is not already late when the loop starts.
  run.start = Steady::now() + std::chrono::milliseconds(20);
  asio::co_spawn(ctx, run.dispatch(), asio::detached);
  ctx.run();
  std::vector<RequestRecord> sent;
  sent.reserve(run.records.size());
  for (auto& r : run.records) {
    if (r.sent >= 0) {
      sent.push_back(std::move(r));
    }
  }
  LoadResult res = summarise(target.policy, std::move(sent), o);
  CGN_LOG_INFO(logger(), "load run done", log::kv("target", target.policy), log::kv("sent", res.live.sent),
               log::kv("completed", res.live.completed), log::kv("shed", res.live.shed),
               log::kv("errors", res.result.errors), log::kv("wall_s", res.live.wall_s));
  return res;
}

}  // namespace cgn::bench
