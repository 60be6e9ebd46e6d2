// SPDX-License-Identifier: Apache-2.0
// The subcommands of the mlakv tool.
#pragma once

#include <CLI/CLI.hpp>

namespace mlakv::tool {

void add_formats_command(CLI::App& app);
void add_roundtrip_command(CLI::App& app);
void add_report_command(CLI::App& app);
void add_capacity_command(CLI::App& app);
void add_inspect_command(CLI::App& app);

}  // namespace mlakv::tool
