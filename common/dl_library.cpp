#include "common/dl_library.hpp"

#include <link.h>

#include <cstdlib>

namespace holmes {

std::vector<std::string> library_candidates(const std::string& soname, const char* env_var,
                                            const std::string& fallback_dir) {
  std::vector<std::string> out;
  if (const char* env = env_var ? std::getenv(env_var) : nullptr; env && *env) out.push_back(env);
  out.push_back(soname);
  if (!fallback_dir.empty()) out.push_back(fallback_dir + "/" + soname);
  return out;
}

void* open_first(const std::vector<std::string>& candidates, std::string& tried) {
  for (const auto& name : candidates) {
    if (void* lib = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL)) return lib;
    const char* why = dlerror();
    tried += (tried.empty() ? "" : "; ") + std::string(why ? why : name + ": not loadable");
  }
  return nullptr;
}

std::string opened_path(void* lib, const std::string& fallback) {
  link_map* map = nullptr;
  if (dlinfo(lib, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name && *map->l_name)
    return map->l_name;
  return fallback;
}

}  // namespace holmes
