#include "model/architecture.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <mutex>
#include <stdexcept>

#include "common/errors.hpp"
#include "model/gpt2/gpt2.hpp"
#include "model/llama/llama.hpp"

namespace holmes::model {

namespace {

// The architectures this binary ships: one line each.
std::vector<std::unique_ptr<Architecture>> builtin_architectures() {
  std::vector<std::unique_ptr<Architecture>> out;
  out.push_back(gpt2::make_architecture());
  out.push_back(llama::make_architecture());
  return out;
}

// Built on first use (so registration from a static initialiser finds it), never shrinks: a
// reference handed out stays valid for the program's life.
struct Registry {
  std::mutex mu;
  std::vector<std::unique_ptr<Architecture>> all = builtin_architectures();
};

Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

std::vector<SpecProblem> Architecture::spec_problems(const GptConfig&, int) const { return {}; }

std::vector<std::pair<std::string, int64_t>> Architecture::tp_divides(const GptConfig& cfg) const {
  return {{"model.heads", cfg.heads}};
}

void register_architecture(std::unique_ptr<Architecture> arch) {
  if (!arch) throw std::invalid_argument("register_architecture: no architecture");
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  for (const auto& a : r.all)
    if (std::string_view(a->name()) == arch->name())
      throw std::invalid_argument(fmt::format("register_architecture: '{}' is registered already", arch->name()));
  r.all.push_back(std::move(arch));
}

const Architecture* find_architecture(std::string_view name) {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  for (const auto& a : r.all)
    if (a->name() == name) return a.get();
  return nullptr;
}

const Architecture& architecture(std::string_view name) {
  if (const Architecture* a = find_architecture(name)) return *a;
  throw UserError(fmt::format("model architecture '{}' is not known; accepted: {}", name,
                              fmt::join(architecture_names(), ", ")));
}

std::vector<std::string> architecture_names() {
  std::vector<std::string> out;
  for (const Architecture* a : architectures()) out.emplace_back(a->name());
  return out;
}

std::vector<const Architecture*> architectures() {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  std::vector<const Architecture*> out;
  for (const auto& a : r.all) out.push_back(a.get());
  return out;
}

bool tp_divides(const GptConfig& cfg, int tp) {
  if (tp < 1) return false;
  for (const auto& [key, size] : cfg.architecture().tp_divides(cfg))
    if (size % tp != 0) return false;
  return true;
}

}  // namespace holmes::model
