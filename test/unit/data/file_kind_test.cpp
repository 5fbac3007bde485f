// Files that are not token files are recognised before their bytes train as tokens: text
// (which passes for raw uint16 tokens of a GPT-2 vocabulary), UTF-16 text, archives, arrays
// with headers. Real token files are not mistaken for any of them.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "common/errors.hpp"
#include "engine/data/file_kind.hpp"
#include "engine/data/token_file.hpp"

using namespace holmes;

namespace {

std::string write_file(const std::string& name, const std::string& bytes) {
  auto dir = std::filesystem::temp_directory_path() / "holmes_file_kind_test";
  std::filesystem::create_directories(dir);
  const std::string path = (dir / name).string();
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  return path;
}

std::string open_error(const std::string& path, data::TokenFormat format, int vocab) {
  try {
    data::TokenFile::open(path, format, vocab);
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

std::string kind_of(const std::string& bytes) {
  return data::non_token_kind(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size());
}

}  // namespace

TEST_CASE("a text file given as tokens is refused and pointed to prepare-data") {
  std::string text;
  while (text.size() < 200000) text += "It was the best of times, it was the worst of times. Caf\xc3\xa9 \xe2\x80\x94 ok.\n";
  const std::string path = write_file("corpus.txt", text);
  for (auto format : {data::TokenFormat::kAuto, data::TokenFormat::kRawUint16}) {
    const std::string msg = open_error(path, format, 50257);
    CHECK_THAT(msg, Catch::Contains(path + ": this is UTF-8 text, not a token file") &&
                        Catch::Contains("holmes-train prepare-data --input " + path));
  }
  // An odd-sized text file, and one cut inside a multi-byte character at the sample's end.
  CHECK(kind_of("hello\n") == "UTF-8 text");
  CHECK(kind_of(std::string(65535, 'a') + "\xc3\xa9") == "UTF-8 text");
}

TEST_CASE("archives, arrays with headers and UTF-16 text are named") {
  CHECK(kind_of(std::string("\x1f\x8b\x08\x00", 4) + std::string(100, '\0')) == "gzip-compressed data");
  CHECK_THAT(kind_of(std::string("\x93NUMPY\x01\x00", 8) + "{'descr': '<u2'"), Catch::Contains(".npy"));
  CHECK_THAT(kind_of(std::string("\xff\xfeh\0i\0", 6)), Catch::Contains("UTF-16 text"));
  std::string tar(1024, '\0');
  tar.replace(257, 5, "ustar");
  CHECK(kind_of(tar) == "a tar archive");
  const std::string path = write_file("data.npy", std::string("\x93NUMPY\x01\x00", 8) + std::string(120, ' '));
  CHECK_THAT(open_error(path, data::TokenFormat::kAuto, 65535), Catch::Contains("ids.astype(numpy.uint16).tofile"));
}

TEST_CASE("real token files are not taken for text") {
  // Tokens of a 50257 vocabulary drawn at random, and byte-level tokens of text (each has a
  // zero high byte): neither is text, both open as raw uint16.
  std::mt19937 rng(7);
  std::vector<uint16_t> random_ids(40000), byte_ids;
  for (auto& t : random_ids) t = static_cast<uint16_t>(rng() % 50257);
  for (char c : std::string("plain words, as a byte tokenizer writes them\n")) byte_ids.push_back(static_cast<uint8_t>(c));
  for (const auto* ids : {&random_ids, &byte_ids}) {
    const std::string bytes(reinterpret_cast<const char*>(ids->data()), ids->size() * 2);
    CHECK(kind_of(bytes).empty());
    const std::string path = write_file("tokens.bin", bytes);
    auto f = data::TokenFile::open(path, data::TokenFormat::kAuto, 50257);
    CHECK(f.format() == data::TokenFormat::kRawUint16);
    CHECK(f.tokens().size() == ids->size());
  }
}
