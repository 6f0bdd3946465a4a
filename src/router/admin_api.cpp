#include "router/admin_api.h"

#include <map>

#include "core/canonical.h"
#include "router/coro_warnings.h"
#include "router/request_intake.h"
#include "router/responses.h"
#include "routing/policies.h"

namespace cgn::router {

namespace asio = boost::asio;
using http::Exchange;

namespace {

inline constexpr size_t kMaxDigestsShown = 64;

// The explained endpoint: chat/completions/embeddings, or /v1/responses (parsed as the chat request
// it stands for, as the gateway does).
struct ExplainedEndpoint {
  Endpoint endpoint = Endpoint::kChat;
  bool responses = false;
};

// ?endpoint=chat|completions|embeddings|responses (default chat); nullopt for anything else.
std::optional<ExplainedEndpoint> endpoint_param(std::string_view target) {
  const auto q = target.find('?');
  if (q == std::string_view::npos) {
    return ExplainedEndpoint{};
  }
  std::optional<ExplainedEndpoint> e = ExplainedEndpoint{};
  std::string_view query = target.substr(q + 1);
  while (!query.empty()) {
    const auto amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (!pair.starts_with("endpoint=")) {
      continue;
    }
    const std::string_view v = pair.substr(9);
    if (v == "chat") {
      e = ExplainedEndpoint{};
    } else if (v == "completions") {
      e = ExplainedEndpoint{Endpoint::kCompletions, false};
    } else if (v == "embeddings") {
      e = ExplainedEndpoint{Endpoint::kEmbeddings, false};
    } else if (v == "responses") {
      e = ExplainedEndpoint{Endpoint::kChat, true};
    } else {
      return std::nullopt;
    }
  }
  return e;
}

// The leading run of `digests` that node `n` holds, by tier and by state (confirmed / guessed).
nlohmann::json overlap_by_tier(const routing::PrefixIndex& index, routing::NodeIndex n,
                               std::span<const Digest> digests) {
  nlohmann::json tiers = {{"engine", 0}, {"ram", 0}, {"ssd", 0}};
  uint32_t run = 0;
  uint32_t guessed = 0;
  for (const Digest& d : digests) {
    routing::EntryState state{};
    routing::Tier tier{};
    if (!index.state_of(n, d, &state, &tier)) {
      break;
    }
    ++run;
    guessed += static_cast<uint32_t>(state == routing::EntryState::kOptimistic);
    auto& slot = tiers[std::string(routing::to_string(tier))];
    slot = slot.get<uint32_t>() + 1;
  }
  return {{"blocks", run}, {"guessed", guessed}, {"by_tier", tiers}};
}

// Why a node is not among the ranked candidates (the filter that removed it, as its state says).
std::string excluded_because(const routing::RoutingCore& core, routing::NodeIndex n,
                             const routing::RouteRequest& rr) {
  const auto* st = core.node(n);
  if (!st->serves(rr.model)) {
    return "does not serve the model";
  }
  if (!routing::role_fits(st->role, rr.role)) {
    return "role " + std::string(routing::to_string(st->role));
  }
  if (st->health != routing::Health::kHealthy) {
    return "health " + std::string(routing::to_string(st->health));
  }
  if (core.stale(n)) {
    return "stale";
  }
  if (st->cordoned) {
    return "cordoned";
  }
  const auto& g = core.policy().guard;
  if (st->queue_depth > g.max_queue_depth || st->kv_used_ratio > g.max_kv_used) {
    return "load guard: queue or KV use over its limit";
  }
  return "load guard: spread rule";
}

nlohmann::json candidate_json(const routing::Candidate& c, size_t rank) {
  return {{"rank", rank},
          {"ttft_s", c.ttft_s},
          {"cost", c.cost},
          {"load", c.load},
          {"overlap_blocks", c.overlap_blocks},
          {"guessed_blocks", c.guessed_blocks},
          {"credited_blocks", c.credited_blocks}};
}

nlohmann::json guard_json(const routing::LoadGuard& g, uint32_t guarded_out) {
  return {{"enabled", g.enabled},         {"max_queue_depth", g.max_queue_depth},
          {"max_kv_used", g.max_kv_used}, {"spread_abs", g.spread_abs},
          {"spread_rel", g.spread_rel},   {"guarded_out", guarded_out}};
}

}  // namespace

AdminApi::AdminApi(GatewayServices& services, RejectionLog& rejections)
    : s_(services), rejections_(rejections) {}

void AdminApi::add_routes(http::RouteTable& rt) {
  rt.post("/admin/v1/routes/explain", [this](Exchange& ex) { return explain_route(ex); });
}

asio::awaitable<bool> AdminApi::authorized(Exchange& ex) {
  if (!key_.enabled()) {
    (void)co_await ex.respond_error(
        forbidden("The admin API is closed: set [router.admin] key_env to a variable holding an admin key."));
    co_return false;
  }
  if (!key_.check_authorization(ex.request()[http::Field::authorization])) {
    rejections_.note("admin_auth", ex.remote_address());
    (void)co_await ex.respond_error(
        unauthorized("Incorrect or missing admin key: send 'Authorization: Bearer <admin key>'."));
    co_return false;
  }
  co_return true;
}

nlohmann::json AdminApi::explain(NodeTable& nodes, const routing::RouteRequest& rr) {
  nlohmann::json out;
  std::vector<std::string> digests;
  for (size_t i = 0; i < rr.digests.size() && i < kMaxDigestsShown; ++i) {
    digests.push_back(to_hex(rr.digests[i]));
  }
  out["model"] = std::string(rr.model);
  out["request_blocks"] = rr.digests.size();
  out["prompt_tokens"] = rr.prompt_tokens;
  out["digests"] = digests;
  nodes.locked([&](routing::RoutingCore& core, NodeTable::Nodes& table) {
    const auto& p = core.policy();
    out["policy"] = p.ranking->name();
    out["temperature_s"] = p.temperature_s;
    auto decided = core.explain(rr);
    std::map<routing::NodeIndex, nlohmann::json> ranked;
    if (decided) {
      out["policy"] = decided->policy->name();
      out["guard"] = guard_json(p.guard, decided->guarded_out);
      out["deadline_ok"] = decided->deadline_ok;
      for (size_t i = 0; i < decided->ranked.size(); ++i) {
        ranked[decided->ranked[i].node] = candidate_json(decided->ranked[i], i + 1);
      }
      out["chosen"] = core.node(decided->ranked.front().node)->id;
    } else {
      out["guard"] = guard_json(p.guard, 0);
      out["chosen"] = nullptr;
      out["error"] = {{"code", std::string(routing::to_string(decided.error().code))},
                      {"message", decided.error().message}};
    }
    nlohmann::json list = nlohmann::json::array();
    for (const auto& [name, info] : table) {
      const auto* st = core.node(info.index);
      if (st == nullptr) {
        continue;
      }
      nlohmann::json n = {{"node", name},
                          {"health", std::string(routing::to_string(st->health))},
                          {"cordoned", st->cordoned},
                          {"queue_depth", st->queue_depth},
                          {"running", st->running},
                          {"kv_used_ratio", st->kv_used_ratio},
                          {"inflight", core.inflight_requests(info.index)},
                          {"overlap", overlap_by_tier(core.index(), info.index, rr.digests)}};
      if (auto it = ranked.find(info.index); it != ranked.end()) {
        n["score"] = it->second;
      } else {
        n["excluded"] = excluded_because(core, info.index, rr);
      }
      list.push_back(std::move(n));
    }
    out["nodes"] = std::move(list);
  });
  return out;
}

asio::awaitable<void> AdminApi::explain_route(Exchange& ex) {
  if (!co_await authorized(ex)) {
    co_return;
  }
  const auto endpoint = endpoint_param(ex.request().target());
  if (!endpoint) {
    (void)co_await ex.respond_error(
        bad_request("'endpoint' must be chat, completions, embeddings or responses.", "endpoint"));
    co_return;
  }
  const std::string_view label =
      endpoint->responses ? kResponsesEndpoint : std::string_view(endpoint_name(endpoint->endpoint));
  const RequestIds ids = request_ids(ex.request());
  RequestContext ctx{ex,
                     ex.request(),
                     ids.client,
                     ids.upstream,
                     ex.remote_address(),
                     std::string(kUnknownModel),
                     label,
                     std::chrono::steady_clock::now()};
  std::string previous_response_id;
  auto parsed = parse_body(ctx, endpoint->endpoint, s_, rejections_,
                           endpoint->responses ? &previous_response_id : nullptr);
  if (!parsed) {
    (void)co_await ex.respond_error(parsed.error().code);
    co_return;
  }
  ctx.model = parsed->model;
  set_route(ctx, *parsed, {});  // the digests are those of the model each decision is for
  ctx.role = routing::RoleWanted::kAny;
  if (const auto alias = s_.rc.cascade.aliases.find(parsed->model); alias != s_.rc.cascade.aliases.end()) {
    if (endpoint->responses || endpoint->endpoint == Endpoint::kEmbeddings) {
      (void)co_await ex.respond_error(
          bad_request("The model '" + alias->first +
                          "' is a cascade, served on /v1/chat/completions and /v1/completions only.",
                      "model", "model_not_supported"));
      co_return;
    }
    // Each step as the gateway routes it: its own model and that model's prefix digests. The
    // top level is the first step's decision (where the request goes first).
    nlohmann::json steps = nlohmann::json::array();
    const auto& cfg = alias->second.steps;
    for (size_t i = 0; i < cfg.size(); ++i) {
      ctx.model = cfg[i].model;
      ctx.digests = prefix_digests(*parsed, cfg[i].model, s_.rc.routing.block_bytes);
      nlohmann::json step = explain(s_.nodes, ctx.route());
      step["step"] = i + 1;
      step["gated"] = i + 1 < cfg.size();
      steps.push_back(std::move(step));
    }
    nlohmann::json out = steps.front();
    out.erase("step");
    out.erase("gated");
    out["endpoint"] = label;
    out["cascade"] = {{"alias", alias->first}, {"steps", std::move(steps)}};
    (void)co_await ex.respond(http::make_response(200, out.dump()));
    co_return;
  }
  ctx.digests = prefix_digests(*parsed, parsed->model, s_.rc.routing.block_bytes);
  nlohmann::json out = explain(s_.nodes, ctx.route());
  out["endpoint"] = label;
  if (!previous_response_id.empty()) {
    // A follow-up goes to the node that holds its previous response when the router knows it
    // (ResponsesPlan), whatever the ranking says.
    std::optional<std::string> holder;
    if (s_.responses != nullptr) {
      holder = s_.responses->node_of(previous_response_id);
    }
    out["previous_response_node"] = holder ? nlohmann::json(*holder) : nlohmann::json();
    if (holder) {
      out["chosen"] = *holder;
    }
  }
  (void)co_await ex.respond(http::make_response(200, out.dump()));
}

}  // namespace cgn::router
