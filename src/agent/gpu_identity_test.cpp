#include "agent/gpu_identity.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "agent/gpu_identity_fuzz.h"
#include "testing/process.h"

namespace cgn::agent {
namespace {

std::string sample(const std::string& name) {
  return cgn::testing::read_file(cgn::testing::sample_path(name));
}

TEST(NvidiaSmiCsv, parses_the_h200_capture_with_header_and_units) {
  for (const char* file : {"nvidia-smi-query-gpu-h200-idle.csv", "nvidia-smi-query-gpu-h200-load.csv"}) {
    SCOPED_TRACE(file);
    auto devices = parse_nvidia_smi_csv(sample(file));
    ASSERT_TRUE(devices.ok()) << devices.error().message;
    ASSERT_EQ(devices->size(), 1u);
    EXPECT_EQ((*devices)[0].name, "NVIDIA H200");
    EXPECT_EQ((*devices)[0].vendor, "nvidia");
    EXPECT_EQ((*devices)[0].vram_total_mb, 143771u);
    EXPECT_EQ((*devices)[0].index, 0u);
  }
}

TEST(NvidiaSmiCsv, p100_capture_without_memory_total_leaves_vram_unknown) {
  auto devices = parse_nvidia_smi_csv(sample("nvidia-smi-query-gpu-tesla-p100.csv"));
  ASSERT_TRUE(devices.ok()) << devices.error().message;
  ASSERT_EQ(devices->size(), 1u);
  EXPECT_EQ((*devices)[0].name, "Tesla P100-PCIE-16GB");
  EXPECT_EQ((*devices)[0].vram_total_mb, 0u);
}

TEST(NvidiaSmiCsv, noheader_nounits_uses_the_probe_columns) {
  // No real capture of this format exists (samples/README.md); the values are the H200's.
  auto devices = parse_nvidia_smi_csv("0, NVIDIA H200, 143771\n1, NVIDIA H200, 143771\n");
  ASSERT_TRUE(devices.ok()) << devices.error().message;
  ASSERT_EQ(devices->size(), 2u);
  EXPECT_EQ((*devices)[1].index, 1u);
  EXPECT_EQ((*devices)[1].vram_total_mb, 143771u);
  auto custom = parse_nvidia_smi_csv("A100, 40960 MiB\n", {"name", "memory.total"});
  ASSERT_TRUE(custom.ok());
  EXPECT_EQ((*custom)[0].name, "A100");
  EXPECT_EQ((*custom)[0].vram_total_mb, 40960u);
}

TEST(NvidiaSmiCsv, rejects_malformed_output_with_clear_errors) {
  EXPECT_EQ(parse_nvidia_smi_csv("").error().code, GpuError::kToolFailed);
  EXPECT_EQ(parse_nvidia_smi_csv("name, memory.total [MiB]\n").error().code, GpuError::kToolFailed);
  auto ragged = parse_nvidia_smi_csv("name, memory.total [MiB]\nH200\n");
  ASSERT_FALSE(ragged.ok());
  EXPECT_EQ(ragged.error().code, GpuError::kParse);
  EXPECT_NE(ragged.error().message.find("line 2"), std::string::npos);
  EXPECT_EQ(parse_nvidia_smi_csv("name, memory.total [MiB]\nH200, lots\n").error().code, GpuError::kParse);
  EXPECT_EQ(parse_nvidia_smi_csv("index, memory.total\n0, 1\n", {}).error().code, GpuError::kParse);
  auto na = parse_nvidia_smi_csv("name, memory.total [MiB]\n[N/A], [N/A]\n");
  ASSERT_TRUE(na.ok());
  EXPECT_EQ((*na)[0].name, "");
  EXPECT_EQ((*na)[0].vram_total_mb, 0u);
  GpuParseLimits small;
  small.max_bytes = 8;
  EXPECT_EQ(parse_nvidia_smi_csv("name\nNVIDIA H200\n", kNvidiaProbeColumns, small).error().code,
            GpuError::kParse);
}

TEST(RocmSmiJson, parses_the_amd_radeon_capture) {
  auto devices = parse_rocm_smi_json(sample("rocm-smi-radeon-rx7800xt.json"));
  ASSERT_TRUE(devices.ok()) << devices.error().message;
  ASSERT_EQ(devices->size(), 1u);
  EXPECT_EQ((*devices)[0].name, "Navi 32 [Radeon RX 7700 XT / 7800 XT]");
  EXPECT_EQ((*devices)[0].vendor, "amd");
  EXPECT_EQ((*devices)[0].vram_total_mb, 17163091968ull / (1024 * 1024));
}

TEST(RocmSmiJson, parses_the_hygon_dcu_variant) {
  auto devices = parse_rocm_smi_json(sample("rocm-smi-hygon-dcu.json"));
  ASSERT_TRUE(devices.ok()) << devices.error().message;
  ASSERT_EQ(devices->size(), 1u);
  EXPECT_EQ((*devices)[0].name, "DCU xxxx");
  EXPECT_EQ((*devices)[0].vendor, "hygon");
  EXPECT_EQ((*devices)[0].vram_total_mb, 65520u);
}

TEST(RocmSmiJson, rejects_wrong_shapes_and_deep_nesting) {
  EXPECT_EQ(parse_rocm_smi_json("[1,2]").error().code, GpuError::kParse);
  EXPECT_EQ(parse_rocm_smi_json("{\"card0\": 5}").error().code, GpuError::kParse);
  EXPECT_EQ(parse_rocm_smi_json("{\"card0\": {\"VRAM Total Memory (B)\": \"x\"}}").error().code,
            GpuError::kParse);
  EXPECT_EQ(parse_rocm_smi_json("{\"system\": {}}").error().code, GpuError::kToolFailed);
  EXPECT_EQ(parse_rocm_smi_json(std::string(100000, '[')).error().code, GpuError::kParse);
  EXPECT_EQ(parse_rocm_smi_json("{\"card0\": {").error().code, GpuError::kParse);
}

TEST(SummarizeGpus, selects_configured_indices_and_keeps_the_smallest_vram) {
  std::vector<GpuDevice> devices = {{0, "NVIDIA H200", "nvidia", 143771},
                                    {1, "NVIDIA H100", "nvidia", 81559},
                                    {2, "NVIDIA H200", "nvidia", 0}};
  auto all = summarize_gpus(devices, {});
  ASSERT_TRUE(all.has_value());
  EXPECT_EQ(*all, (cluster::GpuIdentity{"NVIDIA H200", "nvidia", 81559, 3}));
  auto two = summarize_gpus(devices, {2, 0});
  ASSERT_TRUE(two.has_value());
  EXPECT_EQ(*two, (cluster::GpuIdentity{"NVIDIA H200", "nvidia", 143771, 2}));
  EXPECT_FALSE(summarize_gpus(devices, {7}).has_value());
  EXPECT_FALSE(summarize_gpus({}, {}).has_value());
}

// Every seed of the fuzz corpus reaches the parser its file name says (nv_* nvidia-smi, rocm_*
// rocm-smi), and the real captures among them parse there.
TEST(GpuIdentityFuzzCorpus, each_seed_reaches_the_parser_it_is_named_for) {
  size_t nv = 0;
  size_t rocm = 0;
  for (const auto& e :
       std::filesystem::directory_iterator(cgn::testing::source_path("tests/fuzz/corpus/gpu_identity"))) {
    const std::string name = e.path().filename().string();
    const std::string bytes = cgn::testing::read_file(e.path().string());
    ASSERT_FALSE(bytes.empty()) << name;
    SCOPED_TRACE(name);
    const GpuToolParser p = gpu_fuzz_parser(static_cast<uint8_t>(bytes[0]));
    if (name.rfind("nv_", 0) == 0) {
      EXPECT_EQ(p, GpuToolParser::kNvidiaSmiCsv);
      ++nv;
    } else if (name.rfind("rocm_", 0) == 0) {
      EXPECT_EQ(p, GpuToolParser::kRocmSmiJson);
      ++rocm;
    } else {
      ADD_FAILURE() << "seed name must start with nv_ or rocm_";
    }
  }
  EXPECT_GE(nv, 5u);
  EXPECT_GE(rocm, 5u);
  auto h200 =
      cgn::testing::read_file(cgn::testing::source_path("tests/fuzz/corpus/gpu_identity/nv_h200_idle.csv"));
  EXPECT_TRUE(parse_nvidia_smi_csv(std::string_view(h200).substr(1)).ok());
  auto radeon =
      cgn::testing::read_file(cgn::testing::source_path("tests/fuzz/corpus/gpu_identity/rocm_radeon.json"));
  EXPECT_TRUE(parse_rocm_smi_json(std::string_view(radeon).substr(1)).ok());
}

}  // namespace
}  // namespace cgn::agent
