// `prepare-data`: text -> tokens. Inputs are text files (each one document) or JSON Lines (one
// document per line, the text under --text-key), either plain or compressed with gzip or zstd
// (input_stream.hpp, jsonl_reader.hpp). The vocabulary's document token (GPT-2's
// <|endoftext|>, Llama 3's <|begin_of_text|>, ...) goes before each document. A text file
// streams through in windows on every thread, JSON Lines in batches of documents spread over
// the threads while the next batch is read (engine/tokenizer/parallel.hpp), so memory stays
// bounded whatever the inputs' size, and the tokens are exactly those of encoding each
// document whole. Writes llm.c's token file (token_writer.hpp) or Megatron's indexed dataset
// (indexed_dataset.hpp) and the tokenizer's files beside it (engine/tokenizer/saved.hpp), or
// nothing when it fails.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/data/input_stream.hpp"

namespace holmes::data {

// prepare-data --format: auto = megatron when --out ends in .idx, else llmc.
enum class OutputFormat { kAuto, kLlmc, kMegatron };

struct PrepareRequest {
  std::vector<std::string> inputs;
  std::string out;
  std::string tokenizer = "bytes";  // a --tokenizer SPEC (engine/tokenizer/load.hpp)
  int threads = 0;                  // 0 = every core
  bool allow_special = false;       // special tokens' spellings in the text become special tokens
  size_t window = size_t{32} << 20; // bytes of text per window (and per batch of JSONL documents)
  InputFormat input_format = InputFormat::kAuto;
  std::string text_key = "text";    // JSON Lines: the key holding a document's text
  int64_t max_bad_lines = 100;      // malformed JSON lines skipped before the run stops
  OutputFormat format = OutputFormat::kAuto;
};

struct PrepareProgress {
  int64_t bytes_done = 0, bytes_total = 0, tokens = 0;
  double seconds = 0;
};

struct PrepareResult {
  int64_t tokens = 0, bytes = 0;  // bytes: of the input files (compressed ones as they are)
  int64_t text_bytes = 0;         // of the documents' text (decompressed, JSON unescaped)
  int64_t documents = 0;
  int64_t skipped_lines = 0;   // malformed JSON lines left out
  int64_t empty_documents = 0;  // JSON lines whose text is "" (left out: no tokens)
  int token_bytes = 2;        // bytes per stored id
  std::string output;         // TokenOutput::described()
  std::string tokenizer;      // Tokenizer::describe()
  std::string sidecar;        // <data file>.tokenizer
  double seconds = 0;
};

// The folder beside a token file (a Megatron dataset's .bin) that holds its tokenizer.
std::string tokenizer_sidecar(const std::string& token_file);

struct PrepareHooks {
  std::function<void(const PrepareProgress&)> progress;  // about once a second
  // Polled between windows and batches: a non-zero value (a signal's number) ends the run
  // with nothing written, returned in prepare_tokens' `stopped_by`.
  std::function<int()> stop_signal;
  // Each malformed JSON line as it is skipped: "FILE:LINE: what is wrong".
  std::function<void(const std::string&)> bad_line;
};

// Checks every path first (UserError naming the flag, the file and what is wrong: missing,
// a folder, unreadable, empty, compressed as this reader does not take, the output being an
// input), then tokenizes. More than max_bad_lines malformed JSON lines stop the run with a
// UserError naming the last one, nothing written.
PrepareResult prepare_tokens(const PrepareRequest& r, const PrepareHooks& hooks = {}, int* stopped_by = nullptr);

}  // namespace holmes::data
