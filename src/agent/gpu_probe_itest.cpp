// The GPU probe end to end: fake nvidia-smi / rocm-smi executables (shell scripts that print the
// real tools' captured output) on a PATH made for the test.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include "agent/gpu_identity.h"
#include "core/subprocess.h"
#include "testing/process.h"

namespace cgn::agent {
namespace {

using namespace std::chrono_literals;
using cgn::testing::TempDir;

void write_tool(const TempDir& dir, const std::string& name, const std::string& script) {
  const std::string path = dir.file(name);
  cgn::testing::write_file(path, "#!/bin/sh\n" + script);
  ::chmod(path.c_str(), 0755);
}

std::string sample(const std::string& name) {
  return cgn::testing::sample_path(name);
}

// The directory first, then the system PATH so the scripts' own commands (cat, sleep) resolve.
GpuProbeOptions options_for(const TempDir& dir) {
  GpuProbeOptions o;
  o.path_env = dir.path();
  o.timeout = 5000ms;
  return o;
}

TEST(GpuProbe, reads_identity_from_a_fake_nvidia_smi_printing_the_h200_capture) {
  TempDir dir;
  write_tool(dir, "nvidia-smi", "exec cat '" + sample("nvidia-smi-query-gpu-h200-idle.csv") + "'\n");
  auto id = probe_gpu_identity(options_for(dir));
  ASSERT_TRUE(id.ok()) << id.error().message;
  EXPECT_EQ(*id, (cluster::GpuIdentity{"NVIDIA H200", "nvidia", 143771, 1}));
}

TEST(GpuProbe, passes_the_query_flags_nvidia_smi_needs) {
  TempDir dir;
  // Answers only the exact probe command line, like a tool that would reject anything else.
  write_tool(dir, "nvidia-smi",
             "[ \"$1\" = --query-gpu=index,name,memory.total ] && [ \"$2\" = --format=csv ] || exit 2\n"
             "printf 'index, name, memory.total [MiB]\\n0, NVIDIA H200, 143771 MiB\\n1, NVIDIA H200, 143771 "
             "MiB\\n'\n");
  auto opts = options_for(dir);
  opts.gpus = {1};
  auto id = probe_gpu_identity(opts);
  ASSERT_TRUE(id.ok()) << id.error().message;
  EXPECT_EQ(*id, (cluster::GpuIdentity{"NVIDIA H200", "nvidia", 143771, 1}));
}

TEST(GpuProbe, falls_back_to_rocm_smi_for_amd_and_hygon) {
  for (const char* file : {"rocm-smi-radeon-rx7800xt.json", "rocm-smi-hygon-dcu.json"}) {
    SCOPED_TRACE(file);
    TempDir dir;
    write_tool(dir, "rocm-smi",
               "[ \"$*\" = '--showproductname --showmeminfo vram --json' ] || exit 2\nexec cat '" +
                   sample(file) + "'\n");
    auto id = probe_gpu_identity(options_for(dir));
    ASSERT_TRUE(id.ok()) << id.error().message;
    EXPECT_EQ(id->count, 1u);
    EXPECT_NE(id->vram_total_mb, 0u);
    EXPECT_TRUE(id->gpu_vendor == "amd" || id->gpu_vendor == "hygon");
  }
}

TEST(GpuProbe, failing_nvidia_smi_falls_back_to_rocm_smi) {
  TempDir dir;
  write_tool(
      dir, "nvidia-smi",
      "echo \"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\"\nexit 9\n");
  write_tool(dir, "rocm-smi", "exec cat '" + sample("rocm-smi-hygon-dcu.json") + "'\n");
  auto id = probe_gpu_identity(options_for(dir));
  ASSERT_TRUE(id.ok()) << id.error().message;
  EXPECT_EQ(id->gpu_vendor, "hygon");
}

TEST(GpuProbe, no_tool_on_path_means_no_identity) {
  TempDir dir;
  auto id = probe_gpu_identity(options_for(dir));
  ASSERT_FALSE(id.ok());
  EXPECT_EQ(id.error().code, GpuError::kNoTool);
}

TEST(GpuProbe, a_failing_tool_gives_no_identity_and_says_why) {
  TempDir dir;
  write_tool(dir, "nvidia-smi", "echo 'No devices were found'\nexit 6\n");
  auto id = probe_gpu_identity(options_for(dir));
  ASSERT_FALSE(id.ok());
  EXPECT_EQ(id.error().code, GpuError::kToolFailed);
  EXPECT_NE(id.error().message.find("status 6"), std::string::npos);
}

TEST(GpuProbe, a_hanging_tool_is_killed_at_the_timeout) {
  TempDir dir;
  write_tool(dir, "nvidia-smi", "exec sleep 60\n");
  auto opts = options_for(dir);
  opts.timeout = 200ms;
  auto id = probe_gpu_identity(opts);
  ASSERT_FALSE(id.ok());
  EXPECT_EQ(id.error().code, GpuError::kToolFailed);
  EXPECT_NE(id.error().message.find("ran past"), std::string::npos);
}

TEST(Subprocess, captures_stdout_and_exit_code_and_caps_size) {
  TempDir dir;
  write_tool(dir, "talk", "printf 'hello world'\necho oops >&2\nexit 3\n");
  auto r = run_capture({"talk"}, 5000ms, 5, dir.path());
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->exit_code, 3);
  EXPECT_EQ(r->output, "hello");
  EXPECT_TRUE(r->truncated);
  EXPECT_EQ(run_capture({"absent-tool"}, 1000ms, 5, dir.path()).error().code, RunError::kNotFound);
  EXPECT_FALSE(find_on_path("talk", "").has_value());
  EXPECT_EQ(find_on_path("talk", "/nonexistent:" + dir.path()), dir.file("talk"));
}

}  // namespace
}  // namespace cgn::agent
