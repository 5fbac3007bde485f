// Rendezvous key-value store: how the ranks of one job find each other before any
// communicator exists. Rank 0 hosts a TCP store (tcp_store.hpp) or all ranks share a
// directory (file_store.hpp); both check a per-job token so that a process of another job
// cannot join by accident. Every wait has a time-out and the error names what is missing.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace holmes::comm {

using Bytes = std::vector<char>;
using Millis = std::chrono::milliseconds;

class Store {
 public:
  virtual ~Store() = default;

  // Stores `value` under `key`, replacing any previous value.
  virtual void set(const std::string& key, const Bytes& value) = 0;
  // Waits up to `timeout` for `key`, then returns its value; StoreError names the key.
  virtual Bytes get(const std::string& key, Millis timeout) = 0;
  // Adds `delta` to the integer counter at `key` (absent counts as 0); returns the new value.
  virtual int64_t add(const std::string& key, int64_t delta) = 0;
  // Returns the keys among `keys` that are not set now (no waiting).
  virtual std::vector<std::string> missing(const std::vector<std::string>& keys) = 0;
  // Removes `key`; returns whether it existed.
  virtual bool remove(const std::string& key) = 0;

  // Waits up to `timeout` until every key is set; StoreError lists the keys still missing.
  virtual void wait(const std::vector<std::string>& keys, Millis timeout);

  // Where this store lives, for messages ("tcp://10.0.0.1:29500", "file:///shared/rdzv").
  virtual std::string describe() const = 0;

  // Asks the store to set `key` to `value` when this member's connection ends without
  // withdrawing the request first (the process died: killed or crashed; its kernel closes the
  // connection). An empty `key` withdraws every such request of this member. A TCP store does
  // it on its server; a file store has no connection to watch and ignores it. Returns whether
  // the store will do it.
  virtual bool on_close(const std::string& /*key*/, const Bytes& /*value*/) { return false; }

  // The job is done with the store (called by every member after a final barrier). A file
  // store removes the keys this member wrote and, with `last` (rank 0, after another
  // barrier), the job's token, so the directory can host the next run, even one with the
  // same token. A TCP store goes away with rank 0 and does nothing.
  virtual void retire(bool /*last*/) {}
};

// A view of another store with every key prefixed, so that many groups (and the start-up
// phases) share one store without clashing. The prefix is usually "pg/<group>/".
class PrefixStore : public Store {
 public:
  PrefixStore(std::shared_ptr<Store> base, std::string prefix);

  void set(const std::string& key, const Bytes& value) override;
  Bytes get(const std::string& key, Millis timeout) override;
  int64_t add(const std::string& key, int64_t delta) override;
  std::vector<std::string> missing(const std::vector<std::string>& keys) override;
  bool remove(const std::string& key) override;
  void wait(const std::vector<std::string>& keys, Millis timeout) override;
  std::string describe() const override;
  bool on_close(const std::string& key, const Bytes& value) override;
  void retire(bool last) override { base_->retire(last); }

 private:
  std::shared_ptr<Store> base_;
  std::string prefix_;
};

// Convenience for text values.
void set_string(Store& store, const std::string& key, const std::string& value);
std::string get_string(Store& store, const std::string& key, Millis timeout);

// Start-up all-gather through the store: rank `rank` of `world` publishes `value` under
// "<name>/<rank>" and waits for everyone's. Returns the values in rank order. On time-out
// the StoreError names the ranks that never published ("ranks [3, 5] did not publish
// 'node_report' within 60000 ms"). Used to all-gather node reports and plan hashes.
std::vector<Bytes> store_all_gather(Store& store, const std::string& name, int rank, int world, const Bytes& value,
                                    Millis timeout);

// Asked, while an all-gather waits, about the ranks (numbered as in the all-gather) that have
// not published yet: why waiting for them is pointless (one of them died or froze, the others
// gave up), or nothing to wait on.
using StoreGiveUp = std::function<std::optional<std::string>(const std::vector<int>& missing)>;

// store_all_gather that asks `give_up` every `poll` while it waits: a reason ends the wait at
// once with StoreWaitAbandoned ("... rank(s) [2] of 3 did not publish 'NAME': <reason>").
// An empty give_up waits as store_all_gather does.
std::vector<Bytes> store_all_gather(Store& store, const std::string& name, int rank, int world, const Bytes& value,
                                    Millis timeout, const StoreGiveUp& give_up, Millis poll = Millis(500));

// How to reach the job's store. `url` is "tcp://HOST:PORT" (rank 0 hosts the server on
// PORT and connects to itself; the others connect to HOST:PORT, retrying until `timeout`)
// or "file:///ABSOLUTE/PATH" (a directory on a file system all ranks share).
struct StoreOptions {
  std::string url;
  int rank = 0;               // global rank of this process
  std::string token;          // per-job secret; a store with another token refuses us
  Millis timeout{60'000};     // connect/wait limit
  std::string source = "cluster.rendezvous";  // where `url` came from, for messages
  bool hosted = false;        // tcp://: another process serves it already; rank 0 connects too
};

// The host and port of a "tcp://HOST:PORT" url (HOST may be a bracketed IPv6 address, PORT
// 1-65535); nullopt for any other or malformed url.
struct TcpAddress {
  std::string host;
  uint16_t port = 0;
};
std::optional<TcpAddress> parse_tcp_url(const std::string& url);

// Opens (and on rank 0 for tcp://, hosts) the store. A malformed url throws
// holmes::UserError naming `source`; failures to reach or join it throw StoreError.
std::shared_ptr<Store> open_store(const StoreOptions& options);

// A short, non-secret fingerprint of a token for messages (8 hex digits).
std::string token_fingerprint(const std::string& token);

}  // namespace holmes::comm
