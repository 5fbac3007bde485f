#include "engine/data/prepare.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <future>
#include <memory>
#include <thread>

#include "common/errors.hpp"
#include "engine/data/indexed_dataset.hpp"
#include "engine/data/jsonl_reader.hpp"
#include "engine/data/token_writer.hpp"
#include "engine/tokenizer/load.hpp"
#include "engine/tokenizer/parallel.hpp"
#include "engine/tokenizer/saved.hpp"

namespace holmes::data {

namespace fs = std::filesystem;

std::string tokenizer_sidecar(const std::string& token_file) { return token_file + ".tokenizer"; }

namespace {


// Where the output goes: llm.c's file, or a Megatron dataset's PREFIX.bin and PREFIX.idx.
struct Outputs {
  bool megatron = false;
  std::string prefix;   // megatron only
  std::string sidecar;  // the tokenizer folder beside the data file
  std::vector<fs::path> all() const {
    std::vector<fs::path> v{sidecar};
    if (megatron) v.insert(v.end(), {prefix + ".bin", prefix + ".idx"});
    return v;
  }
};

Outputs outputs_of(const PrepareRequest& r) {
  Outputs o;
  o.megatron = r.format == OutputFormat::kMegatron ||
               (r.format == OutputFormat::kAuto && r.out.size() > 4 && r.out.ends_with(".idx"));
  if (o.megatron) o.prefix = indexed_prefix(r.out);
  o.sidecar = tokenizer_sidecar(o.megatron ? o.prefix + ".bin" : r.out);
  return o;
}

// Every input a readable, non-empty regular file of a kind this reader takes (its kind into
// `kinds`); the outputs (and the sidecar) new paths or earlier outputs, never an input, in a
// folder that exists. Returns the inputs' total size.
int64_t check_paths(const PrepareRequest& r, const Outputs& outs, std::vector<InputKind>* kinds) {
  if (r.inputs.empty()) throw UserError("prepare-data --input: no input files given");
  std::error_code ec;
  const fs::path out(r.out), sidecar(outs.sidecar);
  if (fs::is_directory(out, ec))
    throw UserError(fmt::format("prepare-data --out: '{}' is a folder; expected the path of the token file to write",
                                r.out));
  const fs::path folder = out.parent_path().empty() ? fs::path(".") : out.parent_path();
  if (!fs::is_directory(folder, ec))
    throw UserError(fmt::format("prepare-data --out: the folder '{}' of '{}' does not exist", folder.string(), r.out));
  if (fs::exists(sidecar, ec) && !tokenizer::is_saved_tokenizer(sidecar.string()))
    throw UserError(fmt::format("prepare-data --out: '{}' exists and is not a tokenizer folder prepare-data wrote; "
                                "it would be replaced by the tokenizer of '{}': move it or choose another --out",
                                sidecar.string(), r.out));
  int64_t total = 0;
  for (const auto& path : r.inputs) {
    const auto st = fs::status(path, ec);
    if (!fs::exists(st))
      throw UserError(fmt::format("prepare-data --input: '{}' does not exist; expected a text or JSON Lines file",
                                  path));
    if (fs::is_directory(st))
      throw UserError(fmt::format("prepare-data --input: '{}' is a folder; expected text files (e.g. --input "
                                  "{}/*.txt)", path, path));
    if (!fs::is_regular_file(st))
      throw UserError(fmt::format("prepare-data --input: '{}' is not a regular file; expected a text or JSON Lines "
                                  "file", path));
    std::vector<fs::path> written = outs.all();
    written.push_back(out);
    for (const fs::path& o : written) {
      if (fs::exists(o, ec) && fs::equivalent(path, o, ec))
        throw UserError(fmt::format("prepare-data --out: '{}' is also an --input ('{}'); writing it would destroy the "
                                    "text: choose another output path", o.string(), path));
      if (fs::path(path).lexically_normal() == o.lexically_normal())
        throw UserError(fmt::format("prepare-data --out: '{}' is also an --input", o.string()));
    }
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
      throw UserError(fmt::format("prepare-data --input: '{}' cannot be read: {}", path, std::strerror(errno)));
    unsigned char head[512];
    const ssize_t got = ::read(fd, head, sizeof(head));
    ::close(fd);
    kinds->push_back(detect_input(path, head, got > 0 ? static_cast<size_t>(got) : 0, r.input_format));
    const auto size = fs::file_size(path, ec);
    if (size == 0)
      throw UserError(fmt::format("prepare-data --input: '{}' is empty (0 bytes); expected a text or JSON Lines "
                                  "file with at least one byte", path));
    total += static_cast<int64_t>(size);
  }
  return total;
}

struct Interrupted {
  int signal;
};

// Tokenization in progress: the encoder, the output, the counts, the hooks.
struct Run {
  const PrepareRequest& r;
  const PrepareHooks& hooks;
  tokenizer::ParallelEncoder& enc;
  TokenOutput& out;
  uint32_t doc;  // the document token
  PrepareProgress p;
  PrepareResult res;
  std::chrono::steady_clock::time_point t0, last_report;

  // After a window or batch: the stop signal, and progress about once a second.
  void tick(int64_t file_bytes) {
    if (const int sig = hooks.stop_signal ? hooks.stop_signal() : 0; sig != 0) throw Interrupted{sig};
    const auto now = std::chrono::steady_clock::now();
    if (hooks.progress && now - last_report >= std::chrono::seconds(1)) {
      p.tokens = out.count();
      p.seconds = std::chrono::duration<double>(now - t0).count();
      PrepareProgress shown = p;
      shown.bytes_done += file_bytes;
      hooks.progress(shown);
      last_report = now;
    }
  }

  void text_file(const std::string& path, Compression compression) {
    InputStream in(path, compression);
    out.begin_document();
    out.append({&doc, 1});
    ++res.documents;
    tokenizer::encode_document(
        enc, [&](char* buf, size_t n) { return in.read(buf, n); }, r.window,
        [&](std::span<const uint32_t> tokens, size_t bytes) {
          res.text_bytes += static_cast<int64_t>(bytes);
          out.append(tokens);
          tick(in.file_bytes_read());
        });
    p.bytes_done += in.file_bytes_read();
  }

  // JSON Lines: documents batched by bytes; a batch encodes on the threads while the next is read.
  struct Batch {
    std::string text;
    std::vector<size_t> ends;  // end of each document in text
    std::vector<std::string_view> views() const {
      std::vector<std::string_view> v;
      size_t at = 0;
      for (size_t e : ends) v.emplace_back(text.data() + at, e - at), at = e;
      return v;
    }
  };

  bool read_batch(JsonlReader& reader, const std::string& path, Batch* b) {
    b->text.clear();
    b->ends.clear();
    JsonlReader::Line line;
    while (b->text.size() < r.window) {
      if (!reader.next(&line)) return false;
      if (!line.problem.empty()) {
        ++res.skipped_lines;
        const std::string what = fmt::format("{}:{}: {}", path, line.number, line.problem);
        if (res.skipped_lines > r.max_bad_lines)
          throw UserError(fmt::format("prepare-data: more than {} malformed JSON lines (--max-bad-lines {}); the one "
                                      "over the limit: {}; nothing written (a file that is one text document, not "
                                      "JSON Lines: --input-format text)", r.max_bad_lines, r.max_bad_lines, what));
        if (hooks.bad_line) hooks.bad_line(what);
        continue;
      }
      if (line.text.empty()) {
        ++res.empty_documents;
        continue;
      }
      b->text.append(line.text);
      b->ends.push_back(b->text.size());
      res.text_bytes += static_cast<int64_t>(line.text.size());
    }
    return true;
  }

  void jsonl_file(const std::string& path, Compression compression) {
    InputStream in(path, compression);
    JsonlReader reader(in, path, r.text_key);
    Batch now, next;
    std::vector<uint32_t> tokens;
    std::vector<size_t> ends;
    bool more = read_batch(reader, path, &now);
    while (!now.ends.empty()) {
      tokens.clear();
      const std::vector<std::string_view> docs = now.views();
      // Joined before anything below can throw past it (a future from std::async waits in its destructor).
      auto encoding = std::async(std::launch::async, [&] { enc.encode_documents(docs, &tokens, &ends); });
      const bool after = more && read_batch(reader, path, &next);
      if (!more) next.ends.clear();
      encoding.get();
      size_t at = 0;
      for (size_t e : ends) {
        out.begin_document();
        out.append({&doc, 1});
        out.append(std::span<const uint32_t>(tokens).subspan(at, e - at));
        at = e;
      }
      res.documents += static_cast<int64_t>(ends.size());
      tick(in.file_bytes_read());
      std::swap(now, next);
      more = after;
    }
    p.bytes_done += in.file_bytes_read();
  }
};

}  // namespace

PrepareResult prepare_tokens(const PrepareRequest& r, const PrepareHooks& hooks, int* stopped_by) {
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  const Outputs outs = outputs_of(r);
  std::vector<InputKind> kinds;
  const int64_t total = check_paths(r, outs, &kinds);
  const auto tok = tokenizer::load_tokenizer(r.tokenizer);
  const int threads = r.threads > 0 ? r.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  tokenizer::ParallelEncoder enc(*tok, r.allow_special, threads);
  std::unique_ptr<TokenOutput> out;
  if (outs.megatron) out = std::make_unique<IndexedWriter>(outs.prefix, tok->id_count());
  else out = std::make_unique<TokenWriter>(r.out, tok->id_count(), TokenizerStamp{tok->hash(), tok->id_count()});
  Run run{r, hooks, enc, *out, tok->document_token(), {}, {}, t0, t0};
  run.p.bytes_total = total;
  try {
    for (size_t i = 0; i < r.inputs.size(); ++i) {
      if (kinds[i].format == InputFormat::kJsonl) run.jsonl_file(r.inputs[i], kinds[i].compression);
      else run.text_file(r.inputs[i], kinds[i].compression);
    }
    if (run.res.documents == 0)
      throw UserError(fmt::format("prepare-data: the inputs hold no document ({} malformed and {} empty JSON lines "
                                  "left out); nothing written", run.res.skipped_lines, run.res.empty_documents));
    // The tokenizer first, the token data last: token data never exists without it.
    const bool had_sidecar = fs::exists(outs.sidecar);
    tokenizer::save_tokenizer(*tok, outs.sidecar);
    try {
      out->commit();
    } catch (...) {
      if (!had_sidecar) fs::remove_all(outs.sidecar);
      throw;
    }
  } catch (const Interrupted& i) {
    if (stopped_by) *stopped_by = i.signal;
    return {};
  }
  PrepareResult res = run.res;
  res.tokens = out->count();
  res.bytes = total;
  res.token_bytes = out->width_bytes();
  res.output = out->described();
  res.tokenizer = tok->describe();
  res.sidecar = outs.sidecar;
  res.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return res;
}

}  // namespace holmes::data
