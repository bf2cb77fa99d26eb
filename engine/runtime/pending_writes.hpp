#pragma once

#include <condition_variable>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>

namespace snapflow {

// The snapshot writes one task has handed to the shared snapshot_writer and that have not ended
// yet. A task reports FINISHED only once they have: the coordinator must see a checkpoint's ack
// before the subtask's end, or it would abort, as closing, a checkpoint the subtask did take.
// (snapshot_writer::drain() waits for every task's writes, which a busy process may never let
// happen.)
class pending_writes : public std::enable_shared_from_this<pending_writes> {
 public:
  // `write` wrapped so that its end (run, or destroyed unrun) is counted here.
  std::function<void()> track(std::function<void()> write) {
    {
      std::lock_guard lock(mutex_);
      ++count_;
    }
    return [token = std::make_shared<token_t>(shared_from_this()),
            write = std::move(write)]() mutable { write(); };
  }

  // Blocks until every tracked write has ended.
  void wait() {
    std::unique_lock lock(mutex_);
    ended_.wait(lock, [&] { return count_ == 0; });
  }

  std::size_t count() const {
    std::lock_guard lock(mutex_);
    return count_;
  }

 private:
  struct token_t {
    explicit token_t(std::shared_ptr<pending_writes> owner) : owner(std::move(owner)) {}
    ~token_t() { owner->ended(); }
    std::shared_ptr<pending_writes> owner;
  };

  void ended() {
    std::lock_guard lock(mutex_);
    if (--count_ == 0) ended_.notify_all();
  }

  mutable std::mutex mutex_;
  std::condition_variable ended_;
  std::size_t count_ = 0;
};

}  // namespace snapflow
