// The plan page (format_plan_html): self-contained, every island, node and stage present,
// names escaped, and a 4096-rank plan aggregated under 2 MB. That it renders in a browser,
// with nothing outside the page, is test/integration/pictures.sh.
#include <catch2/catch.hpp>

#include <regex>
#include <string>

#include "common/html.hpp"
#include "engine/plan/plan.hpp"
#include "test/support/cluster_gen.hpp"

namespace hp = holmes::plan;
using holmes::topo::NicKind;

namespace {

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("html::escape replaces every character that could open markup", "[html]") {
  CHECK(holmes::html::escape("<a href=\"x\">'&'</a>") == "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;");
  CHECK(holmes::html::escape("plain-host_01") == "plain-host_01");
}

TEST_CASE("the plan page draws every island, node, rank and stage and loads nothing", "[plan][html]") {
  auto t = hp::testing::make_cluster({{NicKind::kIb, 2}, {NicKind::kRoce, 2}});
  auto spec = hp::testing::make_spec(8, 512, 8, 8, 2, 2, 1, 32, 512);
  const hp::Plan p = hp::make_plan(spec, t);
  const std::string page = hp::format_plan_html(p);
  CHECK(page.rfind("<!DOCTYPE html>", 0) == 0);
  CHECK(count(page, "class=\"island\"") == 2);
  CHECK(count(page, "class=\"node\"") == 4);
  CHECK(count(page, "class=\"rank\"") == 32);
  CHECK(count(page, "<tr class=\"stage\"") == 2);
  CHECK(count(page, "class=\"link-class\"") >= 2);
  // Pipeline links between the islands are drawn and named by transport.
  CHECK(count(page, "class=\"island-link\"") == 1);
  // Self-contained: no script, nothing fetched.
  CHECK(page.find("<script") == std::string::npos);
  CHECK(page.find("src=") == std::string::npos);
  CHECK(page.find("http://") == page.find("http://www.w3.org/2000/svg"));
  CHECK(page.find("https://") == std::string::npos);
  CHECK(page.find("@import") == std::string::npos);
}

TEST_CASE("names from the topology are escaped on the plan page", "[plan][html]") {
  auto t = hp::testing::make_cluster({{NicKind::kIb, 2}});
  t.nodes[0].hostname = "<script>alert(1)</script>";
  t.nodes[1].hostname = "a\"onmouseover=\"x";
  auto spec = hp::testing::make_spec(4, 256, 8, 8, 1, 2, 1, 16, 256);
  hp::Plan p = hp::make_plan(spec, t);
  p.warnings.push_back("<img src=x onerror=alert(2)>");
  const std::string page = hp::format_plan_html(p);
  CHECK(page.find("<script") == std::string::npos);
  CHECK(page.find("<img") == std::string::npos);
  CHECK(page.find("\"onmouseover") == std::string::npos);
  CHECK(page.find("&lt;script&gt;alert(1)&lt;/script&gt;") != std::string::npos);
}

TEST_CASE("a 4096-rank plan page is drawn one glyph per node and stays under 2 MB", "[plan][html]") {
  // 512 nodes of 8 GPUs in two islands: tp 8 x pp 16 x dp 32.
  auto t = hp::testing::make_cluster({{NicKind::kIb, 256}, {NicKind::kRoce, 256}});
  auto spec = hp::testing::make_spec(64, 4096, 32, 8, 16, 32, 1, 1024, 2048);
  const hp::Plan p = hp::make_plan(spec, t);
  REQUIRE(p.world == 4096);
  const std::string page = hp::format_plan_html(p);
  INFO("page bytes: " << page.size());
  CHECK(page.size() < 2u * 1024 * 1024);
  CHECK(page.find("data-mode=\"nodes\"") != std::string::npos);
  CHECK(count(page, "class=\"node\"") == 512);
  CHECK(count(page, "class=\"rank\"") == 0);
  CHECK(count(page, "class=\"island\"") == 2);
  CHECK(count(page, "<tr class=\"stage\"") == 16);
}
