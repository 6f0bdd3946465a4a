#include "ctl/ctl_context.h"

#include <fmt/format.h>
#include <spawn.h>
#include <sys/wait.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include "core/host_port.h"
#include "core/http/blocking_call.h"

extern char** environ;

namespace cgn::ctl {

Result<std::pair<std::string, uint16_t>, int> parse_url(const std::string& url) {
  std::string_view rest = url;
  if (rest.starts_with("https://")) {
    return make_error(int{kUsage},
                      "'" + url + "': https is not supported by cgn-ctl yet; use the plain-HTTP listener");
  }
  if (rest.starts_with("http://")) {
    rest.remove_prefix(7);
  }
  while (rest.ends_with('/')) {
    rest.remove_suffix(1);
  }
  if (auto hp = split_host_port(rest)) {
    return std::move(*hp);
  }
  return make_error(int{kUsage}, "'" + url + "' is not http://HOST:PORT");
}

int Ctx::fail(int code, const std::string& why) {
  err_ << "cgn-ctl: " << why << "\n";
  return code;
}

Result<const config::CognitoraConfig*, int> Ctx::config() {
  if (!cfg_) {
    if (opt_.config.empty()) {
      cfg_.emplace();
    } else {
      auto c = config::load_config(opt_.config);
      if (!c) {
        return make_error(fail(kUsage, c.error().message), "config");
      }
      cfg_ = std::move(*c);
    }
  }
  return &*cfg_;
}

Result<etcd::EtcdClient*, int> Ctx::etcd(std::string_view verb) {
  auto cfg = config();
  if (!cfg) {
    return cfg.error();
  }
  const std::string& backend = (*cfg)->router.state_backend;
  if (backend != "etcd") {
    return make_error(
        fail(kNeedsEtcd,
             fmt::format("'{}' needs etcd: state_backend is \"{}\" ({}); node records, cordons and "
                         "policies live in etcd",
                         verb, backend, opt_.config.empty() ? "the default" : opt_.config)),
        "needs etcd");
  }
  if (!etcd_) {
    auto options = etcd::client_options_from_config((*cfg)->state.etcd);
    options.call_timeout = std::chrono::milliseconds(opt_.timeout_ms);
    auto client = etcd::EtcdClient::create(std::move(options));
    if (!client) {
      return make_error(fail(kUsage, "[state.etcd]: " + client.error().message), "etcd");
    }
    etcd_ = std::move(*client);
  }
  if (auto st = etcd_->status(); !st) {
    std::string eps;
    for (const auto& e : (*cfg)->state.etcd.endpoints) {
      eps += (eps.empty() ? "" : ", ") + e;
    }
    return make_error(fail(kNoEtcd, "cannot reach etcd at " + eps + ": " + st.error().message), "etcd");
  }
  return etcd_.get();
}

std::string Ctx::key(std::string_view rel) {
  auto cfg = config();
  std::string prefix = cfg ? (*cfg)->state.etcd.prefix : "/cognitora";
  while (prefix.ends_with('/')) {
    prefix.pop_back();
  }
  return prefix + "/" + std::string(rel);
}

Result<HttpReply, int> Ctx::http(const std::string& base, const std::string& verb, const std::string& target,
                                 const std::string& body, const std::string& bearer) {
  auto hp = parse_url(base);
  if (!hp) {
    return make_error(fail(hp.error().code, hp.error().message), "url");
  }
  auto reply = http::blocking_call(hp->first, hp->second, verb == "POST" ? http::Verb::post : http::Verb::get,
                                   target, body, bearer, std::chrono::milliseconds(opt_.timeout_ms));
  if (!reply) {
    return make_error(fail(kNoRouter, "cannot reach " + base + target + ": " + reply.error().message),
                      "http");
  }
  return std::move(*reply);
}

Result<routing::PromDocument, int> Ctx::router_metrics() {
  auto r = http(opt_.router, "GET", "/metrics", "", env_or_empty(opt_.metrics_key_env));
  if (!r) {
    return r.error();
  }
  if (r->status != 200) {
    return make_error(fail(kFailed, opt_.router + "/metrics answered " + std::to_string(r->status)),
                      "metrics");
  }
  auto doc = routing::parse_prometheus_text(r->body);
  if (!doc) {
    return make_error(fail(kFailed, opt_.router + "/metrics: " + doc.error().message), "metrics");
  }
  return std::move(*doc);
}

void Ctx::emit(const nlohmann::json& j, const std::string& human) {
  if (opt_.json) {
    out_ << j.dump(2) << "\n";
  } else {
    out_ << human;
  }
}

std::string table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> w;
  for (const auto& r : rows) {
    w.resize(std::max(w.size(), r.size()));
    for (size_t i = 0; i < r.size(); ++i) {
      w[i] = std::max(w[i], r[i].size());
    }
  }
  std::string out;
  for (const auto& r : rows) {
    std::string line;
    for (size_t i = 0; i < r.size(); ++i) {
      line += r[i];
      if (i + 1 < r.size()) {
        line += std::string(w[i] - r[i].size() + 2, ' ');
      }
    }
    out += line + "\n";
  }
  return out;
}

std::string env_or_empty(const std::string& name) {
  if (name.empty()) {
    return "";
  }
  const char* v = std::getenv(name.c_str());
  return v == nullptr ? "" : std::string(v);
}

int run_program(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (const auto& a : args) {
    argv.push_back(const_cast<char*>(a.c_str()));
  }
  argv.push_back(nullptr);
  pid_t pid = 0;
  if (args.empty() || posix_spawnp(&pid, argv[0], nullptr, nullptr, argv.data(), environ) != 0) {
    return -1;
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace cgn::ctl
