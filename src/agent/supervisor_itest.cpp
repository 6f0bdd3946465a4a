// The supervisor against a fake engine (testdata/fake_engine.py, started through wrapper scripts
// named like the real engines so the drivers' real command lines run), on loopback.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <memory>
#include <mutex>

#include "agent/loopback_get.h"
#include "agent/supervisor.h"
#include "core/log.h"
#include "testing/process.h"

namespace cgn::agent {
namespace {

using namespace std::chrono_literals;
using cgn::testing::TempDir;
using cgn::testing::wait_until;

// Collects what the supervisor reports; thread-safe.
class Recorder {
 public:
  StateListener listener() {
    return [this](const StateChange& c) {
      std::lock_guard lock(mu_);
      changes_.push_back(c);
    };
  }
  LineSink sink() {
    return [this](std::string_view line) {
      std::lock_guard lock(mu_);
      lines_.emplace_back(line);
    };
  }
  std::vector<StateChange> changes() {
    std::lock_guard lock(mu_);
    return changes_;
  }
  std::vector<cluster::EngineState> states() {
    std::vector<cluster::EngineState> out;
    for (const auto& c : changes()) {
      out.push_back(c.state);
    }
    return out;
  }
  size_t count(cluster::EngineState s) {
    size_t n = 0;
    for (auto st : states()) {
      n += st == s ? 1 : 0;
    }
    return n;
  }
  bool saw_line(std::string_view part) {
    std::lock_guard lock(mu_);
    for (const auto& l : lines_) {
      if (l.find(part) != std::string::npos) {
        return true;
      }
    }
    return false;
  }
  size_t lines_with(std::string_view part) {
    std::lock_guard lock(mu_);
    size_t n = 0;
    for (const auto& l : lines_) {
      n += l.find(part) != std::string::npos ? 1 : 0;
    }
    return n;
  }

 private:
  std::mutex mu_;
  std::vector<StateChange> changes_;
  std::vector<std::string> lines_;
};

// A bin directory holding `name` -> the fake engine with that flavour.
void write_wrapper(const TempDir& dir, const std::string& name, const std::string& flavour,
                   const std::string& loaded_file) {
  const std::string path = dir.file(name);
  cgn::testing::write_file(path, "#!/bin/sh\nFAKE_ENGINE_FLAVOUR=" + flavour + " FAKE_ENGINE_LOADED='" +
                                     loaded_file + "' exec python3 '" +
                                     cgn::testing::source_path("src/agent/testdata/fake_engine.py") +
                                     "' \"$@\"\n");
  ::chmod(path.c_str(), 0755);
}

void write_script(const TempDir& dir, const std::string& name, const std::string& body) {
  const std::string path = dir.file(name);
  cgn::testing::write_file(path, "#!/bin/sh\n" + body);
  ::chmod(path.c_str(), 0755);
}

SupervisorOptions fast_options(const TempDir& dir, uint16_t port) {
  SupervisorOptions o;
  o.port = port;
  o.probe_interval = 20ms;
  o.ready_probe_interval = 20ms;
  o.probe_timeout = 500ms;
  o.unhealthy_after = 2;
  o.backoff_initial = 20ms;
  o.backoff_max = 80ms;
  o.stop_grace = 3000ms;
  o.path_env = dir.path() + ":/usr/local/bin:/usr/bin:/bin";
  return o;
}

LaunchCommand command_for(const std::string& driver, config::EngineConfig engine,
                          const LaunchOptions& opts = {}) {
  auto cmd = (*builtin_drivers().find(driver))->launch_command(engine, opts);
  EXPECT_TRUE(cmd.ok());
  return *cmd;
}

bool process_gone(pid_t pid) {
  return ::kill(pid, 0) != 0;
}

config::EngineConfig engine_for(std::string model, uint16_t port) {
  config::EngineConfig engine;
  engine.model = std::move(model);
  engine.port = port;
  return engine;
}

// `driver`'s command for `engine` under a started Supervisor that probes with `health`.
std::unique_ptr<Supervisor> start_supervised(const TempDir& dir, const std::string& driver,
                                             const config::EngineConfig& engine, const HealthSpec& health,
                                             Recorder& rec) {
  auto sup = std::make_unique<Supervisor>(command_for(driver, engine), health, fast_options(dir, engine.port),
                                          rec.listener(), rec.sink());
  sup->start();
  return sup;
}

// The fake vLLM (ready as soon as it listens) for model "m" on `port`, under a started Supervisor.
std::unique_ptr<Supervisor> start_fake_vllm(const TempDir& dir, uint16_t port, Recorder& rec) {
  write_wrapper(dir, "vllm", "vllm", "");
  return start_supervised(dir, "vllm", engine_for("m", port), HealthSpec{}, rec);
}

// The fake vLLM (model "m", free port) under a started Supervisor, ready before the test body.
class SupervisedReadyVllm : public ::testing::Test {
 protected:
  void SetUp() override {
    supervised_ = start_fake_vllm(dir_, port_, rec_);
    ASSERT_TRUE(wait_until([&] { return supervised_->state() == cluster::EngineState::kReady; }, 10s));
  }

  TempDir dir_;
  const uint16_t port_ = static_cast<uint16_t>(cgn::testing::free_port());
  Recorder rec_;
  std::unique_ptr<Supervisor> supervised_;
};

TEST(Supervisor, vllm_engine_runs_from_the_drivers_command_with_pinned_gpus_and_becomes_ready) {
  TempDir dir;
  const std::string loaded = dir.file("loaded");
  write_wrapper(dir, "vllm", "vllm", loaded);
  const uint16_t port = static_cast<uint16_t>(cgn::testing::free_port());
  auto engine = engine_for("fake/model", port);
  engine.gpus = {0, 1};
  Recorder rec;
  const std::string log_file = dir.file("agent.log");
  log::set_file_sink(log_file);
  auto supervised = start_supervised(dir, "vllm", engine, (*builtin_drivers().find("vllm"))->health({}), rec);
  Supervisor& sup = *supervised;
  // Loading: the port is closed, and that must not count as unhealthy.
  ASSERT_TRUE(wait_until([&] { return rec.saw_line("fake vllm engine"); }, 10s));
  EXPECT_TRUE(wait_until([&] { return rec.count(cluster::EngineState::kStarting) == 1; }, 5s));
  EXPECT_EQ(sup.state(), cluster::EngineState::kStarting);
  cgn::testing::write_file(loaded, "");
  ASSERT_TRUE(wait_until([&] { return sup.state() == cluster::EngineState::kReady; }, 10s));
  EXPECT_TRUE(rec.saw_line("args=serve fake/model --host 127.0.0.1 --port " + std::to_string(port)));
  EXPECT_TRUE(rec.saw_line("env CUDA_VISIBLE_DEVICES=0,1 HIP_VISIBLE_DEVICES=0,1"));
  EXPECT_TRUE(rec.saw_line("this line goes to stderr"));
  EXPECT_EQ(rec.count(cluster::EngineState::kUnhealthy), 0u);
  const pid_t pid = *sup.pid();
  sup.stop();
  EXPECT_EQ(sup.state(), cluster::EngineState::kStopped);
  EXPECT_TRUE(process_gone(pid));
  EXPECT_EQ(rec.states(),
            (std::vector<cluster::EngineState>{cluster::EngineState::kStarting, cluster::EngineState::kReady,
                                               cluster::EngineState::kStopped}));
  log::set_stderr_sink();
  const std::string log_text = cgn::testing::read_file(log_file);
  EXPECT_NE(log_text.find("[engine] this line goes to stderr"), std::string::npos);
  EXPECT_NE(log_text.find("[engine] fake vllm engine"), std::string::npos);
}

TEST(Supervisor, llamacpp_loading_503_is_loading_not_unhealthy) {
  TempDir dir;
  const std::string loaded = dir.file("loaded");
  write_wrapper(dir, "llama-server", "llama-server", loaded);
  const uint16_t port = static_cast<uint16_t>(cgn::testing::free_port());
  Recorder rec;
  auto supervised = start_supervised(dir, "llamacpp", engine_for("/m/q.gguf", port),
                                     (*builtin_drivers().find("llamacpp"))->health({}), rec);
  Supervisor& sup = *supervised;
  // Several probes answered 503 "Loading model" (more than unhealthy_after) ...
  ASSERT_TRUE(wait_until([&] { return rec.lines_with("\"GET /health HTTP/1.1\" 503") >= 4; }, 10s));
  EXPECT_EQ(sup.state(), cluster::EngineState::kStarting);
  EXPECT_EQ(rec.count(cluster::EngineState::kUnhealthy), 0u);
  cgn::testing::write_file(loaded, "");
  ASSERT_TRUE(wait_until([&] { return sup.state() == cluster::EngineState::kReady; }, 10s));
  EXPECT_TRUE(rec.saw_line("--parallel 4 --metrics"));
}

TEST_F(SupervisedReadyVllm, failing_health_after_ready_reports_unhealthy_once_then_ready_again) {
  Supervisor& sup = *supervised_;
  Recorder& rec = rec_;
  const uint16_t port = port_;
  ASSERT_TRUE(loopback_get("127.0.0.1", port, "/fail", 2s).ok());
  ASSERT_TRUE(wait_until([&] { return sup.state() == cluster::EngineState::kUnhealthy; }, 10s));
  // Keep failing for a few more probes: still one report.
  ASSERT_TRUE(wait_until([&] { return rec.lines_with("\"GET /health HTTP/1.1\" 503") >= 5; }, 10s));
  EXPECT_EQ(rec.count(cluster::EngineState::kUnhealthy), 1u);
  ASSERT_TRUE(loopback_get("127.0.0.1", port, "/recover", 2s).ok());
  ASSERT_TRUE(wait_until([&] { return rec.count(cluster::EngineState::kReady) == 2; }, 10s));
  EXPECT_EQ(sup.starts(), 1u);
}

TEST_F(SupervisedReadyVllm, restarts_an_exited_engine_and_reports_each_transition) {
  Supervisor& sup = *supervised_;
  Recorder& rec = rec_;
  const uint16_t port = port_;
  const pid_t first = *sup.pid();
  ASSERT_TRUE(loopback_get("127.0.0.1", port, "/exit?code=3", 2s).ok());
  ASSERT_TRUE(wait_until([&] { return rec.count(cluster::EngineState::kReady) == 2; }, 15s));
  EXPECT_EQ(sup.starts(), 2u);
  EXPECT_NE(*sup.pid(), first);
  const auto changes = rec.changes();
  ASSERT_EQ(changes.size(), 6u);
  EXPECT_EQ(rec.states(), (std::vector<cluster::EngineState>{
                              cluster::EngineState::kStarting, cluster::EngineState::kReady,
                              cluster::EngineState::kExited, cluster::EngineState::kRestarting,
                              cluster::EngineState::kStarting, cluster::EngineState::kReady}));
  EXPECT_EQ(changes[2].detail, "exit status 3");
  EXPECT_EQ(changes[4].starts, 2u);
}

TEST(Supervisor, crash_loop_backs_off_exponentially_up_to_the_cap) {
  TempDir dir;
  write_script(dir, "vllm", "echo crashing\nexit 1\n");
  config::EngineConfig engine;
  engine.model = "m";
  engine.port = 1;  // never probed successfully
  Recorder rec;
  Supervisor sup(command_for("vllm", engine), HealthSpec{}, fast_options(dir, 1), rec.listener(), rec.sink());
  sup.start();
  ASSERT_TRUE(wait_until([&] { return rec.count(cluster::EngineState::kRestarting) >= 5; }, 20s));
  sup.stop();
  std::vector<std::string> delays;
  for (const auto& c : rec.changes()) {
    if (c.state == cluster::EngineState::kRestarting) {
      delays.push_back(c.detail);
    }
  }
  ASSERT_GE(delays.size(), 5u);
  EXPECT_EQ(std::vector<std::string>(delays.begin(), delays.begin() + 5),
            (std::vector<std::string>{"in 20 ms", "in 40 ms", "in 80 ms", "in 80 ms", "in 80 ms"}));
  EXPECT_TRUE(rec.saw_line("crashing"));
  EXPECT_EQ(rec.states().back(), cluster::EngineState::kStopped);
}

TEST(Supervisor, missing_binary_is_reported_and_retried) {
  TempDir dir;
  config::EngineConfig engine;
  engine.model = "m";
  engine.port = 1;
  Recorder rec;
  Supervisor sup(command_for("trtllm", engine), HealthSpec{}, fast_options(dir, 1), rec.listener());
  sup.start();
  ASSERT_TRUE(wait_until([&] { return rec.count(cluster::EngineState::kRestarting) >= 2; }, 10s));
  sup.stop();
  const auto changes = rec.changes();
  ASSERT_FALSE(changes.empty());
  EXPECT_EQ(changes[0].state, cluster::EngineState::kExited);
  EXPECT_EQ(changes[0].detail, "trtllm-serve not found on PATH");
}

TEST(Supervisor, stop_kills_an_engine_that_ignores_sigterm_after_the_grace) {
  TempDir dir;
  // Ignores SIGTERM; prints once it has set the trap so the test knows the trap is in place.
  write_script(dir, "vllm", "trap '' TERM\necho trapped\nwhile :; do sleep 0.05; done\n");
  config::EngineConfig engine;
  engine.model = "m";
  engine.port = 1;
  Recorder rec;
  auto opts = fast_options(dir, 1);
  opts.stop_grace = 200ms;
  Supervisor sup(command_for("vllm", engine), HealthSpec{}, opts, rec.listener(), rec.sink());
  sup.start();
  ASSERT_TRUE(wait_until([&] { return rec.saw_line("trapped"); }, 10s));
  const pid_t pid = *sup.pid();
  sup.stop();
  EXPECT_TRUE(process_gone(pid));
  EXPECT_EQ(sup.state(), cluster::EngineState::kStopped);
  EXPECT_FALSE(sup.pid().has_value());
}

TEST(Supervisor, the_engine_inherits_no_descriptor_of_the_agent) {
  // A listening socket without close-on-exec, as Asio and gRPC leave some: an engine holding it
  // would keep the agent's port after the agent dies. (That the engine dies with its agent is
  // tests/e2e/agent_death_e2e.cpp: it takes killing a real agent.)
  const int sock = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(sock, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(sock, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(sock, 4), 0);
  // Numbered well above what the shell running the script uses for itself (it keeps its script
  // open on a low descriptor, 10 for dash).
  const int leak = ::fcntl(sock, F_DUPFD, 200);
  ASSERT_GE(leak, 200);
  ::close(sock);
  TempDir dir;
  write_script(dir, "vllm",
               "if [ -e /proc/$$/fd/" + std::to_string(leak) +
                   " ]; then echo fd-leaked; else echo fd-clean; fi\n"
                   "while :; do sleep 0.05; done\n");
  config::EngineConfig engine;
  engine.model = "m";
  engine.port = 1;
  Recorder rec;
  Supervisor sup(command_for("vllm", engine), HealthSpec{}, fast_options(dir, 1), rec.listener(), rec.sink());
  sup.start();
  ASSERT_TRUE(wait_until([&] { return rec.saw_line("fd-"); }, 10s));
  EXPECT_TRUE(rec.saw_line("fd-clean"));
  EXPECT_FALSE(rec.saw_line("fd-leaked"));
  sup.stop();
  ::close(leak);
}

TEST(Supervisor, external_engine_is_attached_not_spawned) {
  TempDir dir;
  const uint16_t port = static_cast<uint16_t>(cgn::testing::free_port());
  cgn::testing::Process engine({"python3", cgn::testing::source_path("src/agent/testdata/fake_engine.py"),
                                "--port", std::to_string(port)},
                               {{"FAKE_ENGINE_FLAVOUR", "vllm"}});
  config::EngineConfig cfg;
  cfg.model = "m";
  cfg.port = port;
  LaunchOptions lo;
  lo.attach_kind = "vllm";
  const auto* ext = *builtin_drivers().find("external");
  Recorder rec;
  Supervisor sup(command_for("external", cfg, lo), ext->health(lo), fast_options(dir, port), rec.listener());
  sup.start();
  // An outer bound only: the Python fake engine alone can take seconds to start on a loaded host.
  ASSERT_TRUE(wait_until([&] { return sup.state() == cluster::EngineState::kReady; }, 30s));
  EXPECT_FALSE(sup.pid().has_value());
  EXPECT_EQ(sup.starts(), 0u);
  sup.stop();
  EXPECT_TRUE(engine.running());  // detaching leaves the engine alone
}

}  // namespace
}  // namespace cgn::agent
