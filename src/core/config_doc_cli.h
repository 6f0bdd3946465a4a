// cgn-config-doc's command: the reference tables of docs/configuration.md, generated from the
// declarations of every cognitora.toml key (core/config.cpp).
//
//   cgn-config-doc                 prints every table as Markdown
//   cgn-config-doc --check FILE    exit 1 when FILE's generated blocks differ from the declarations
//   cgn-config-doc --write FILE    rewrites FILE's generated blocks (the prose around them is kept)
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace cgn::config {

// `args` without the program name. Prints the tables on `out`, problems on `err`; returns the exit
// status: 0, 1 (drift, a missing or stray block, or a file that cannot be written) or 2 (usage,
// a file that cannot be read).
int run_config_doc_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace cgn::config
