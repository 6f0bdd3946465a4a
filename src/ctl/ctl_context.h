// What every cgn-ctl verb shares: the global options, where to print, the exit codes, and the
// outside systems reached the daemons' own way: etcd with the state backend's client
// (state/etcd/etcd_client.h: TLS and auth from [state.etcd]), routers and agents over HTTP.
// One Ctx per invocation, on one thread.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>

#include "core/config.h"
#include "core/http/blocking_call.h"
#include "core/result.h"
#include "routing/prometheus.h"
#include "state/etcd/etcd_client.h"

namespace cgn::ctl {

// Exit codes (docs/cgn-ctl.md): scripts may rely on them.
enum Exit : int {
  kOk = 0,
  kFailed = 1,     // the operation ran and did not succeed (drain timed out, policy rejected)
  kUsage = 2,      // bad flags or configuration
  kNoEtcd = 3,     // etcd cannot be reached
  kNoRouter = 4,   // a router or an agent cannot be reached
  kNeedsEtcd = 5,  // the verb needs state_backend = "etcd"
  kNotFound = 6,   // no such node or recipe
};

struct GlobalOptions {
  std::string config;  // cognitora.toml ([state.etcd], state_backend); empty: defaults
  std::string router = "http://127.0.0.1:8080";
  std::string admin_key_env = "CGN_ADMIN_KEY";  // the variable holding the router's admin key
  std::string metrics_key_env;                  // the variable holding [router.metrics] key, if any
  bool json = false;
  int timeout_ms = 5000;  // each etcd or HTTP call
};

using HttpReply = http::BlockingReply;

// Splits "http://host:port" (or "host:port") into host and port; https is refused.
Result<std::pair<std::string, uint16_t>, int> parse_url(const std::string& url);

class Ctx {
 public:
  Ctx(GlobalOptions options, std::ostream& out, std::ostream& err)
      : opt_(std::move(options)), out_(out), err_(err) {}

  const GlobalOptions& opt() const { return opt_; }
  std::ostream& out() { return out_; }
  // Prints "cgn-ctl: <why>" and returns `code`.
  int fail(int code, const std::string& why);

  // The configuration (loaded once); kUsage when it does not load.
  Result<const config::CognitoraConfig*, int> config();
  // The etcd client, after checking that the state backend is etcd (kNeedsEtcd otherwise) and
  // that etcd answers (kNoEtcd). `verb` names the command in the refusal.
  Result<etcd::EtcdClient*, int> etcd(std::string_view verb);
  // "<prefix>/<rel>" under [state.etcd] prefix.
  std::string key(std::string_view rel);

  // A blocking HTTP call to `base` (a URL) + target; kNoRouter when it cannot connect.
  Result<HttpReply, int> http(const std::string& base, const std::string& verb, const std::string& target,
                              const std::string& body = "", const std::string& bearer = "");
  // The router's /metrics, parsed.
  Result<routing::PromDocument, int> router_metrics();

  // Prints `j` (with --json) or `human` (without).
  void emit(const nlohmann::json& j, const std::string& human);

 private:
  GlobalOptions opt_;
  std::ostream& out_;
  std::ostream& err_;
  std::optional<config::CognitoraConfig> cfg_;
  std::shared_ptr<etcd::EtcdClient> etcd_;
};

// A fixed-width text table: the header row, then the rows.
std::string table(const std::vector<std::vector<std::string>>& rows);
std::string env_or_empty(const std::string& name);
// Runs argv[0] (looked up on PATH) with the caller's environment and waits: its exit status,
// 128 + the signal that ended it, or -1 when it could not start.
int run_program(const std::vector<std::string>& argv);

}  // namespace cgn::ctl
