// Reading a tokenizer file whole, with the errors every loader gives.
#pragma once

#include <string>

namespace holmes::tokenizer {

// The bytes of `path`. UserError "<path>: <what> ..." when it is missing, a folder, not a
// regular file, unreadable or empty. `what` names the role ("tiktoken rank file").
std::string read_file_text(const std::string& path, const std::string& what);

}  // namespace holmes::tokenizer
