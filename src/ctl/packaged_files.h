// The files of packaging/systemd and packaging/etc, embedded at build time
// (src/ctl/embed_packaging.cmake): what `cgn-ctl install` writes, from the same source the package
// ships.
#pragma once

#include <span>
#include <string_view>

namespace cgn::ctl {

struct PackagedFile {
  std::string_view path;  // relative to packaging/: "systemd/cgn-router.service", "etc/cognitora/router.toml"
  std::string_view text;
};

std::span<const PackagedFile> packaged_files();

}  // namespace cgn::ctl
