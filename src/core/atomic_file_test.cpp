#include "core/atomic_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace cgn {
namespace {

std::string read(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class AtomicFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("cgn-atomic-file-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(AtomicFile, ReplacesTheWholeFileAndLeavesNoTemporary) {
  const std::string path = (dir_ / "status").string();
  ASSERT_TRUE(write_file_atomic(path, "first, longer content\n"));
  ASSERT_TRUE(write_file_atomic(path, "second\n"));
  EXPECT_EQ(read(path), "second\n");
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
}

TEST_F(AtomicFile, PortFileIsThePortAndANewline) {
  const std::string path = (dir_ / "port").string();
  ASSERT_TRUE(write_port_file(path, 40123));
  EXPECT_EQ(read(path), "40123\n");
}

TEST_F(AtomicFile, AnUnwritablePathIsAnErrorNamingTheFile) {
  const std::string path = (dir_ / "missing-dir" / "port").string();
  auto w = write_port_file(path, 1);
  ASSERT_FALSE(w);
  EXPECT_NE(w.error().message.find(path + ".tmp"), std::string::npos) << w.error().message;
  EXPECT_NE(w.error().code, 0);
}

}  // namespace
}  // namespace cgn
