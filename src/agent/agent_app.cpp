#include "agent/agent_app.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <span>

#include "agent/agent_grpc.h"
#include "agent/agent_proxy.h"
#include "agent/engine_digests.h"
#include "agent/gpu_identity.h"
#include "agent/kv_event_subscriber.h"
#include "agent/kv_residency.h"
#include "agent/node_agent.h"
#include "core/atomic_file.h"
#include "core/host_port.h"
#include "core/log.h"
#include "core/version.h"
#include "kvcached/kv_client.h"
#include "power/reader.h"
#include "state/backends.h"

namespace cgn::agent {

namespace {

constexpr int kExitFailure = 2;

Error<int> failure(const std::string& message) {
  return cli_exit(kExitFailure, "cgn-agent: " + message + "\n");
}

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) {
    return "localhost";
  }
  return buf;
}

std::chrono::milliseconds ms(uint32_t n) {
  return std::chrono::milliseconds(n);
}

// The driver and the engine's command line (what --print-command shows).
struct EnginePlan {
  const EngineDriver* driver = nullptr;
  LaunchCommand command;
};

CliResult<EnginePlan> plan_engine(const AgentSetup& setup) {
  if (auto st = log::configure(setup.config.log.level, setup.log_level, setup.config.log.file); !st) {
    return failure(st.error().message);
  }
  auto driver = builtin_drivers().find(setup.driver);
  if (!driver) {
    return failure(driver.error().message);
  }
  auto command = (*driver)->launch_command(setup.config.engine, setup.launch);
  if (!command) {
    return failure(command.error().message);
  }
  return EnginePlan{*driver, std::move(*command)};
}

// The NodeAgent's options: timings from [agent], the record's identity fields (GPU probed), and
// where the data path listens.
struct NodePlan {
  NodeAgentOptions node;
  std::string listen_host;
  uint16_t listen_port = 0;
};

void fill_timings(const config::AgentConfig& t, NodeAgentOptions& o) {
  o.scrape_interval = ms(t.scrape_interval_ms);
  o.supervisor.probe_interval = ms(t.probe_interval_ms);
  o.supervisor.backoff_initial = ms(t.restart_backoff_initial_ms);
  o.supervisor.backoff_max = ms(t.restart_backoff_max_ms);
  o.supervisor.stop_grace = ms(t.stop_grace_ms);
  o.supervisor.outlive_agent = t.engine_outlives_agent;
}

CliResult<NodePlan> plan_node(const AgentSetup& setup) {
  const auto& ac = setup.config.agent;
  const auto& engine = setup.config.engine;
  NodePlan plan;
  NodeAgentOptions& o = plan.node;
  o.engine = engine;
  o.launch = setup.launch;
  fill_timings(ac, o);
  o.supervisor.host = setup.launch.engine_host;
  auto listen = split_host_port(ac.listen);
  if (!listen) {
    return failure("[agent] listen \"" + ac.listen + "\" is not HOST:PORT");
  }
  plan.listen_host = listen->first;
  plan.listen_port = listen->second;
  auto& base = o.base;
  base.node_id = ac.node_id.empty() ? host_name() : ac.node_id;
  base.address = setup.advertise;
  if (base.address.empty()) {
    const bool wildcard = listen->first == "0.0.0.0" || listen->first == "::" || listen->first.empty();
    base.address = (wildcard ? host_name() : ac.listen.substr(0, ac.listen.rfind(':'))) + ":" +
                   std::to_string(listen->second);
  }
  base.models = {engine.served_name.empty() ? engine.model : engine.served_name};
  base.engine = setup.driver;
  base.role = setup.launch.role;
  base.watt_limit = ac.watt_limit;
  base.version = cgn::version();
  base.generation = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                              std::chrono::system_clock::now().time_since_epoch())
                                              .count());
  GpuProbeOptions gp;
  gp.gpus = engine.gpus;
  if (auto gpu = probe_gpu_identity(gp)) {
    base.gpu = *gpu;
  } else {
    CGN_LOG_INFO(log::get("agent"), "no GPU identity", log::kv("reason", gpu.error().message));
  }
  return plan;
}

}  // namespace

std::optional<Error<int>> agent_print_mode(const AgentSetup& setup) {
  if (!setup.print_command && !setup.print_record) {
    return std::nullopt;
  }
  auto engine = plan_engine(setup);
  if (!engine) {
    return engine.error();
  }
  if (setup.print_command) {
    return cli_exit(0, render_command(engine->command) + "\n");
  }
  auto plan = plan_node(setup);
  if (!plan) {
    return plan.error();
  }
  auto& base = plan->node.base;
  base.kv_epoch = base.generation;
  return cli_exit(0, cluster::to_json(base) + "\n");
}

AgentApp::AgentApp(AgentSetup setup, const Clock& clock)
    : setup_(std::move(setup)), clock_(clock), cluster_token_(setup_.config.cluster.tokens) {}

AgentApp::~AgentApp() {
  stop(clock_.now());
}

CliResult<Ok> AgentApp::start() {
  started_ = true;  // from here on stop() undoes whatever part was started
  auto engine = plan_engine(setup_);
  if (!engine) {
    return engine.error();
  }
  driver_ = engine->driver;
  auto plan = plan_node(setup_);
  if (!plan) {
    return plan.error();
  }
  if (auto st = start_power(); !st) {
    stop(clock_.now());
    return st;
  }
  if (power_) {
    plan->node.power = [r = power_.get()] {
      const power::Snapshot s = r->snapshot();
      PowerFigures f;
      f.watts = s.total_watts();
      if (!s.devices.empty()) {
        f.energy_joules = power::uj_to_joules(s.total_energy_uj());
      }
      for (const auto& d : s.devices) {
        if (d.latest.power_limit_watts) {
          f.enforced_limit_watts = f.enforced_limit_watts.value_or(0) + *d.latest.power_limit_watts;
        }
      }
      return f;
    };
  }
  auto node = NodeAgent::create(*driver_, std::move(plan->node));
  if (!node) {
    return failure(node.error().message);
  }
  node_ = std::move(*node);
  CliResult<Ok> st = start_grpc();
  if (st) {
    st = make_publisher();
  }
  if (st) {
    st = start_kv_events();
  }
  if (st) {
    st = start_residency();
  }
  if (st) {
    st = start_proxy(plan->listen_host, plan->listen_port);
  }
  if (!st) {
    stop(clock_.now());
    return st;
  }
  auto logger = log::get("agent");
  CGN_LOG_INFO(logger, "starting engine", log::kv("driver", setup_.driver),
               log::kv("command", render_command(node_->command())));
  node_->start();
  if (auto pub = publisher_->start(); !pub) {
    stop(clock_.now());
    return failure(pub.error().message);
  }
  CGN_LOG_INFO(logger, "publishing", log::kv("how", publisher_->describe()));
  return Ok{};
}

// [[power.sources]]: an in-process reader, polled every [power] poll_interval_ms (docs/agent.md
// "Power"); kind = "cgn_power" reads a running cgn-power daemon instead of the sensors. None
// configured: the record carries no power figures (unknown, not 0 W).
CliResult<Ok> AgentApp::start_power() {
  const auto& pc = setup_.config.power;
  if (pc.sources.empty()) {
    return Ok{};
  }
  auto reader = power::Reader::from_config(pc, power::builtin_sources(setup_.config.tls));
  if (!reader) {
    return failure("[power] " + reader.error().message);
  }
  power_ = std::move(*reader);
  power_->start(std::chrono::milliseconds(pc.poll_interval_ms));
  CGN_LOG_INFO(log::get("agent"), "reading power in process", log::kv("sources", pc.sources.size()),
               log::kv("poll_interval_ms", pc.poll_interval_ms));
  return Ok{};
}

CliResult<Ok> AgentApp::reload() {
  auto logger = log::get("agent");
  if (setup_.config_path.empty()) {
    CGN_LOG_WARN(logger, "SIGHUP ignored: no --config file to reload");
    return failure("no --config file to reload");
  }
  auto cfg = config::load_config(setup_.config_path);
  if (!cfg) {
    CGN_LOG_ERROR(logger, "reload failed; keeping the current watt_limit",
                  log::kv("error", cfg.error().message));
    return failure(cfg.error().message);
  }
  if (!node_ || stopped_) {
    return Ok{};
  }
  node_->set_watt_limit(cfg->agent.watt_limit);
  CGN_LOG_INFO(logger, "reloaded [agent] watt_limit", log::kv("configured", cfg->agent.watt_limit),
               log::kv("effective", node_->record().watt_limit));
  return Ok{};
}

// gRPC service Agent (Health). Only the default address may fail: then the agent serves without
// Health rather than not at all (docs/agent.md).
CliResult<Ok> AgentApp::start_grpc() {
  const std::string& listen = setup_.config.agent.grpc_listen;
  NodeAgent* node = node_.get();
  auto server = AgentGrpcServer::start(
      listen,
      [node] {
        return cluster::AgentHealth{node->record(), node->supervisor().state(), node->supervisor().starts()};
      },
      cluster::GrpcSecurity{cluster_token_, setup_.config.tls});
  auto logger = log::get("agent");
  if (!server) {
    if (listen != config::AgentConfig{}.grpc_listen) {
      return failure("[agent] grpc_listen: " + server.error().message);
    }
    CGN_LOG_WARN(logger, "gRPC Agent service not started", log::kv("reason", server.error().message));
    return Ok{};
  }
  grpc_ = std::move(*server);
  CGN_LOG_INFO(logger, "gRPC Agent service", log::kv("listen", listen), log::kv("port", grpc_->port()));
  if (!setup_.grpc_port_file.empty()) {
    if (auto w = write_port_file(setup_.grpc_port_file, grpc_->port()); !w) {
      return failure(w.error().message);
    }
  }
  return Ok{};
}

// [agent] state_backend: how the record (and live KV prefixes) reach the routers.
CliResult<Ok> AgentApp::make_publisher() {
  auto backend = state::builtin_backends().find(setup_.config.agent.state_backend);
  if (!backend) {
    return failure("[agent] " + backend.error().message);
  }
  NodeAgent* node = node_.get();
  auto made = (*backend)->make_publisher(
      cluster::PublisherParams{setup_.config, node->record().node_id, [node] { return node->record(); }});
  if (!made) {
    return failure(made.error().message);
  }
  publisher_ = std::move(*made);
  return Ok{};
}

// [engine] kv_events: the engine's KV events withdraw evicted prefixes (docs/agent.md "KV events").
// Its metrics are added to the proxy's registry in start_proxy().
CliResult<Ok> AgentApp::start_kv_events() {
  auto sub = kv_events_subscription(*driver_, setup_.launch);
  if (!sub) {
    return failure("[engine] " + sub.error().message);
  }
  if (!sub->has_value()) {
    return Ok{};
  }
  kv_events_ = std::make_unique<KvEventSubscriber>(
      **sub, [p = publisher_.get()](const cluster::KvWithdrawal& w) { p->withdraw(w); });
  if (auto st = kv_events_->start(); !st) {
    return failure("[engine] kv_events: " + st.error().message);
  }
  return Ok{};
}

// kv_offload = "cgn": what the node's cgn-kvcached holds of the prompts served here, looked up
// every publish interval, published where the backend carries tiers (etcd) and handed to the
// engine in kv_transfer_params (docs/agent.md "Tiered KV").
CliResult<Ok> AgentApp::start_residency() {
  if (setup_.launch.kv_offload != KvOffload::kCgn) {
    return Ok{};
  }
  auto logger = log::get("agent");
  auto client = kvcached::KvClient::connect(setup_.launch.kvcached_target, setup_.config.tls);
  if (!client) {
    return failure("[kvcached] listen " + setup_.launch.kvcached_target + ": " + client.error().message);
  }
  kvcached_ = std::move(*client);
  const uint32_t block_bytes = setup_.config.router.routing.block_bytes;
  EngineNaming naming = engine_naming(setup_.driver, setup_.config.engine, block_bytes);
  engine_chain_ = naming.chain;
  KvResidencyOptions o;
  o.ns = naming.ns;
  o.block_bytes = block_bytes;
  o.interval = std::chrono::milliseconds(setup_.config.agent.publish_interval_ms);
  o.max_digests = setup_.config.agent.max_published_prefixes;
  ResidencySink sink;
  if (publisher_->carries_tiers()) {
    sink = [p = publisher_.get()](const ResidencyChange& c) { p->record_residency(c.resident, c.gone); };
  } else {
    CGN_LOG_WARN(logger,
                 "kv_offload = \"cgn\": the state backend carries no tiers, so the routers do not see what "
                 "cgn-kvcached holds (records must fit a datagram); the engine still gets the hints",
                 log::kv("state_backend", publisher_->backend()));
  }
  residency_ = std::make_unique<KvResidency>(
      o,
      [c = kvcached_.get()](const kvcache::BlockNamespace& ns, const std::vector<std::vector<Digest>>& reqs,
                            uint32_t lease_ms) { return c->batch_lookup(ns, reqs, lease_ms); },
      std::move(sink));
  residency_->start();
  CGN_LOG_INFO(logger, "looking up residency in cgn-kvcached",
               log::kv("target", setup_.launch.kvcached_target), log::kv("model", o.ns.model),
               log::kv("block_tokens", o.ns.block_tokens));
  return Ok{};
}

CliResult<Ok> AgentApp::start_proxy(const std::string& host, uint16_t port) {
  const auto& ac = setup_.config.agent;
  AgentProxyOptions px;
  px.host = host;
  px.port = port;
  px.node_id = node_->record().node_id;
  px.engine = http::Upstream{setup_.launch.engine_host, setup_.config.engine.port, false};  // external: url
  if (ac.engine_metrics) {
    px.engine_metrics_path = driver_->metrics_path(setup_.launch).value_or("");
  }
  px.block_bytes = setup_.config.router.routing.block_bytes;
  px.cluster_token = cluster_token_;
  px.tls = setup_.config.tls;
  auto logger = log::get("agent");
  if (!cluster_token_.configured() && !setup_.config.tls.enabled()) {
    CGN_LOG_WARN(logger,
                 "no cluster credential: /v1/* and the Agent service answer anyone who reaches them "
                 "([cluster] token_file / token_env, or [tls] with client certificates; docs/security.md)",
                 log::kv("listen", ac.listen), log::kv("grpc_listen", ac.grpc_listen));
  }
  PrefixRecorder recorder;
  if (publisher_->carries_prefixes()) {
    recorder = [p = publisher_.get()](std::span<const Digest> chain) { p->record_prefixes(chain); };
  }
  if (residency_) {
    px.kv_hints = [r = residency_.get(), chain = engine_chain_, block_bytes = px.block_bytes](
                      std::string_view path, std::string_view body) {
      KvHints h;
      h.prefix = chain(path, body);
      r->track(completion_digests(path, body, nullptr, block_bytes), h.prefix);
      h.resident = r->resident_run(h.prefix);
      return h;
    };
  }
  NodeAgent* node = node_.get();
  proxy_ = std::make_unique<AgentProxy>(
      px,
      [node] {
        const auto s = node->supervisor().state();
        return EngineHealth{s == cluster::EngineState::kReady, std::string(cluster::to_string(s))};
      },
      recorder);
  publisher_->attach_metrics(proxy_->registry());
  if (kv_events_) {
    add_kv_event_metrics(proxy_->registry(), *kv_events_, publisher_.get());
  }
  if (residency_) {
    add_kv_residency_metrics(proxy_->registry(), *residency_);
  }
  auto bound = proxy_->start();
  if (!bound) {
    return failure("cannot serve on " + ac.listen + ": " + bound.error().message);
  }
  CGN_LOG_INFO(logger, "serving", log::kv("listen", px.host + ":" + std::to_string(*bound)),
               log::kv("advertise", node_->record().address), log::kv("state_backend", ac.state_backend));
  return Ok{};
}

void AgentApp::stop(Nanos deadline) {
  if (!started_ || stopped_) {
    return;
  }
  stopped_ = true;
  const auto grace = [&] {
    return std::chrono::milliseconds(std::max<Nanos>(0, deadline - clock_.now()) / kNanosPerMilli);
  };
  if (proxy_) {
    proxy_->stop(grace());
  }
  if (kv_events_) {
    kv_events_->stop();
  }
  if (residency_) {
    residency_->stop();
  }
  if (publisher_) {
    publisher_->stop();  // leave the cluster at once (etcd: revoke the lease, not wait for the TTL)
  }
  if (grpc_) {
    grpc_->stop(std::min(grace(), std::chrono::milliseconds(1000)));
  }
  if (node_) {
    node_->stop();
  }
  if (power_) {
    power_->stop();
  }
}

Nanos AgentApp::shutdown_deadline() const {
  return clock_.now() + static_cast<Nanos>(setup_.config.router.timeouts.shutdown_grace_ms) * kNanosPerMilli;
}

uint16_t AgentApp::port() const {
  return proxy_ ? proxy_->port() : 0;
}

uint16_t AgentApp::grpc_port() const {
  return grpc_ ? grpc_->port() : 0;
}

}  // namespace cgn::agent
