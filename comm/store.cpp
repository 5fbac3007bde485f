#include "common/hash.hpp"
#include "comm/store.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <thread>

#include "comm/errors.hpp"
#include "comm/file_store.hpp"
#include "comm/tcp_store.hpp"
#include "common/errors.hpp"

namespace holmes::comm {

namespace {

std::string join(const std::vector<std::string>& items, size_t limit = 16) {
  std::string out;
  for (size_t i = 0; i < items.size() && i < limit; ++i) out += (i ? ", " : "") + items[i];
  if (items.size() > limit) out += fmt::format(", ... ({} in all)", items.size());
  return out;
}

}  // namespace

void Store::wait(const std::vector<std::string>& keys, Millis timeout) {
  // Polling with a growing pause keeps the store protocol stateless (no server-side
  // waiters to clean up when a client dies) at a cost of at most 50 ms latency.
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto pause = Millis(1);
  std::vector<std::string> left = keys;
  for (;;) {
    left = missing(left);
    if (left.empty()) return;
    if (std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, Millis(50));
  }
  throw StoreError(fmt::format("rendezvous store {}: timed out after {} ms waiting for {} of {} key(s): {}",
                               describe(), timeout.count(), left.size(), keys.size(), join(left)));
}

PrefixStore::PrefixStore(std::shared_ptr<Store> base, std::string prefix)
    : base_(std::move(base)), prefix_(std::move(prefix)) {}

void PrefixStore::set(const std::string& key, const Bytes& value) { base_->set(prefix_ + key, value); }

Bytes PrefixStore::get(const std::string& key, Millis timeout) { return base_->get(prefix_ + key, timeout); }

bool PrefixStore::on_close(const std::string& key, const Bytes& value) {
  return base_->on_close(key.empty() ? key : prefix_ + key, value);
}

int64_t PrefixStore::add(const std::string& key, int64_t delta) { return base_->add(prefix_ + key, delta); }

std::vector<std::string> PrefixStore::missing(const std::vector<std::string>& keys) {
  std::vector<std::string> full;
  full.reserve(keys.size());
  for (const auto& k : keys) full.push_back(prefix_ + k);
  auto left = base_->missing(full);
  for (auto& k : left) k = k.substr(prefix_.size());
  return left;
}

bool PrefixStore::remove(const std::string& key) { return base_->remove(prefix_ + key); }

void PrefixStore::wait(const std::vector<std::string>& keys, Millis timeout) {
  std::vector<std::string> full;
  full.reserve(keys.size());
  for (const auto& k : keys) full.push_back(prefix_ + k);
  base_->wait(full, timeout);  // the message shows full keys: they are what is in the store
}

std::string PrefixStore::describe() const { return base_->describe(); }

void set_string(Store& store, const std::string& key, const std::string& value) {
  store.set(key, Bytes(value.begin(), value.end()));
}

std::string get_string(Store& store, const std::string& key, Millis timeout) {
  auto v = store.get(key, timeout);
  return std::string(v.begin(), v.end());
}

std::vector<Bytes> store_all_gather(Store& store, const std::string& name, int rank, int world, const Bytes& value,
                                    Millis timeout) {
  return store_all_gather(store, name, rank, world, value, timeout, StoreGiveUp{});
}

std::vector<Bytes> store_all_gather(Store& store, const std::string& name, int rank, int world, const Bytes& value,
                                    Millis timeout, const StoreGiveUp& give_up, Millis poll) {
  std::vector<std::string> keys;
  for (int r = 0; r < world; ++r) keys.push_back(fmt::format("{}/{}", name, r));
  store.set(keys.at(rank), value);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const auto left = std::chrono::duration_cast<Millis>(deadline - std::chrono::steady_clock::now());
    const Millis slice = give_up ? std::clamp(left, Millis(1), std::max(poll, Millis(1))) : left;
    try {
      store.wait(keys, slice);
      break;
    } catch (const StoreError&) {
      // A slice ran out (or the store failed: missing() then throws that failure again).
      std::vector<std::string> absent;
      for (const auto& k : store.missing(keys)) absent.push_back(k.substr(name.size() + 1));
      if (absent.empty()) continue;  // they came just now
      if (give_up && slice < left) {
        std::vector<int> missing;
        for (const auto& a : absent) missing.push_back(std::stoi(a));
        if (std::optional<std::string> why = give_up(missing))
          throw StoreWaitAbandoned(fmt::format("rendezvous store {}: rank(s) [{}] of {} did not publish '{}': {}",
                                               store.describe(), join(absent), world, name, *why));
        continue;
      }
      throw StoreError(fmt::format("rendezvous store {}: rank(s) [{}] of {} did not publish '{}' within {} ms",
                                   store.describe(), join(absent), world, name, timeout.count()));
    }
  }
  std::vector<Bytes> out;
  out.reserve(world);
  for (const auto& k : keys) out.push_back(store.get(k, timeout));
  return out;
}

std::string token_fingerprint(const std::string& token) {
  // FNV-1a 64: enough to tell two jobs apart in a message without printing the token.
  const uint64_t h = fnv1a(token);
  return fmt::format("{:08x}", static_cast<uint32_t>(h ^ (h >> 32)));
}

std::optional<TcpAddress> parse_tcp_url(const std::string& url) {
  if (url.rfind("tcp://", 0) != 0) return std::nullopt;
  const std::string rest = url.substr(6);
  const auto colon = rest.rfind(':');
  if (colon == std::string::npos) return std::nullopt;
  std::string host = rest.substr(0, colon);
  const std::string port_text = rest.substr(colon + 1);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  const bool digits = !port_text.empty() && port_text.size() <= 5 &&
                      std::all_of(port_text.begin(), port_text.end(), [](char c) { return c >= '0' && c <= '9'; });
  const int port = digits ? std::stoi(port_text) : 0;
  if (host.empty() || port < 1 || port > 65535) return std::nullopt;
  return TcpAddress{host, static_cast<uint16_t>(port)};
}

std::shared_ptr<Store> open_store(const StoreOptions& o) {
  const std::string accepted = "accepted: tcp://HOST:PORT (PORT 1-65535) or file:///ABSOLUTE/PATH";
  if (o.url.rfind("tcp://", 0) == 0) {
    const std::optional<TcpAddress> address = parse_tcp_url(o.url);
    if (!address)
      throw UserError(fmt::format("{}: '{}' is not a valid rendezvous address; {}", o.source, o.url, accepted));
    TcpStoreOptions t{address->host, address->port, o.token, o.timeout};
    if (o.rank == 0 && !o.hosted) return TcpStore::host(t);
    return TcpStore::connect(t);
  }
  if (o.url.rfind("file://", 0) == 0) {
    std::string path = o.url.substr(7);
    if (path.empty() || path.front() != '/')
      throw UserError(fmt::format("{}: '{}' is not a valid rendezvous address (the path must be absolute); {}",
                                  o.source, o.url, accepted));
    return std::make_shared<FileStore>(path, o.token, o.timeout);
  }
  throw UserError(fmt::format("{}: '{}' is not a valid rendezvous address; {}", o.source, o.url, accepted));
}

}  // namespace holmes::comm
