// cgn-config-doc: the reference tables of docs/configuration.md, generated from the declarations
// of every cognitora.toml key (core/config.cpp).
//   cgn-config-doc                 prints every table as Markdown
//   cgn-config-doc --check FILE    exit 1 when FILE's generated blocks differ from the declarations
//   cgn-config-doc --write FILE    rewrites FILE's generated blocks (the prose around them is kept)
#include <fmt/format.h>

#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "core/config.h"
#include "core/config_schema.h"

int main(int argc, char** argv) {
  using namespace cgn::config;
  const std::vector<DocTable> tables = reference_tables();
  if (argc == 1) {
    for (const DocTable& t : tables) {
      std::cout << fmt::format("### `[{}]`\n\n{}\n", t.path, render_markdown(t));
    }
    return 0;
  }
  const std::string mode = argv[1];
  if (argc != 3 || (mode != "--check" && mode != "--write")) {
    std::cerr << "usage: cgn-config-doc [--check FILE | --write FILE]\n";
    return 2;
  }
  const std::string path = argv[2];
  std::ifstream in(path);
  if (!in) {
    std::cerr << "cgn-config-doc: cannot read " << path << "\n";
    return 2;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  const DocUpdate u = update_reference(ss.str(), tables);
  for (const std::string& m : u.missing) {
    std::cerr << fmt::format("{}: no generated block for [{}]; add the markers where its table belongs\n",
                             path, m);
  }
  for (const std::string& m : u.stray) {
    std::cerr << fmt::format("{}: a generated block names [{}], which no declaration has; remove it\n", path,
                             m);
  }
  const bool complete = u.missing.empty() && u.stray.empty();
  if (mode == "--check") {
    for (const std::string& d : u.drifted) {
      std::cerr << fmt::format("{}: the table of [{}] differs from the declarations\n", path, d);
    }
    if (!u.drifted.empty()) {
      std::cerr << "regenerate with: build/bin/cgn-config-doc --write docs/configuration.md\n";
    }
    return u.drifted.empty() && complete ? 0 : 1;
  }
  std::ofstream out(path, std::ios::trunc);
  out << u.text;
  return out && complete ? 0 : 1;
}
