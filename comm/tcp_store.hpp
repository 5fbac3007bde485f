// TCP rendezvous store. Rank 0 hosts the server in a background thread; every rank
// (rank 0 included) talks to it through a TcpStore client. The first message on a
// connection carries the per-job token: a client with another token (a stray or stale
// process of another job on the same port) is refused with a clear StoreError.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "comm/socket.hpp"
#include "comm/store.hpp"

namespace holmes::comm {

struct TcpStoreOptions {
  std::string host;       // where the server is (ignored by host(): it connects to 127.0.0.1)
  uint16_t port = 0;      // 0 in host(): pick a free port (tests); see TcpStore::port()
  std::string token;      // per-job token
  Millis timeout{60'000}; // connect retries and each request end by this
};

// The server: a key-value map served by one thread polling all connections.
class TcpStoreServer {
 public:
  TcpStoreServer(uint16_t port, std::string token);
  ~TcpStoreServer();
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;

  uint16_t port() const { return port_; }
  // Client connections open now (the hosting rank's own included).
  int clients() const { return clients_.load(); }

 private:
  void run();

  std::string token_;
  net::Fd listen_;
  net::Fd wake_read_, wake_write_;  // a pipe that ends the poll loop on destruction
  uint16_t port_ = 0;
  std::atomic<int> clients_{0};
  std::thread thread_;
};

class TcpStore : public Store {
 public:
  // Starts a server on options.port and connects to it (rank 0).
  static std::shared_ptr<TcpStore> host(const TcpStoreOptions& options);
  // Connects to options.host:port, retrying until options.timeout (the server may not be
  // up yet). Throws StoreError when it cannot connect or the token is refused.
  static std::shared_ptr<TcpStore> connect(const TcpStoreOptions& options);

  void set(const std::string& key, const Bytes& value) override;
  Bytes get(const std::string& key, Millis timeout) override;
  int64_t add(const std::string& key, int64_t delta) override;
  std::vector<std::string> missing(const std::vector<std::string>& keys) override;
  bool remove(const std::string& key) override;
  std::string describe() const override;
  bool on_close(const std::string& key, const Bytes& value) override;

  uint16_t port() const { return options_.port; }
  // On the hosting rank: the client connections open now, its own included (a process that
  // exited has closed its own). -1 on the others.
  int connected_clients() const { return server_ ? server_->clients() : -1; }

 private:
  explicit TcpStore(TcpStoreOptions options) : options_(std::move(options)) {}
  void open();
  Bytes request(const Bytes& payload, const char* what);

  TcpStoreOptions options_;
  std::unique_ptr<TcpStoreServer> server_;  // set on the hosting rank only
  std::mutex mutex_;                        // one request at a time on the connection
  net::Fd fd_;
};

}  // namespace holmes::comm
