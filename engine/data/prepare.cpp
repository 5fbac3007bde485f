#include "engine/data/prepare.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <thread>

#include "common/errors.hpp"
#include "engine/data/token_writer.hpp"
#include "engine/tokenizer/load.hpp"
#include "engine/tokenizer/parallel.hpp"
#include "engine/tokenizer/saved.hpp"

namespace holmes::data {

namespace fs = std::filesystem;

std::string tokenizer_sidecar(const std::string& token_file) { return token_file + ".tokenizer"; }

namespace {

// Every input a readable, non-empty regular file; the output (and its sidecar) a new path or
// an earlier output, never an input, in a folder that exists. Returns the inputs' total size.
int64_t check_paths(const PrepareRequest& r) {
  if (r.inputs.empty()) throw UserError("prepare-data --input: no input files given");
  std::error_code ec;
  const fs::path out(r.out), sidecar(tokenizer_sidecar(r.out));
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
      throw UserError(fmt::format("prepare-data --input: '{}' does not exist; expected a text file", path));
    if (fs::is_directory(st))
      throw UserError(fmt::format("prepare-data --input: '{}' is a folder; expected text files (e.g. --input "
                                  "{}/*.txt)", path, path));
    if (!fs::is_regular_file(st))
      throw UserError(fmt::format("prepare-data --input: '{}' is not a regular file; expected a text file", path));
    for (const fs::path& o : {out, sidecar})
      if (fs::exists(o, ec) && fs::equivalent(path, o, ec))
        throw UserError(fmt::format("prepare-data --out: '{}' is also an --input ('{}'); writing it would destroy the "
                                    "text: choose another output path", o.string(), path));
    if (fs::path(path).lexically_normal() == out.lexically_normal())
      throw UserError(fmt::format("prepare-data --out: '{}' is also an --input", r.out));
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
      throw UserError(fmt::format("prepare-data --input: '{}' cannot be read: {}", path, std::strerror(errno)));
    ::close(fd);
    const auto size = fs::file_size(path, ec);
    if (size == 0)
      throw UserError(fmt::format("prepare-data --input: '{}' is empty (0 bytes); expected a text file with at least "
                                  "one byte", path));
    total += static_cast<int64_t>(size);
  }
  return total;
}

struct Interrupted {
  int signal;
};

}  // namespace

PrepareResult prepare_tokens(const PrepareRequest& r, const std::function<void(const PrepareProgress&)>& progress,
                             const std::function<int()>& stop_signal, int* stopped_by) {
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  PrepareProgress p;
  p.bytes_total = check_paths(r);
  const auto tok = tokenizer::load_tokenizer(r.tokenizer);
  const int threads = r.threads > 0 ? r.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  tokenizer::ParallelEncoder enc(*tok, r.allow_special, threads);
  TokenWriter writer(r.out, tok->id_count(), {tok->hash(), tok->id_count()});
  auto last_report = t0;
  const uint32_t doc = tok->document_token();
  try {
    for (const auto& path : r.inputs) {
      writer.append({&doc, 1});
      std::FILE* in = std::fopen(path.c_str(), "rb");
      if (!in) throw UserError(fmt::format("{}: cannot read the input text file: {}", path, std::strerror(errno)));
      try {
        tokenizer::encode_document(
            enc,
            [&](char* buf, size_t n) {
              const size_t got = std::fread(buf, 1, n, in);
              if (got == 0 && std::ferror(in))
                throw UserError(fmt::format("{}: reading the input text file failed: {}", path, std::strerror(errno)));
              return got;
            },
            r.window,
            [&](std::span<const uint32_t> tokens, size_t bytes) {
              writer.append(tokens);
              p.bytes_done += static_cast<int64_t>(bytes);
              if (const int sig = stop_signal ? stop_signal() : 0; sig != 0) throw Interrupted{sig};
              const auto now = Clock::now();
              if (progress && now - last_report >= std::chrono::seconds(1)) {
                p.tokens = writer.count();
                p.seconds = std::chrono::duration<double>(now - t0).count();
                progress(p);
                last_report = now;
              }
            });
      } catch (...) {
        std::fclose(in);
        throw;
      }
      std::fclose(in);
    }
    // The tokenizer first, the token file last: a token file never exists without it.
    const bool had_sidecar = fs::exists(tokenizer_sidecar(r.out));
    tokenizer::save_tokenizer(*tok, tokenizer_sidecar(r.out));
    try {
      writer.commit();
    } catch (...) {
      if (!had_sidecar) fs::remove_all(tokenizer_sidecar(r.out));
      throw;
    }
  } catch (const Interrupted& i) {
    if (stopped_by) *stopped_by = i.signal;
    return {};
  }
  PrepareResult res;
  res.tokens = writer.count();
  res.bytes = p.bytes_total;
  res.documents = static_cast<int>(r.inputs.size());
  res.token_bytes = writer.width_bytes();
  res.tokenizer = tok->describe();
  res.sidecar = tokenizer_sidecar(r.out);
  res.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return res;
}

}  // namespace holmes::data
