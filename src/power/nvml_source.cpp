#include "power/nvml_source.h"

#include <fmt/format.h>

#include <cstring>
#include <optional>

#include "power/shared_library.h"

namespace cgn::power {

namespace {

// From nvml.h (NVML_API_VERSION 13): the types and codes this source uses.
using nvmlReturn_t = int;
using nvmlDevice_t = struct nvmlDevice_st*;
struct nvmlMemory_t {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
constexpr nvmlReturn_t NVML_SUCCESS = 0;
constexpr unsigned kNameBuffer = 96;  // NVML_DEVICE_NAME_V2_BUFFER_SIZE
constexpr unsigned kUuidBuffer = 96;  // NVML_DEVICE_UUID_V2_BUFFER_SIZE
constexpr unsigned kMaxDevices = 64;

struct Api {
  nvmlReturn_t (*init)() = nullptr;
  nvmlReturn_t (*shutdown)() = nullptr;
  nvmlReturn_t (*count)(unsigned*) = nullptr;
  nvmlReturn_t (*handle)(unsigned, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*uuid)(nvmlDevice_t, char*, unsigned) = nullptr;
  nvmlReturn_t (*name)(nvmlDevice_t, char*, unsigned) = nullptr;
  nvmlReturn_t (*power)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*energy)(nvmlDevice_t, unsigned long long*) = nullptr;
  nvmlReturn_t (*limit)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*memory)(nvmlDevice_t, nvmlMemory_t*) = nullptr;
};

class NvmlSource final : public Source {
 public:
  NvmlSource(const config::PowerSourceConfig& cfg)
      : Source(cfg.name, cfg.kind), path_(cfg.path.empty() ? "libnvidia-ml.so.1" : cfg.path) {}

  ~NvmlSource() override {
    if (initialised_) {
      api_.shutdown();
    }
  }

  SourceResult read() override {
    if (auto ready = load(); !ready.ok()) {
      return ready.error();
    }
    unsigned n = 0;
    if (nvmlReturn_t rc = api_.count(&n); rc != NVML_SUCCESS) {
      return make_error(SourceError::kUnavailable, fmt::format("nvmlDeviceGetCount_v2 returned {}", rc));
    }
    std::vector<PowerSample> out;
    for (unsigned i = 0; i < std::min(n, kMaxDevices); ++i) {
      nvmlDevice_t dev = nullptr;
      if (api_.handle(i, &dev) != NVML_SUCCESS) {
        continue;  // NO_PERMISSION devices are counted too
      }
      if (auto s = read_device(dev); s) {
        out.push_back(std::move(*s));
      }
    }
    return out;
  }

 private:
  Status<SourceError> load() {
    if (initialised_) {
      return Ok{};
    }
    if (!lib_) {
      auto lib = SharedLibrary::open(path_);
      if (!lib) {
        return lib.error();
      }
      lib_.emplace(std::move(*lib));
      lib_->bind("nvmlInit_v2", api_.init);
      lib_->bind("nvmlShutdown", api_.shutdown);
      lib_->bind("nvmlDeviceGetCount_v2", api_.count);
      lib_->bind("nvmlDeviceGetHandleByIndex_v2", api_.handle);
      lib_->bind("nvmlDeviceGetUUID", api_.uuid);
      lib_->bind("nvmlDeviceGetName", api_.name);
      lib_->bind("nvmlDeviceGetPowerUsage", api_.power);
      lib_->bind("nvmlDeviceGetTotalEnergyConsumption", api_.energy);
      lib_->bind("nvmlDeviceGetEnforcedPowerLimit", api_.limit);
      lib_->bind("nvmlDeviceGetMemoryInfo", api_.memory);
      if (!api_.init || !api_.shutdown || !api_.count || !api_.handle || !api_.uuid) {
        return make_error(SourceError::kUnsupported,
                          fmt::format("{} lacks nvmlInit_v2, nvmlDeviceGetCount_v2, "
                                      "nvmlDeviceGetHandleByIndex_v2 or nvmlDeviceGetUUID",
                                      path_));
      }
    }
    if (nvmlReturn_t rc = api_.init(); rc != NVML_SUCCESS) {
      return make_error(SourceError::kUnsupported, fmt::format("nvmlInit_v2 returned {}", rc));
    }
    initialised_ = true;
    return Ok{};
  }

  std::optional<PowerSample> read_device(nvmlDevice_t dev) const {
    char uuid[kUuidBuffer] = {};
    if (api_.uuid(dev, uuid, kUuidBuffer) != NVML_SUCCESS || uuid[0] == '\0') {
      return std::nullopt;
    }
    uuid[kUuidBuffer - 1] = '\0';
    PowerSample s = sample(uuid);
    s.window = Window::kAverage;
    s.window_length = std::chrono::milliseconds(1000);
    GpuInfo gpu;
    gpu.uuid = uuid;
    char name[kNameBuffer] = {};
    if (api_.name && api_.name(dev, name, kNameBuffer) == NVML_SUCCESS) {
      name[kNameBuffer - 1] = '\0';
      gpu.name = name;
    }
    nvmlMemory_t mem{};
    if (api_.memory && api_.memory(dev, &mem) == NVML_SUCCESS) {
      gpu.memory_bytes = mem.total;
    }
    s.gpu = gpu;
    unsigned mw = 0;
    if (api_.power && api_.power(dev, &mw) == NVML_SUCCESS) {
      s.watts = mw / 1000.0;
    }
    unsigned long long mj = 0;
    if (api_.energy && api_.energy(dev, &mj) == NVML_SUCCESS) {
      s.counter_uj = mj_to_uj(mj);
    }
    unsigned limit_mw = 0;
    if (api_.limit && api_.limit(dev, &limit_mw) == NVML_SUCCESS && limit_mw > 0) {
      s.power_limit_watts = limit_mw / 1000.0;
    }
    return s;
  }

  std::string path_;
  std::optional<SharedLibrary> lib_;  // closed after the destructor body's api_.shutdown()
  bool initialised_ = false;
  Api api_;
};

}  // namespace

Result<std::unique_ptr<Source>, SourceError> make_nvml_source(const config::PowerSourceConfig& cfg) {
  return std::unique_ptr<Source>(std::make_unique<NvmlSource>(cfg));
}

}  // namespace cgn::power
