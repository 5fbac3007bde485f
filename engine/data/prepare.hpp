// `prepare-data`: text files -> one token file. Each input file is one document; the
// vocabulary's document token (GPT-2's <|endoftext|>, Llama 3's <|begin_of_text|>, ...) goes
// before each. Inputs stream through in windows on every thread (engine/tokenizer/parallel.hpp),
// so memory stays bounded whatever their size, and the tokens are exactly those of encoding
// each document whole. Writes <out> (token_writer.hpp) and the tokenizer's files in
// <out>.tokenizer (engine/tokenizer/saved.hpp), or nothing when it fails.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace holmes::data {

struct PrepareRequest {
  std::vector<std::string> inputs;
  std::string out;
  std::string tokenizer = "bytes";  // a --tokenizer SPEC (engine/tokenizer/load.hpp)
  int threads = 0;                  // 0 = every core
  bool allow_special = false;       // special tokens' spellings in the text become special tokens
  size_t window = size_t{32} << 20; // bytes of text per window
};

struct PrepareProgress {
  int64_t bytes_done = 0, bytes_total = 0, tokens = 0;
  double seconds = 0;
};

struct PrepareResult {
  int64_t tokens = 0, bytes = 0;
  int documents = 0;
  int token_bytes = 2;        // 2: llm.c 16-bit; 4: the 32-bit variant
  std::string tokenizer;      // Tokenizer::describe()
  std::string sidecar;        // <out>.tokenizer
  double seconds = 0;
};

// The folder beside a token file that holds its tokenizer.
std::string tokenizer_sidecar(const std::string& token_file);

// Checks every path first (UserError naming the flag, the file and what is wrong: missing,
// a folder, unreadable, empty, the output being an input), then tokenizes. `progress` is
// called about once a second; `stop_signal` is polled between windows: a non-zero value (a
// signal's number) ends the run with nothing written, returned in `stopped_by`.
PrepareResult prepare_tokens(const PrepareRequest& r, const std::function<void(const PrepareProgress&)>& progress,
                             const std::function<int()>& stop_signal = {}, int* stopped_by = nullptr);

}  // namespace holmes::data
