// The architecture registry (model/architecture.hpp): the built-in architectures, lookups by
// name, and the one rule of registration.
#include <catch2/catch.hpp>

#include "common/errors.hpp"
#include "model/architecture.hpp"
#include "model/gpt2/gpt2.hpp"
#include "model/llama/llama.hpp"

using namespace holmes;
using namespace holmes::model;

TEST_CASE("registry: gpt2 and llama are built in, gpt2 first (the default)", "[model][architecture]") {
  const std::vector<std::string> names = architecture_names();
  REQUIRE(names.size() >= 2);
  CHECK(names[0] == "gpt2");
  CHECK(names[1] == "llama");
  CHECK(names[0] == kDefaultArch);
  CHECK(find_architecture("llama") == &architecture("llama"));
  CHECK(find_architecture("mamba") == nullptr);
  CHECK(GptConfig{}.arch == "gpt2");
}

TEST_CASE("registry: an unknown name is a user error naming the accepted ones", "[model][architecture]") {
  CHECK_THROWS_WITH(architecture("mamba"), Catch::Contains("model architecture 'mamba' is not known; accepted: gpt2, llama"));
  GptConfig c = gpt2::config(1, 8, 2, 10, 4);
  c.arch = "mamba";
  CHECK_THROWS_AS(c.finalize(), UserError);
}

TEST_CASE("registry: a name is registered once", "[model][architecture]") {
  CHECK_THROWS_AS(register_architecture(gpt2::make_architecture()), std::invalid_argument);
  CHECK_THROWS_AS(register_architecture(nullptr), std::invalid_argument);
  CHECK(architecture_names()[0] == "gpt2");
}

TEST_CASE("architectures: what a tensor-parallel degree must divide", "[model][architecture]") {
  const GptConfig g = gpt2::config(2, 48, 6, 100, 8);
  CHECK(tp_divides(g, 2));
  CHECK(tp_divides(g, 3));
  CHECK_FALSE(tp_divides(g, 4));  // 6 heads
  const GptConfig l = llama::config(2, 48, 6, 2, 96, 100, 8);
  CHECK(tp_divides(l, 2));
  CHECK_FALSE(tp_divides(l, 3));  // 2 key/value heads
  CHECK_FALSE(tp_divides(l, 0));
}
