// `holmes-train prepare-data`: text files -> one token file with a real tokenizer (GPT-2,
// tiktoken, Hugging Face tokenizer.json, SentencePiece; engine/data/prepare.hpp), the
// document token before each file's document, the tokenizer beside it in <out>.tokenizer.
#include <fmt/format.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cmd/commands.hpp"
#include "cmd/option_values.hpp"
#include "engine/data/prepare.hpp"
#include "engine/launch/signals.hpp"

namespace holmes::cmd {

namespace {

void print_progress(const data::PrepareProgress& p) {
  const double mb = static_cast<double>(p.bytes_done) / 1e6, total = static_cast<double>(p.bytes_total) / 1e6;
  const double rate = p.seconds > 0 ? mb / p.seconds : 0;
  const double eta = rate > 0 ? (total - mb) / rate : 0;
  fmt::print(stderr, "prepare-data: {:.1f}/{:.1f} MB ({:.0f}%), {:.1f} MB/s, {} tokens, ETA {:.0f} s\n", mb, total,
             total > 0 ? 100 * mb / total : 100.0, rate, p.tokens, eta);
}

int run_prepare(const data::PrepareRequest& r) {
  launch::install_stop_signal_handlers();
  int stopped = 0;
  // A progress line every 5 s, and only for inputs that take that long.
  double next = 5;
  const data::PrepareResult res = data::prepare_tokens(
      r,
      [&](const data::PrepareProgress& p) {
        if (p.seconds < next) return;
        print_progress(p);
        next = p.seconds + 5;
      },
      [] { return launch::stop_signal(); }, &stopped);
  if (stopped != 0) {
    fmt::print(stderr, "prepare-data: stopped by signal {}; nothing written\n", stopped);
    return 128 + stopped;
  }
  fmt::print("prepare-data: wrote {} tokens from {} file(s) ({:.1f} MB, {:.1f} s, {:.1f} MB/s) to {} ({})\n", res.tokens,
             res.documents, static_cast<double>(res.bytes) / 1e6, res.seconds,
             res.seconds > 0 ? static_cast<double>(res.bytes) / 1e6 / res.seconds : 0.0, r.out,
             res.token_bytes == 2 ? "llm.c format, uint16 tokens" : "llm.c 32-bit format, uint32 tokens");
  fmt::print("prepare-data: tokenizer {}; its files are in {}\n", res.tokenizer, res.sidecar);
  return 0;
}

}  // namespace

Action add_prepare_data(CLI::App& parent) {
  auto* sub = parent.add_subcommand("prepare-data", "Turn text files into a token file with a tokenizer");
  auto r = std::make_shared<data::PrepareRequest>();
  sub->add_option("--input", r->inputs, "Text files to tokenize (each one document)")->required()->option_text("FILE...");
  sub->add_option("--out", r->out, "Token file to write (llm.c format; its tokenizer goes in FILE.tokenizer)")
      ->required()->option_text("FILE");
  sub->add_option("--tokenizer", r->tokenizer,
                  "bytes; NAME:PATH with NAME gpt2, r50k_base, p50k_base, cl100k_base, o200k_base or llama3; or a "
                  "tokenizer.json, vocab.json (+ merges.txt), NAME.tiktoken, SentencePiece .model, or a folder with one")
      ->capture_default_str()->option_text("SPEC");
  add_number(*sub, "--threads", r->threads, "Encoding threads; 0 = every core", 0);
  sub->add_flag("--allow-special", r->allow_special,
                "Turn special tokens spelled in the text (<|endoftext|>, ...) into special tokens; by default they "
                "are ordinary text");
  return [r] { return run_prepare(*r); };
}

}  // namespace holmes::cmd
