// SPDX-License-Identifier: Apache-2.0
// docs/formats/<id>.md against the registry: the title's record size and the
// byte table's rows are the registry's fields, so the pages cannot drift.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "mlakv/formats.h"

namespace {

struct Row {
  std::string region;  // "data" or "scale" (block-planar tables); empty for token-major ones
  int begin = 0;
  int end = 0;
  int size = 0;
  std::string name;
  std::string element;  // tables with an element column
  std::string contents;
};

std::string read_page(std::string_view id) {
  std::ifstream in(std::string(MLAKV_DOCS_DIR) + "/formats/" + std::string(id) + ".md");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The rows of the page's byte table: "| [b, e) | size | `name` | [element |] contents |"
// or, for block-planar pages, "| region | [b, e) | size | `name` | element | contents |".
std::vector<Row> byte_table(const std::string& page) {
  static const std::regex token_major(R"(^\| \[(\d+), (\d+)\) \| (\d+) \| `(\w+)` \| (?:(\w+) \| )?(.*) \|$)");
  static const std::regex planar(R"(^\| (data|scale) \| \[(\d+), (\d+)\) \| (\d+) \| `(\w+)` \| (\w+) \| (.*) \|$)");
  std::vector<Row> rows;
  std::istringstream lines(page);
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (std::regex_match(line, m, token_major)) {
      rows.push_back({"", std::stoi(m[1]), std::stoi(m[2]), std::stoi(m[3]), m[4], m[5], m[6]});
    } else if (std::regex_match(line, m, planar)) {
      rows.push_back({m[1], std::stoi(m[2]), std::stoi(m[3]), std::stoi(m[4]), m[5], m[6], m[7]});
    }
  }
  return rows;
}

TEST(format_docs, titles_state_the_registry_record_size) {
  for (const mlakv::FormatInfo& info : mlakv::formats()) {
    const std::string page = read_page(info.id);
    ASSERT_FALSE(page.empty()) << "docs/formats/" << info.id << ".md is missing";
    const std::string title =
        "# `" + std::string(info.id) + "` — " + std::to_string(info.record_bytes) + " bytes per token per layer";
    EXPECT_EQ(page.rfind(title, 0), 0u) << info.id << ": " << page.substr(0, page.find('\n'));
  }
}

TEST(format_docs, byte_tables_list_the_registry_fields) {
  for (const mlakv::FormatInfo& info : mlakv::formats()) {
    const std::vector<Row> rows = byte_table(read_page(info.id));
    const bool planar = info.page.kind == mlakv::PageKind::kBlockPlanar;
    ASSERT_EQ(rows.size(), info.fields.size()) << info.id;
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const mlakv::FieldInfo& f = info.fields[i];
      const Row& r = rows[i];
      EXPECT_EQ(r.name, f.name) << info.id << " row " << i;
      EXPECT_EQ(r.begin, f.offset) << info.id << "." << f.name;
      EXPECT_EQ(r.end, f.offset + f.bytes) << info.id << "." << f.name;
      EXPECT_EQ(r.size, f.bytes) << info.id << "." << f.name;
      if (planar) {
        EXPECT_EQ(r.region, f.region == mlakv::kDataRegion ? "data" : "scale") << info.id << "." << f.name;
      } else {
        EXPECT_TRUE(r.region.empty()) << info.id << ": a token-major page's table has no region column";
      }
      // A table with an element column words the contents for the page; without one it is the registry's.
      if (!r.element.empty()) {
        EXPECT_EQ(r.element, f.element) << info.id << "." << f.name;
      } else {
        EXPECT_EQ(r.contents, f.contents) << info.id << "." << f.name;
      }
    }
  }
}

}  // namespace
