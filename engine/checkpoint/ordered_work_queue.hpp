#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <mutex>

#include <asio/any_io_executor.hpp>

namespace snapflow {

// Runs the work posted to it one item at a time, in the order posted, on an executor (the
// coordinator's I/O pool), however many threads that executor has.
//
// Why not an asio::strand: a strand belongs to its execution context's services, and its last
// copy must go before the context does. The checkpoint coordinator can outlive its I/O pool at
// process shutdown (the pool is joined first), so a strand member would be destroyed after its
// service (a use after free under ASan). This queue owns its state instead. Items may hold
// their owner (the coordinator): if the executor is destroyed before a posted drain ran, the
// drain's destructor drops the waiting items, so no item keeps its owner alive for ever.
class ordered_work_queue {
 public:
  explicit ordered_work_queue(asio::any_io_executor executor);

  void post(std::function<void()> work);

 private:
  struct state {
    std::mutex mutex;
    std::deque<std::function<void()>> items;
    bool draining = false;  // a drain is posted or running: it will take new items too
  };
  static void drain(const std::shared_ptr<state>& s);
  // The handler posted to the executor: runs drain(), or drops the items if never run.
  class drainer;

  asio::any_io_executor executor_;
  std::shared_ptr<state> state_ = std::make_shared<state>();
};

}  // namespace snapflow
