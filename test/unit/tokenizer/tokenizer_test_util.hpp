// Small real vocabularies for the tokenizer tests, trained here by brute-force BPE (most
// frequent adjacent pair first) so no vocabulary file is needed, and written in each format
// the loaders read.
#pragma once

#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "engine/tokenizer/byte_level.hpp"

namespace holmes::tokenizer::test {

struct TrainedBpe {
  std::vector<std::string> tokens;                          // id -> bytes; 0..255 are the bytes
  std::vector<std::pair<std::string, std::string>> merges;  // merge i makes token 256 + i
};

// Trains `merges` merges on the space-led words of `text` (" the", " cat", ...).
inline TrainedBpe train_bpe(const std::string& text, int merges) {
  TrainedBpe v;
  for (int b = 0; b < 256; ++b) v.tokens.emplace_back(1, static_cast<char>(b));
  std::map<std::string, int> words;
  for (size_t i = 0; i < text.size();) {
    size_t j = text.find(' ', i + 1);
    if (j == std::string::npos) j = text.size();
    ++words[text.substr(i, j - i)];
    i = j;
  }
  std::vector<std::pair<std::vector<std::string>, int>> split;
  for (const auto& [w, n] : words) {
    std::vector<std::string> parts;
    for (char c : w) parts.emplace_back(1, c);
    split.emplace_back(parts, n);
  }
  for (int m = 0; m < merges; ++m) {
    std::map<std::pair<std::string, std::string>, int> count;
    for (const auto& [parts, n] : split)
      for (size_t i = 0; i + 1 < parts.size(); ++i) count[{parts[i], parts[i + 1]}] += n;
    if (count.empty()) break;
    auto best = count.begin();
    for (auto it = count.begin(); it != count.end(); ++it)
      if (it->second > best->second) best = it;
    const auto [a, b] = best->first;
    v.merges.emplace_back(a, b);
    v.tokens.push_back(a + b);
    for (auto& [parts, n] : split)
      for (size_t i = 0; i + 1 < parts.size(); ++i)
        if (parts[i] == a && parts[i + 1] == b) {
          parts[i] = a + b;
          parts.erase(parts.begin() + static_cast<std::ptrdiff_t>(i) + 1);
        }
  }
  return v;
}

// Words made of syllables drawn by a fixed generator: a few thousand distinct words, so a
// few hundred merges exist, with some words frequent and most rare.
inline std::string test_text() {
  const char* syl[] = {"ka", "to", "ri", "men", "sa", "lu", "the", "an", "ing", "er", "o", "pe", "st", "qu", "il",
                       "na", "ver", "com", "ed", "y"};
  std::string s;
  uint32_t x = 12345;
  for (int i = 0; i < 6000; ++i) {
    s += ' ';
    x = x * 1103515245u + 12345u;
    const int n = 1 + static_cast<int>((x >> 16) % 3);
    for (int k = 0; k < n; ++k) {
      x = x * 1103515245u + 12345u;
      s += syl[(x >> 16) % 4 == 0 ? (x >> 18) % 20 : (x >> 18) % 7];  // the first seven are common
    }
  }
  return s;
}

inline std::filesystem::path temp_dir(const std::string& name) {
  auto d = std::filesystem::temp_directory_path() / fmt::format("holmes-tokenizer-test-{}-{}", ::getpid(), name);
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

inline void write_file(const std::filesystem::path& p, const std::string& bytes) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f << bytes;
}

inline std::string json_string(const std::string& utf8) {
  std::string s = "\"";
  for (char c : utf8) {
    if (c == '"' || c == '\\') s += '\\';
    s += c;
  }
  return s + "\"";
}

// vocab.json (byte-level spellings) with <|endoftext|> as the last id, and merges.txt.
inline void write_gpt2_files(const TrainedBpe& v, const std::filesystem::path& dir) {
  std::string vocab = "{";
  for (size_t id = 0; id < v.tokens.size(); ++id)
    vocab += fmt::format("{}{}: {}", id ? ", " : "", json_string(byte_level_from_bytes(v.tokens[id])), id);
  vocab += fmt::format(", \"<|endoftext|>\": {}}}", v.tokens.size());
  write_file(dir / "vocab.json", vocab);
  std::string merges = "#version: 0.2\n";
  for (const auto& [a, b] : v.merges) merges += byte_level_from_bytes(a) + " " + byte_level_from_bytes(b) + "\n";
  write_file(dir / "merges.txt", merges);
}

}  // namespace holmes::tokenizer::test
