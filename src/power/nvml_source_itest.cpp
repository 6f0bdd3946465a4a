// NVML through a fake libnvidia-ml.so.1 (fakes/fake_nvml.c) that dlopen and dlsym really load.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include "power/nvml_source.h"
#include "power/reader.h"
#include "testing/process.h"

namespace cgn::power {
namespace {

struct FakeNvml {
  cgn::testing::TempDir dir;
  std::string script = dir.file("devices");
  FakeNvml() { ::setenv("CGN_FAKE_NVML_FILE", script.c_str(), 1); }
  ~FakeNvml() { ::unsetenv("CGN_FAKE_NVML_FILE"); }
  void devices(const std::string& lines) const { cgn::testing::write_file(script, lines); }
  static config::PowerConfig config(const std::string& path = CGN_FAKE_NVML) {
    config::PowerConfig cfg;
    config::PowerSourceConfig sc;
    sc.name = "gpu";
    sc.kind = "nvml";
    sc.path = path;
    cfg.sources.push_back(sc);
    return cfg;
  }
  // nvmlInit_v2 calls not matched by nvmlShutdown, as the loaded fake counts them.
  static int inits() {
    void* lib = ::dlopen(CGN_FAKE_NVML, RTLD_NOW | RTLD_NOLOAD);
    if (lib == nullptr) {
      return 0;
    }
    auto f = reinterpret_cast<int (*)()>(::dlsym(lib, "cgn_fake_nvml_inits"));
    int n = f ? f() : -1;
    ::dlclose(lib);
    return n;
  }
};

const DeviceReading* find(const Snapshot& s, const std::string& device) {
  for (const auto& d : s.devices) {
    if (d.latest.device == device) {
      return &d;
    }
  }
  return nullptr;
}

TEST(NvmlSource, reads_power_energy_limit_and_identity_keyed_by_uuid) {
  FakeNvml fake;
  fake.devices(
      "GPU-11111111-aaaa 412337 1000000 700000 85899345920 NVIDIA H100 80GB HBM3\n"
      "GPU-22222222-bbbb 71500 2000000 700000 85899345920 NVIDIA H100 80GB HBM3\n");
  {
    auto reader = Reader::from_config(FakeNvml::config());
    ASSERT_TRUE(reader.ok());
    Reader& r = *reader.value();
    r.poll();
    fake.devices(
        "GPU-22222222-bbbb 80250 2000777 650000 85899345920 NVIDIA H100 80GB HBM3\n"  // order changed
        "GPU-11111111-aaaa 400000 1123456 700000 85899345920 NVIDIA H100 80GB HBM3\n");
    r.poll();
    Snapshot s = r.snapshot();
    ASSERT_EQ(s.devices.size(), 2u);
    const DeviceReading* a = find(s, "GPU-11111111-aaaa");
    const DeviceReading* b = find(s, "GPU-22222222-bbbb");
    ASSERT_TRUE(a && b);
    EXPECT_EQ(a->energy_uj, 123'456'000u);  // mJ counter deltas, exact
    EXPECT_EQ(b->energy_uj, 777'000u);
    EXPECT_EQ(a->latest.watts, 400.0);
    EXPECT_EQ(b->latest.watts, 80.25);
    EXPECT_EQ(b->latest.power_limit_watts, 650.0);
    EXPECT_EQ(a->latest.gpu->name, "NVIDIA H100 80GB HBM3");
    EXPECT_EQ(a->latest.gpu->uuid, "GPU-11111111-aaaa");
    EXPECT_EQ(a->latest.gpu->memory_bytes, 85899345920u);
    EXPECT_EQ(FakeNvml::inits(), 1);
  }
  EXPECT_EQ(FakeNvml::inits(), 0);  // the source shut NVML down once
}

TEST(NvmlSource, gpu_without_energy_counter_has_none) {
  FakeNvml fake;
  fake.devices("GPU-33 250000 0 300000 17179869184 Tesla P100-PCIE-16GB\n");
  auto reader = Reader::from_config(FakeNvml::config());
  ASSERT_TRUE(reader.ok());
  reader.value()->poll();
  Snapshot s = reader.value()->snapshot();
  ASSERT_EQ(s.devices.size(), 1u);
  EXPECT_FALSE(s.devices[0].latest.counter_uj.has_value());
  EXPECT_EQ(s.devices[0].latest.watts, 250.0);
}

TEST(NvmlSource, missing_library_is_unsupported_and_no_gpu_reads_zero) {
  auto reader = Reader::from_config(FakeNvml::config("/nonexistent/libnvidia-ml.so.1"));
  ASSERT_TRUE(reader.ok());
  reader.value()->poll();
  Snapshot s = reader.value()->snapshot();
  EXPECT_TRUE(s.devices.empty());
  EXPECT_FALSE(s.sources.at(0).up);
  EXPECT_NE(s.sources.at(0).last_error.find("cannot load"), std::string::npos);
}

}  // namespace
}  // namespace cgn::power
