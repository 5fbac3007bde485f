// Reading launcher variables out of an environment map, with errors that name the variable,
// the value seen and what is accepted. Internal to engine/launch.
#pragma once

#include <climits>
#include <map>
#include <optional>
#include <string>

namespace holmes::launch::detail {

using EnvMap = std::map<std::string, std::string>;

// The value of `name`, or nullopt when it is absent or empty (an exported but empty variable
// is treated as not set).
std::optional<std::string> get(const EnvMap& env, const std::string& name);

// The first of `names` that is set, with its name; nullopt when none is.
std::optional<std::pair<std::string, std::string>> first_of(const EnvMap& env,
                                                            std::initializer_list<const char*> names);

// Parses `text` (the value of variable `name`) as a whole decimal integer in [lo, hi].
// `accepted` describes the accepted range in words for the message, e.g. "0 <= RANK < WORLD_SIZE=4".
long long parse_int(const std::string& name, const std::string& text, long long lo, long long hi,
                    const std::string& accepted);

// get() + parse_int(); nullopt when the variable is not set.
std::optional<long long> get_int(const EnvMap& env, const std::string& name, long long lo, long long hi,
                                 const std::string& accepted);

}  // namespace holmes::launch::detail
