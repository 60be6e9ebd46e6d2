// SPDX-License-Identifier: Apache-2.0
// mlakv: the command-line tool. Errors print one line and exit 2.
#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <string>

#include "commands.h"
#include "mlakv/error.h"
#include "mlakv/version.h"

namespace {

int run(int argc, char** argv) {
  CLI::App app{"mlakv: compact KV-cache record formats of MLA models"};
  app.set_version_flag("--version", mlakv::kVersion);
  app.require_subcommand(1);
  mlakv::tool::add_report_command(app);
  mlakv::tool::add_capacity_command(app);
  mlakv::tool::add_formats_command(app);
  mlakv::tool::add_inspect_command(app);
  mlakv::tool::add_roundtrip_command(app);
  std::string names;
  bool known = false;
  for (const CLI::App* sub : app.get_subcommands({})) {
    known = known || (argc > 1 && sub->get_name() == argv[1]);
    names += (names.empty() ? "" : ", ") + sub->get_name();
  }
  // No command: say which there are and where they are described (CLI11 would only say one is required).
  if (argc == 1) {
    fmt::print(stderr, "mlakv: error: a command is required ({}); mlakv --help says what each does\n", names);
    return 2;
  }
  // A first word that names no command is named back.
  if (argv[1][0] != '-' && !known) {
    fmt::print(stderr, "mlakv: error: unknown command '{}' (commands: {})\n", argv[1], names);
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    fmt::print(stderr, "mlakv: error: {}\n", e.what());
    return 2;
  } catch (const mlakv::Error& e) {
    fmt::print(stderr, "mlakv: error: {}\n", e.what());
    return 2;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {  // anything else: a bug, reported rather than std::terminate
    std::fprintf(stderr, "mlakv: internal error: %s\n", e.what());
    return 1;
  }
}
