#include "power/rapl_source.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>

namespace cgn::power {

std::optional<uint64_t> parse_sysfs_u64(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) {
    text.remove_suffix(1);
  }
  if (text.empty() || text.size() > 20) {
    return std::nullopt;
  }
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc{} || p != text.data() + text.size()) {
    return std::nullopt;
  }
  return v;
}

namespace {

namespace fs = std::filesystem;

// A small sysfs attribute: at most 64 bytes. errno on failure.
Result<std::string, int> read_attr(const fs::path& p) {
  int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return make_error(errno, std::strerror(errno));
  }
  char buf[64];
  ssize_t n = ::read(fd, buf, sizeof buf);
  int err = errno;
  ::close(fd);
  if (n < 0) {
    return make_error(err, std::strerror(err));
  }
  return std::string(buf, static_cast<size_t>(n));
}

struct Zone {
  std::string id;  // "intel-rapl:0", "intel-rapl:0:1"
  fs::path dir;
};

bool is_top_zone(const std::string& n) {
  return n.starts_with("intel-rapl:") && std::count(n.begin(), n.end(), ':') == 1;
}

std::vector<Zone> find_zones(const fs::path& root) {
  std::vector<Zone> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(root, ec)) {
    std::string n = e.path().filename().string();
    if (!is_top_zone(n)) {
      continue;
    }
    out.push_back({n, e.path()});
    for (const auto& c : fs::directory_iterator(e.path(), ec)) {
      std::string cn = c.path().filename().string();
      auto name = read_attr(c.path() / "name");
      if (cn.starts_with(n + ":") && name.ok() && name.value().starts_with("dram")) {
        out.push_back({cn, c.path()});
      }
    }
  }
  std::sort(out.begin(), out.end(), [](const Zone& a, const Zone& b) { return a.id < b.id; });
  return out;
}

class RaplSource final : public Source {
 public:
  RaplSource(const config::PowerSourceConfig& cfg, const Clock& clock)
      : Source(cfg.name, cfg.kind),
        root_(cfg.path.empty() ? "/sys/class/powercap" : cfg.path),
        clock_(clock) {}

  SourceResult read() override {
    std::vector<Zone> zones = find_zones(root_);
    if (zones.empty()) {
      return make_error(SourceError::kUnsupported, fmt::format("no RAPL zones under {}", root_.string()));
    }
    const Nanos now = clock_.now();
    std::vector<PowerSample> out;
    for (const auto& z : zones) {
      auto energy = read_attr(z.dir / "energy_uj");
      if (!energy.ok()) {
        if (energy.error().code == EACCES || energy.error().code == EPERM) {
          return make_error(SourceError::kUnsupported,
                            fmt::format("{}: permission denied (energy_uj is root-only; run as root, grant "
                                        "CAP_DAC_READ_SEARCH or chmod it)",
                                        (z.dir / "energy_uj").string()));
        }
        continue;
      }
      auto uj = parse_sysfs_u64(energy.value());
      if (!uj) {
        return make_error(SourceError::kBadData, fmt::format("{}/energy_uj is not a counter", z.id));
      }
      PowerSample s = sample(z.id);
      s.counter_uj = *uj;
      if (auto range = read_attr(z.dir / "max_energy_range_uj"); range.ok()) {
        s.counter_range_uj = parse_sysfs_u64(range.value());
      }
      s.watts = watts_of(z.id, *uj, s.counter_range_uj, now);
      out.push_back(std::move(s));
    }
    return out;
  }

 private:
  struct Last {
    uint64_t uj = 0;
    Nanos at = 0;
  };

  std::optional<double> watts_of(const std::string& id, uint64_t uj, std::optional<uint64_t> range,
                                 Nanos now) {
    auto [it, fresh] = last_.try_emplace(id, Last{uj, now});
    std::optional<double> w;
    const double dt = nanos_to_seconds(now - it->second.at);
    if (!fresh && dt > 0) {
      w = static_cast<double>(counter_delta(it->second.uj, uj, range)) / 1e6 / dt;
    }
    it->second = Last{uj, now};
    return w;
  }

  fs::path root_;
  const Clock& clock_;
  std::map<std::string, Last> last_;
};

}  // namespace

Result<std::unique_ptr<Source>, SourceError> make_rapl_source(const config::PowerSourceConfig& cfg,
                                                              const Clock& clock) {
  return std::unique_ptr<Source>(std::make_unique<RaplSource>(cfg, clock));
}

}  // namespace cgn::power
