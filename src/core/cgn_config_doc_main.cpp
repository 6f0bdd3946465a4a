// cgn-config-doc: the reference tables of docs/configuration.md, generated from the declarations
// of every cognitora.toml key. Thin main over core/config_doc_cli.h, which describes the modes.
#include <iostream>
#include <string>
#include <vector>

#include "core/config_doc_cli.h"

int main(int argc, char** argv) {
  return cgn::config::run_config_doc_command(std::vector<std::string>(argv + 1, argv + argc), std::cout,
                                             std::cerr);
}
