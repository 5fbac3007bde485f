// What yaml-cpp leaves to its callers in the files users write: a key given twice in one
// mapping (refused, both lines named) and tabs in indentation (said in plain words); and the
// wording of values no integer holds.
#include <catch2/catch.hpp>

#include <fstream>

#include "common/errors.hpp"
#include "engine/spec/load.hpp"
#include "engine/spec/yaml_text.hpp"

using namespace holmes;
using namespace holmes::spec;

namespace {

const char* kMinimal = "model:\n  layers: 2\n  hidden: 32\n  heads: 4\ntrain:\n  steps: 10\n";

std::vector<ConfigIssue> issues_of_text(const std::string& name, const std::string& text,
                                        const std::vector<std::string>& sets = {}) {
  const std::string path = "/tmp/holmes_yaml_text_test_" + name;
  std::ofstream(path) << text;
  try {
    load_job_spec(path, sets);
  } catch (const ConfigError& e) {
    return e.issues();
  }
  return {};
}

}  // namespace

TEST_CASE("a key given twice in one section is refused, naming both lines") {
  // layers on lines 2 and 5; yaml-cpp keeps both and the loader used to take the last.
  auto issues = issues_of_text("dup_key.yaml", "model:\n  layers: 2\n  hidden: 32\n  heads: 4\n  layers: 7\n"
                                               "train:\n  steps: 10\n");
  REQUIRE(issues.size() == 1);
  CHECK(issues[0].path == "model.layers");
  CHECK(issues[0].line == 5);
  CHECK_THAT(issues[0].message, Catch::Contains("'layers' is given twice in 'model' (lines 2 and 5)"));
}

TEST_CASE("two sections of one name are refused, not merged") {
  auto issues = issues_of_text("dup_section.yaml", std::string(kMinimal) + "model:\n  layers: 3\n");
  REQUIRE(!issues.empty());
  CHECK(issues[0].path == "model");
  CHECK(issues[0].line == 7);
  CHECK_THAT(issues[0].message, Catch::Contains("'model' is given twice in the top level (lines 1 and 7)"));
}

TEST_CASE("duplicate keys are found in every mapping, lists included") {
  auto root = YAML::Load("nodes:\n  - {names: a, names: b}\n  - names: c\n    nics:\n      - {kind: ib}\n"
                         "      - {kind: ib, kind: roce}\n");
  auto issues = duplicate_keys(root, "t.yaml");
  REQUIRE(issues.size() == 2);
  CHECK(issues[0].path == "nodes[0].names");
  CHECK(issues[0].line == 2);
  CHECK(issues[1].path == "nodes[1].nics[1].kind");
  CHECK(issues[1].line == 6);
  // The same key in two different mappings is no repetition.
  CHECK(duplicate_keys(YAML::Load("a: {x: 1}\nb: {x: 2}\n"), "t.yaml").empty());
}

TEST_CASE("indentation with a tab is named as such") {
  auto issues = issues_of_text("tab.yaml", "model:\n  layers: 2\n\thidden: 32\n  heads: 4\ntrain:\n  steps: 10\n");
  REQUIRE(issues.size() == 1);
  CHECK(issues[0].line == 3);
  CHECK_THAT(issues[0].message, Catch::Contains("line 3 indents with a tab; tabs cannot indent YAML"));
  // The first indentation of a section (yaml-cpp: "illegal map value", reported after the tab).
  auto first = issues_of_text("tab_first.yaml", "model:\n\tlayers: 2\ntrain:\n  steps: 10\n");
  REQUIRE(first.size() == 1);
  CHECK_THAT(first[0].message, Catch::Contains("line 2 indents with a tab"));
  // Without a tab in any indentation the parse error is yaml-cpp's own; with two, the one at
  // or before the error's line is named.
  CHECK(tab_indentation_problem("a:\n  b: [1\n", 2).empty());
  CHECK_THAT(tab_indentation_problem("a:\n\tb: 1\nc:\n\td: 2\n", 4), Catch::StartsWith("line 4 indents"));
}

TEST_CASE("a whole number beyond any integer is too large, not 'not an integer'") {
  auto issues = issues_of_text("huge.yaml", kMinimal, {"train.steps=1e99"});
  REQUIRE(issues.size() == 1);
  CHECK_THAT(issues[0].message, Catch::Contains("'1e99' is too large"));
  auto beyond_double = issues_of_text("huge2.yaml", kMinimal, {"train.steps=1e400"});
  REQUIRE(beyond_double.size() == 1);
  CHECK_THAT(beyond_double[0].message, Catch::Contains("'1e400' is too large"));
  auto fraction = issues_of_text("frac.yaml", kMinimal, {"train.steps=1e-400"});
  REQUIRE(fraction.size() == 1);
  CHECK_THAT(fraction[0].message, Catch::Contains("is not an integer"));
}

TEST_CASE("an unknown key's message has a separator before the accepted keys, and << is explained") {
  auto issues = issues_of_text("unknown.yaml", std::string(kMinimal) + "zzzzzz: 1\n");
  REQUIRE(issues.size() == 1);
  CHECK_THAT(issues[0].message, Catch::Contains("unknown key 'zzzzzz' in the top level. Accepted keys here: job,"));
  auto merge = issues_of_text("merge.yaml", "model:\n  layers: 2\n  hidden: 32\n  heads: 4\n  <<: {max_seq_len: 64}\n"
                                            "train:\n  steps: 10\n");
  REQUIRE(merge.size() == 1);
  CHECK_THAT(merge[0].message, Catch::Contains("'<<' is YAML's merge key, which this reader does not support") &&
                                   Catch::Contains("here. Accepted keys here: arch, layers"));
}
