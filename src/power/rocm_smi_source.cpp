#include "power/rocm_smi_source.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <optional>

#include "power/shared_library.h"

namespace cgn::power {

namespace {

// From rocm_smi.h: the types and codes this source uses.
using rsmi_status_t = uint32_t;
constexpr rsmi_status_t RSMI_STATUS_SUCCESS = 0;
constexpr int RSMI_MEM_TYPE_VRAM = 0;
constexpr int RSMI_INVALID_POWER = 0xFFFFFFFF;
constexpr uint32_t kMaxDevices = 64;
constexpr size_t kNameBuffer = 128;

struct Api {
  rsmi_status_t (*init)(uint64_t) = nullptr;
  rsmi_status_t (*shut_down)() = nullptr;
  rsmi_status_t (*count)(uint32_t*) = nullptr;
  rsmi_status_t (*power)(uint32_t, uint64_t*, int*) = nullptr;
  rsmi_status_t (*power_ave)(uint32_t, uint32_t, uint64_t*) = nullptr;
  rsmi_status_t (*energy)(uint32_t, uint64_t*, float*, uint64_t*) = nullptr;
  rsmi_status_t (*cap)(uint32_t, uint32_t, uint64_t*) = nullptr;
  rsmi_status_t (*name)(uint32_t, char*, size_t) = nullptr;
  rsmi_status_t (*memory)(uint32_t, int, uint64_t*) = nullptr;
  rsmi_status_t (*unique_id)(uint32_t, uint64_t*) = nullptr;
};

class RocmSmiSource final : public Source {
 public:
  explicit RocmSmiSource(const config::PowerSourceConfig& cfg)
      : Source(cfg.name, cfg.kind), path_(cfg.path) {}

  ~RocmSmiSource() override {
    if (initialised_) {
      api_.shut_down();
    }
  }

  SourceResult read() override {
    if (auto ready = load(); !ready.ok()) {
      return ready.error();
    }
    uint32_t n = 0;
    if (rsmi_status_t rc = api_.count(&n); rc != RSMI_STATUS_SUCCESS) {
      return make_error(SourceError::kUnavailable, fmt::format("rsmi_num_monitor_devices returned {}", rc));
    }
    std::vector<PowerSample> out;
    for (uint32_t i = 0; i < std::min(n, kMaxDevices); ++i) {
      out.push_back(read_device(i));
    }
    return out;
  }

 private:
  Status<SourceError> open_library() {
    const std::string first = path_.empty() ? "librocm_smi64.so" : path_;
    auto lib = SharedLibrary::open(first);
    if (!lib && path_.empty()) {
      if (auto rocm = SharedLibrary::open("/opt/rocm/lib/librocm_smi64.so")) {
        lib = std::move(rocm);
      }
    }
    if (!lib) {
      return lib.error();
    }
    lib_.emplace(std::move(*lib));
    lib_->bind("rsmi_init", api_.init);
    lib_->bind("rsmi_shut_down", api_.shut_down);
    lib_->bind("rsmi_num_monitor_devices", api_.count);
    lib_->bind("rsmi_dev_power_get", api_.power);
    lib_->bind("rsmi_dev_power_ave_get", api_.power_ave);
    lib_->bind("rsmi_dev_energy_count_get", api_.energy);
    lib_->bind("rsmi_dev_power_cap_get", api_.cap);
    lib_->bind("rsmi_dev_name_get", api_.name);
    lib_->bind("rsmi_dev_memory_total_get", api_.memory);
    lib_->bind("rsmi_dev_unique_id_get", api_.unique_id);
    if (!api_.init || !api_.shut_down || !api_.count) {
      return make_error(SourceError::kUnsupported,
                        fmt::format("{} lacks rsmi_init, rsmi_shut_down or rsmi_num_monitor_devices", first));
    }
    return Ok{};
  }

  Status<SourceError> load() {
    if (initialised_) {
      return Ok{};
    }
    if (!lib_) {
      if (auto st = open_library(); !st.ok()) {
        return st;
      }
    }
    if (rsmi_status_t rc = api_.init(0); rc != RSMI_STATUS_SUCCESS) {
      return make_error(SourceError::kUnsupported, fmt::format("rsmi_init returned {}", rc));
    }
    initialised_ = true;
    return Ok{};
  }

  PowerSample read_device(uint32_t i) const {
    uint64_t id = 0;
    bool has_id = api_.unique_id && api_.unique_id(i, &id) == RSMI_STATUS_SUCCESS;
    PowerSample s = sample(has_id ? fmt::format("{:#x}", id) : fmt::format("card{}", i));
    GpuInfo gpu;
    char name[kNameBuffer] = {};
    if (api_.name && api_.name(i, name, kNameBuffer) == RSMI_STATUS_SUCCESS) {
      name[kNameBuffer - 1] = '\0';
      gpu.name = name;
    }
    uint64_t vram = 0;
    if (api_.memory && api_.memory(i, RSMI_MEM_TYPE_VRAM, &vram) == RSMI_STATUS_SUCCESS) {
      gpu.memory_bytes = vram;
    }
    s.gpu = gpu;
    uint64_t uw = 0;
    int type = RSMI_INVALID_POWER;
    if (api_.power && api_.power(i, &uw, &type) == RSMI_STATUS_SUCCESS && type != RSMI_INVALID_POWER) {
      s.watts = static_cast<double>(uw) / 1e6;
    } else if (api_.power_ave && api_.power_ave(i, 0, &uw) == RSMI_STATUS_SUCCESS) {
      s.watts = static_cast<double>(uw) / 1e6;
    }
    uint64_t ticks = 0;
    uint64_t timestamp = 0;
    float resolution = 0;
    if (api_.energy && api_.energy(i, &ticks, &resolution, &timestamp) == RSMI_STATUS_SUCCESS &&
        resolution > 0 && std::isfinite(resolution)) {
      s.counter_uj = static_cast<uint64_t>(std::llround(static_cast<double>(ticks) * resolution));
    }
    uint64_t cap = 0;
    if (api_.cap && api_.cap(i, 0, &cap) == RSMI_STATUS_SUCCESS && cap > 0) {
      s.power_limit_watts = static_cast<double>(cap) / 1e6;
    }
    return s;
  }

  std::string path_;
  std::optional<SharedLibrary> lib_;  // closed after the destructor body's api_.shut_down()
  bool initialised_ = false;
  Api api_;
};

}  // namespace

Result<std::unique_ptr<Source>, SourceError> make_rocm_smi_source(const config::PowerSourceConfig& cfg) {
  return std::unique_ptr<Source>(std::make_unique<RocmSmiSource>(cfg));
}

}  // namespace cgn::power
