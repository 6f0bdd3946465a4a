#include "testing/etcd_server.h"

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <vector>

namespace cgn::testing {
namespace {

std::string make_base_dir() {
  // tmpfs keeps etcd's fsyncs cheap; fall back to the usual temp dir elsewhere.
  std::error_code ec;
  std::string root = std::filesystem::is_directory("/dev/shm", ec)
                         ? std::string("/dev/shm")
                         : std::filesystem::temp_directory_path().string();
  std::string tmpl = root + "/cgn-etcd-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) {
    throw std::runtime_error("mkdtemp failed under " + root);
  }
  return tmpl;
}

// One bounded HTTP/1.0 GET on 127.0.0.1:port; returns the raw response ("" on failure).
std::string http_get(int port, const std::string& path) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) {
    return {};
  }
  timeval tv{};
  tv.tv_sec = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  std::string out;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
    std::string req = "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    if (::send(fd, req.data(), req.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(req.size())) {
      char buf[1024];
      while (out.size() < 16384) {
        ssize_t n = ::recv(fd, buf, sizeof buf, 0);
        if (n <= 0) {
          break;
        }
        out.append(buf, static_cast<size_t>(n));
      }
    }
  }
  ::close(fd);
  return out;
}

}  // namespace

EtcdServer::EtcdServer() : base_dir_(make_base_dir()) {
  data_dir_ = base_dir_ + "/data";
  log_path_ = base_dir_ + "/etcd.log";
  client_port_ = free_port();
  do {
    admin_port_ = free_port();
  } while (admin_port_ == client_port_);
  do {
    peer_port_ = free_port();
  } while (peer_port_ == client_port_ || peer_port_ == admin_port_);
}

EtcdServer::~EtcdServer() {
  if (process_) {
    process_->stop(std::chrono::milliseconds(2000));
    process_.reset();
  }
  std::error_code ec;
  std::filesystem::remove_all(base_dir_, ec);
}

bool EtcdServer::start(std::chrono::milliseconds timeout, bool serve_endpoint) {
  if (process_ && process_->running()) {
    return healthy();
  }
  process_.reset();
  const std::string client_url =
      (tls_.cert_file.empty() ? "http://127.0.0.1:" : "https://127.0.0.1:") + std::to_string(client_port_);
  const std::string admin_url = "http://127.0.0.1:" + std::to_string(admin_port_);
  const std::string peer_url = "http://127.0.0.1:" + std::to_string(peer_port_);
  std::vector<std::string> argv = {
      "etcd",
      "--name=cgn-test",
      "--data-dir=" + data_dir_,
      "--listen-client-urls=" + (serve_endpoint ? client_url + "," + admin_url : admin_url),
      "--advertise-client-urls=" + admin_url,
      "--listen-peer-urls=" + peer_url,
      "--initial-advertise-peer-urls=" + peer_url,
      "--initial-cluster=cgn-test=" + peer_url,
      "--initial-cluster-state=new",
      "--initial-cluster-token=cgn-test-" + std::to_string(client_port_),
      "--logger=zap",
      "--log-outputs=stderr",
      "--log-level=warn",
      // Fast elections keep restarts quick; leases still allow our 2 s TTLs.
      "--heartbeat-interval=50",
      "--election-timeout=500",
  };
  if (!tls_.cert_file.empty()) {
    argv.push_back("--cert-file=" + tls_.cert_file);
    argv.push_back("--key-file=" + tls_.key_file);
    if (!tls_.client_ca_file.empty()) {
      argv.push_back("--client-cert-auth");
      argv.push_back("--trusted-ca-file=" + tls_.client_ca_file);
    }
  }
  argv.insert(argv.end(), extra_flags_.begin(), extra_flags_.end());
  // If the test process dies without cleaning up (crash, timeout kill), the
  // kernel kills etcd too instead of leaving it running on tmpfs.
  std::error_code ec;
  if (std::filesystem::exists("/usr/bin/setpriv", ec)) {
    argv.insert(argv.begin(), {"/usr/bin/setpriv", "--pdeathsig", "KILL", "--"});
  }
  process_ = std::make_unique<Process>(argv, std::map<std::string, std::string>{}, log_path_);
  return wait_until(
             [this] {
               if (!process_->running()) {
                 return true;  // stop waiting; reported below
               }
               return healthy();
             },
             timeout, std::chrono::milliseconds(20)) &&
         process_->running();
}

void EtcdServer::stop(std::chrono::milliseconds grace) {
  if (process_) {
    process_->stop(grace);
  }
}

void EtcdServer::kill() {
  if (process_ && process_->running()) {
    process_->signal(SIGKILL);
    process_->wait(std::chrono::milliseconds(5000));
  }
}

bool EtcdServer::running() {
  return process_ && process_->running();
}

bool EtcdServer::healthy() const {
  std::string resp = http_get(admin_port_, "/health");
  return resp.find("\"health\":\"true\"") != std::string::npos;
}

std::string EtcdServer::enable_auth(const std::string& password) {
  const std::string ep = "--endpoints=http://" + admin_endpoint();
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"etcdctl", ep, "user", "add", "root:" + password, "--interactive=false"},
        std::vector<std::string>{"etcdctl", ep, "auth", "enable"}}) {
    Process p(args, std::map<std::string, std::string>{{"ETCDCTL_API", "3"}});
    if (p.wait(std::chrono::seconds(20)) != 0) {
      return args[2] + " " + args[3] + " failed: " + p.log();
    }
  }
  return {};
}

std::string EtcdServer::endpoint() const {
  return "127.0.0.1:" + std::to_string(client_port_);
}

std::string EtcdServer::admin_endpoint() const {
  return "127.0.0.1:" + std::to_string(admin_port_);
}

std::string EtcdServer::log() const {
  return read_file(log_path_);
}

}  // namespace cgn::testing
