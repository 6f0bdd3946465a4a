#include "router/router_metrics.h"

namespace cgn::router {

namespace {
std::vector<double> ttft_buckets() {
  return {0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
}
std::vector<double> duration_buckets() {
  return {0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600};
}
}  // namespace

RouterMetrics::RouterMetrics()
    : requests_(registry_.counter("cgn_router_requests_total",
                                  "Gateway requests by model, endpoint and HTTP status.",
                                  {"model", "endpoint", "code"})),
      ttft_(registry_.histogram("cgn_router_chat_ttft_seconds",
                                "Time from request arrival to the first streamed token event relayed.", {},
                                ttft_buckets())),
      duration_(registry_.histogram("cgn_router_request_duration_seconds",
                                    "Whole request duration as the gateway saw it.", {"model", "endpoint"},
                                    duration_buckets())),
      generation_tokens_(registry_.counter("cgn_router_generation_tokens_total",
                                           "Completion tokens reported in upstream usage.", {"model"})),
      prompt_tokens_(registry_.counter("cgn_router_prompt_tokens_total",
                                       "Prompt tokens reported in upstream usage.", {"model"})),
      decision_(registry_.histogram("cgn_router_routing_decision_seconds",
                                    "Time spent in one routing decision.", {},
                                    metrics::exponential_buckets(1e-6, 4, 10))),
      overlap_(registry_.histogram("cgn_router_prefix_overlap_ratio",
                                   "Share of the request's prefix blocks the chosen node held.", {},
                                   metrics::linear_buckets(0.1, 0.1, 10))),
      index_entries_(
          registry_.gauge("cgn_router_prefix_index_entries", "Entries in the router's prefix index.")),
      rejections_(registry_.counter("cgn_router_admission_rejections_total", "Requests refused by admission.",
                                    {"model", "reason"})),
      intake_rejections_(registry_.counter(
          "cgn_router_rejections_total",
          "Connections and requests refused at intake (bad key, a cap, a field only Cognitora sets).",
          {"reason"})),
      retries_(registry_.counter("cgn_router_retries_total",
                                 "Attempts retried on another node before the first token.",
                                 {"model", "reason"})),
      federation_(registry_.counter("cgn_router_federation_forwards_total",
                                    "Requests forwarded to a federation peer.", {"model", "peer"})),
      pd_legs_(registry_.counter("cgn_router_pd_legs_total",
                                 "Disaggregated prefill/decode legs by model, leg and outcome.",
                                 {"model", "leg", "outcome"})),
      pd_handoff_(registry_.histogram("cgn_router_pd_handoff_seconds",
                                      "From the prefill node's answer to the decode node's first byte.", {},
                                      ttft_buckets())),
      cascade_steps_(registry_.counter("cgn_router_cascade_steps_total",
                                       "Cascade steps by alias, step (1-based) and outcome (accepted, "
                                       "escalated, failed, skipped).",
                                       {"alias", "step", "outcome"})),
      cascade_gate_(registry_.histogram("cgn_router_cascade_gate_seconds",
                                        "Time a gated cascade step took (added before the answer), by alias.",
                                        {"alias"}, duration_buckets())),
      grpc_requests_(registry_.counter("cgn_router_grpc_requests_total",
                                       "gRPC calls by method and status code.", {"method", "code"})),
      node_info_(registry_.gauge("cgn_cluster_node_info", "One series per node and model (value 1).",
                                 {"node", "model", "engine", "role", "gpu_name"})),
      node_up_(registry_.gauge("cgn_cluster_node_up",
                               "1 when the node passes health checks and its state is not stale.", {"node"})),
      node_queue_(registry_.gauge("cgn_cluster_node_queue_depth", "Requests waiting on the node.", {"node"})),
      node_running_(registry_.gauge("cgn_cluster_node_running", "Requests running on the node.", {"node"})),
      node_kv_(
          registry_.gauge("cgn_cluster_node_kv_used_ratio", "KV cache use of the node (0..1).", {"node"})),
      node_power_(registry_.gauge("cgn_cluster_node_power_watts", "Power draw of the node.", {"node"})),
      node_limit_(registry_.gauge("cgn_cluster_node_watt_limit", "Soft power limit of the node.", {"node"})),
      node_cordoned_(registry_.gauge("cgn_cluster_node_cordoned", "1 when the node is cordoned.", {"node"})),
      carbon_intensity_(registry_.gauge("cgn_router_carbon_intensity_gco2_per_kwh",
                                        "Latest grid carbon intensity from the [router.carbon] provider.",
                                        {"provider", "zone"})),
      carbon_age_(registry_.gauge("cgn_router_carbon_reading_age_seconds",
                                  "Age of the latest successful carbon reading.", {"provider", "zone"})),
      carbon_gate_(registry_.gauge(
          "cgn_router_carbon_gate_state",
          "Carbon gate state: 1 on the current one (admit, defer, no_reading, stale).", {"state"})),
      carbon_failures_(registry_.counter("cgn_router_carbon_poll_failures_total",
                                         "Failed carbon-provider polls by reason.", {"reason"})) {
  // Series with no labels exist from the start, so every family shows in the first scrape.
  index_entries_.with({}).set(0);
  (void)ttft_.with({});
  (void)decision_.with({});
  (void)overlap_.with({});
  (void)pd_handoff_.with({});
}

void RouterMetrics::request_done(std::string_view model, std::string_view endpoint, unsigned code,
                                 double seconds) {
  requests_.with({std::string(model), std::string(endpoint), std::to_string(code)}).inc();
  duration_.with({std::string(model), std::string(endpoint)}).observe(seconds);
}

void RouterMetrics::tokens(std::string_view model, double prompt, double generation, std::string_view node) {
  if (generation > 0 && !node.empty()) {
    std::lock_guard lock(node_tokens_mu_);
    auto it = node_tokens_.find(node);
    if (it == node_tokens_.end()) {
      it = node_tokens_.emplace(std::string(node), 0.0).first;
    }
    it->second += generation;
  }
  if (prompt > 0) {
    prompt_tokens_.with({std::string(model)}).add(prompt);
  }
  if (generation > 0) {
    generation_tokens_.with({std::string(model)}).add(generation);
    generation_sum_.fetch_add(generation, std::memory_order_relaxed);
  }
}

double RouterMetrics::generation_tokens_total() const {
  return generation_sum_.load(std::memory_order_relaxed);
}

void RouterMetrics::decision(double seconds, double overlap_ratio) {
  decision_.with({}).observe(seconds);
  overlap_.with({}).observe(overlap_ratio);
}

void RouterMetrics::rejected(std::string_view reason) {
  intake_rejections_.with({std::string(reason)}).inc();
}

void RouterMetrics::admission_rejected(std::string_view model, std::string_view reason) {
  rejections_.with({std::string(model), std::string(reason)}).inc();
}

void RouterMetrics::retry(std::string_view model, std::string_view reason) {
  retries_.with({std::string(model), std::string(reason)}).inc();
}

void RouterMetrics::pd_leg(std::string_view model, std::string_view leg, std::string_view outcome) {
  pd_legs_.with({std::string(model), std::string(leg), std::string(outcome)}).inc();
}

void RouterMetrics::carbon_state(std::string_view provider, std::string_view zone,
                                 std::optional<double> gco2_per_kwh, std::optional<double> age_s,
                                 std::string_view state, std::span<const std::string_view> states) {
  if (gco2_per_kwh) {
    carbon_intensity_.with({std::string(provider), std::string(zone)}).set(*gco2_per_kwh);
  }
  if (age_s) {
    carbon_age_.with({std::string(provider), std::string(zone)}).set(*age_s);
  }
  for (std::string_view s : states) {
    carbon_gate_.with({std::string(s)}).set(s == state ? 1 : 0);
  }
}

void RouterMetrics::refresh_cluster(const std::vector<NodeSnapshot>& nodes,
                                    std::optional<double> tokens_per_watt) {
  std::lock_guard lock(mirror_mu_);
  for (auto* f : {&node_info_, &node_up_, &node_queue_, &node_running_, &node_kv_, &node_power_, &node_limit_,
                  &node_cordoned_}) {
    f->clear();
  }
  std::optional<double> power;
  for (const auto& n : nodes) {
    for (const auto& m : n.models) {
      node_info_.with({n.name, m, n.engine, n.role, n.gpu_name}).set(1);
    }
    node_up_.with({n.name}).set(n.up ? 1 : 0);
    node_queue_.with({n.name}).set(n.queue_depth);
    node_running_.with({n.name}).set(n.running);
    node_kv_.with({n.name}).set(n.kv_used_ratio);
    if (n.power_watts) {
      node_power_.with({n.name}).set(*n.power_watts);
      power = power.value_or(0) + *n.power_watts;
    }
    if (n.watt_limit > 0) {
      node_limit_.with({n.name}).set(n.watt_limit);
    }
    node_cordoned_.with({n.name}).set(n.cordoned ? 1 : 0);
  }
  power_total_ = power;
  tokens_per_watt_ = tokens_per_watt;
  refresh_energy(nodes);
}

void RouterMetrics::refresh_energy(const std::vector<NodeSnapshot>& nodes) {
  std::map<std::string, double> tokens;
  {
    std::lock_guard lock(node_tokens_mu_);
    tokens.insert(node_tokens_.begin(), node_tokens_.end());
  }
  std::map<std::string, EnergyMark> marks;
  node_energy_.clear();
  node_joules_per_token_.clear();
  double fleet_joules = 0;
  double fleet_tokens = 0;
  for (const auto& n : nodes) {
    if (!n.energy_joules) {
      continue;  // unknown: no series, and the next known reading starts a new window
    }
    node_energy_[n.name] = *n.energy_joules;
    const auto t = tokens.find(n.name);
    const EnergyMark now{*n.energy_joules, t == tokens.end() ? 0.0 : t->second};
    marks[n.name] = now;
    const auto prev = energy_marks_.find(n.name);
    if (prev == energy_marks_.end()) {
      continue;
    }
    const double dj = now.joules - prev->second.joules;
    const double dt = now.tokens - prev->second.tokens;
    if (dj < 0 || dt <= 0) {
      continue;
    }
    node_joules_per_token_[n.name] = dj / dt;
    fleet_joules += dj;
    fleet_tokens += dt;
  }
  energy_marks_ = std::move(marks);
  joules_per_token_ = fleet_tokens > 0 ? std::optional<double>(fleet_joules / fleet_tokens) : std::nullopt;
}

std::string RouterMetrics::render_energy() const {
  std::string out =
      "# HELP cgn_cluster_node_energy_joules_total Energy the node's power reader counted (J, cumulative).\n"
      "# TYPE cgn_cluster_node_energy_joules_total counter\n";
  for (const auto& [node, j] : node_energy_) {
    out += "cgn_cluster_node_energy_joules_total{node=\"" + metrics::escape_label_value(node) + "\"} " +
           metrics::format_value(j) + "\n";
  }
  out +=
      "# HELP cgn_cluster_node_joules_per_token Energy per generated token of the node over the last mirror "
      "period.\n# TYPE cgn_cluster_node_joules_per_token gauge\n";
  for (const auto& [node, jpt] : node_joules_per_token_) {
    out += "cgn_cluster_node_joules_per_token{node=\"" + metrics::escape_label_value(node) + "\"} " +
           metrics::format_value(jpt) + "\n";
  }
  out +=
      "# HELP cgn_cluster_joules_per_token Energy per generated token of the nodes that report energy, over "
      "the last mirror period.\n# TYPE cgn_cluster_joules_per_token gauge\n";
  if (joules_per_token_) {
    out += "cgn_cluster_joules_per_token " + metrics::format_value(*joules_per_token_) + "\n";
  }
  return out;
}

std::string RouterMetrics::render() {
  std::lock_guard lock(mirror_mu_);
  std::string out = registry_.render();
  out +=
      "# HELP cgn_cluster_power_watts_total Sum of the power draw the nodes report (a gauge; untyped because "
      "of its _total name).\n";
  out += "# TYPE cgn_cluster_power_watts_total untyped\n";
  if (power_total_) {
    out += "cgn_cluster_power_watts_total " + metrics::format_value(*power_total_) + "\n";
  }
  out +=
      "# HELP cgn_cluster_tokens_per_watt Generated tokens per second per watt over the last mirror "
      "period.\n";
  out += "# TYPE cgn_cluster_tokens_per_watt gauge\n";
  if (tokens_per_watt_) {
    out += "cgn_cluster_tokens_per_watt " + metrics::format_value(*tokens_per_watt_) + "\n";
  }
  out += render_energy();
  return out;
}

}  // namespace cgn::router
