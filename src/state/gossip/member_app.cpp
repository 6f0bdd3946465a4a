#include "state/gossip/member_app.h"

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/atomic_file.h"
#include "core/cli_parse.h"

namespace cgn::gossip {

namespace {

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) {
    s.pop_back();
  }
  return s;
}

// The secret named by `env` (empty when the variable is unset).
config::Secret secret_from_env(const std::string& env) {
  const char* v = std::getenv(env.c_str());  // NOLINT(concurrency-mt-unsafe): before any thread
  return config::Secret(v != nullptr ? v : "", env);
}

Error<int> fail(int status, const std::string& message) {
  return cli_exit(status, "cgn-gossip: " + message + "\n");
}

}  // namespace

CliResult<MemberOptions> parse_member_options(int argc, const char* const* argv) {
  MemberOptions o;
  CLI::App app{"cgn-gossip: one gossip member (tests, demos, debugging)"};
  app.add_option("--name", o.name, "Member name (the node id when publishing a record)")->required();
  app.add_option("--listen", o.listen, "UDP HOST:PORT (port 0 picks one)");
  app.add_option("--seed", o.seeds, "Seed HOST:PORT (repeatable)");
  app.add_option("--cluster", o.cluster, "Cluster id");
  app.add_option("--secret-env", o.secret_env, "Environment variable holding the HMAC key");
  app.add_option("--rotation-secret-env", o.rotation_env,
                 "Environment variable holding a second key accepted while keys rotate");
  app.add_flag("--insecure", o.insecure, "Run without a key (unsigned packets; anyone may join)");
  app.add_option("--record-file", o.record_file, "Node record JSON to publish (re-read every second)");
  app.add_option("--port-file", o.port_file, "Write the bound UDP port here");
  app.add_option("--status-file", o.status_file, "Rewrite this file with the member's view every 200 ms");
  app.add_option("--log-level", o.log_level, "trace, debug, info, warn, error, off");
  if (auto parsed = parse_command_line(app, argc, argv); !parsed) {
    return parsed.error();
  }
  return o;
}

std::string member_status_json(const GossipNode& node) {
  nlohmann::json j;
  j["name"] = node.name();
  j["generation"] = node.generation();
  nlohmann::json members = nlohmann::json::array();
  for (const auto& m : node.members()) {
    nlohmann::json e;
    e["name"] = m.name;
    e["generation"] = m.generation;
    e["live"] = m.live;
    e["self"] = m.self;
    e["addr"] = m.addr.to_string();
    e["heartbeat"] = m.heartbeat;
    e["kvs"] = m.kvs;
    members.push_back(e);
  }
  j["members"] = members;
  const auto s = node.stats();
  nlohmann::json rejected;
  for (auto r : {WireError::kSize, WireError::kMagic, WireError::kVersion, WireError::kAuth,
                 WireError::kMalformed, WireError::kBadCluster}) {
    rejected[std::string(to_string(r))] = s.rejected[static_cast<size_t>(r)];
  }
  j["rejected"] = rejected;
  j["packets_in"] = s.packets_in;
  j["packets_out"] = s.packets_out;
  j["superseded"] = s.superseded;
  j["members_dead"] = s.members_dead;
  return j.dump();
}

MemberApp::MemberApp(MemberOptions options) : options_(std::move(options)) {}

MemberApp::~MemberApp() {
  stop();
}

CliResult<uint16_t> MemberApp::start() {
  config::GossipConfig cfg;
  cfg.listen = options_.listen;
  cfg.seeds = options_.seeds;
  cfg.cluster_id = options_.cluster;
  if (!options_.secret_env.empty()) {
    cfg.secret = secret_from_env(options_.secret_env);
  }
  if (!options_.rotation_env.empty()) {
    cfg.rotation_secret = secret_from_env(options_.rotation_env);
  }
  cfg.insecure = options_.insecure;
  auto opts = node_options_from_config(cfg, options_.name);
  if (!opts) {
    return fail(2, opts.error().message);
  }
  auto node = GossipNode::create(*opts);
  if (!node) {
    return fail(2, node.error().message);
  }
  const std::string record_file = options_.record_file;
  publisher_ = std::make_unique<RecordPublisher>(std::move(*node), [record_file] {
    return record_file.empty() ? std::string() : read_all(record_file);
  });
  auto port = record_file.empty() ? publisher_->node().start() : publisher_->start();
  if (!port) {
    publisher_.reset();
    return fail(1, port.error().message);
  }
  started_ = true;
  if (!options_.port_file.empty()) {
    if (auto written = write_port_file(options_.port_file, *port); !written) {
      stop();  // whoever waits for the file would wait forever: fail the start instead
      return fail(2, "--port-file: " + written.error().message);
    }
  }
  if (!options_.status_file.empty()) {
    status_thread_ = std::thread([this] {
      while (!stop_status_.load()) {
        (void)write_file_atomic(options_.status_file, member_status_json(publisher_->node()));
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
      }
    });
  }
  return *port;
}

void MemberApp::stop() {
  if (!started_) {
    return;
  }
  started_ = false;
  stop_status_ = true;
  if (status_thread_.joinable()) {
    status_thread_.join();
  }
  publisher_->stop();
}

}  // namespace cgn::gossip
