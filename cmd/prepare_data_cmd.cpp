// `holmes-train prepare-data`: text files and JSON Lines (plain, gzip, zstd) -> tokens with a
// real tokenizer (GPT-2, tiktoken, Hugging Face tokenizer.json, SentencePiece;
// engine/data/prepare.hpp), the document token before each document, written as llm.c's token
// file or Megatron's indexed dataset, the tokenizer beside it in <data file>.tokenizer.
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
  data::PrepareHooks hooks;
  hooks.progress = [&](const data::PrepareProgress& p) {
    if (p.seconds < next) return;
    print_progress(p);
    next = p.seconds + 5;
  };
  hooks.stop_signal = [] { return launch::stop_signal(); };
  hooks.bad_line = [](const std::string& what) { fmt::print(stderr, "prepare-data: skipped {}\n", what); };
  const data::PrepareResult res = data::prepare_tokens(r, hooks, &stopped);
  if (stopped != 0) {
    fmt::print(stderr, "prepare-data: stopped by signal {}; nothing written\n", stopped);
    return 128 + stopped;
  }
  const double text_mb = static_cast<double>(res.text_bytes) / 1e6;
  fmt::print("prepare-data: wrote {} tokens of {} documents from {} file(s) ({:.1f} MB of text, {:.1f} s, {:.1f} MB/s) "
             "to {}\n", res.tokens, res.documents, r.inputs.size(), text_mb, res.seconds,
             res.seconds > 0 ? text_mb / res.seconds : 0.0, res.output);
  if (res.skipped_lines > 0 || res.empty_documents > 0)
    fmt::print("prepare-data: left out {} malformed JSON line(s) and {} empty document(s)\n", res.skipped_lines,
               res.empty_documents);
  fmt::print("prepare-data: tokenizer {}; its files are in {}\n", res.tokenizer, res.sidecar);
  return 0;
}

}  // namespace

Action add_prepare_data(CLI::App& parent) {
  auto* sub = parent.add_subcommand("prepare-data", "Turn text files or JSON Lines into tokens with a tokenizer");
  auto r = std::make_shared<data::PrepareRequest>();
  auto input_format = std::make_shared<std::string>("auto");
  auto format = std::make_shared<std::string>("auto");
  sub->add_option("--input", r->inputs,
                  "Inputs to tokenize: text files (each one document) or JSON Lines (.jsonl, .ndjson, .json: one "
                  "document per line), plain or compressed (.gz, .zst)")
      ->required()->option_text("FILE...");
  sub->add_option("--out", r->out,
                  "Where to write: an llm.c token file, or with --format megatron (or a name ending in .idx) the "
                  "Megatron dataset PREFIX.bin + PREFIX.idx; the tokenizer goes beside the data file in "
                  "DATA.tokenizer")
      ->required()->option_text("FILE");
  sub->add_option("--format", *format,
                  "Output format: auto (megatron when --out ends in .idx, else llmc), llmc, megatron")
      ->check(one_of({"auto", "llmc", "megatron"}))->capture_default_str();
  sub->add_option("--input-format", *input_format,
                  "What the inputs hold: auto (JSON Lines when named .jsonl, .ndjson or .json, each possibly with .gz "
                  "or .zst; otherwise text), text, jsonl")
      ->check(one_of({"auto", "text", "jsonl"}))->capture_default_str();
  sub->add_option("--text-key", r->text_key, "JSON Lines: the key of a document's text")->capture_default_str();
  add_number<int64_t>(*sub, "--max-bad-lines", r->max_bad_lines,
                      "Malformed JSON lines (bad JSON, no text key, text not a string) skipped, each reported as "
                      "FILE:LINE, before the run stops with nothing written", 0);
  sub->add_option("--tokenizer", r->tokenizer,
                  "bytes; NAME:PATH with NAME gpt2, r50k_base, p50k_base, cl100k_base, o200k_base or llama3; or a "
                  "tokenizer.json, vocab.json (+ merges.txt), NAME.tiktoken, SentencePiece .model, or a folder with one")
      ->capture_default_str()->option_text("SPEC");
  add_number(*sub, "--threads", r->threads, "Encoding threads; 0 = every core", 0);
  sub->add_flag("--allow-special", r->allow_special,
                "Turn special tokens spelled in the text (<|endoftext|>, ...) into special tokens; by default they "
                "are ordinary text");
  return [r, input_format, format] {
    r->input_format = *input_format == "text"    ? data::InputFormat::kText
                      : *input_format == "jsonl" ? data::InputFormat::kJsonl
                                                 : data::InputFormat::kAuto;
    r->format = *format == "llmc"       ? data::OutputFormat::kLlmc
                : *format == "megatron" ? data::OutputFormat::kMegatron
                                        : data::OutputFormat::kAuto;
    return run_prepare(*r);
  };
}

}  // namespace holmes::cmd
