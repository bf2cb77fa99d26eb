#include "engine/checkpoint/ordered_work_queue.hpp"

#include <utility>

#include <asio/post.hpp>

namespace snapflow {

class ordered_work_queue::drainer {
 public:
  explicit drainer(std::shared_ptr<state> s) : state_(std::move(s)) {}
  drainer(drainer&& other) noexcept = default;
  drainer& operator=(drainer&&) = delete;
  drainer(const drainer&) = delete;
  drainer& operator=(const drainer&) = delete;

  ~drainer() {
    if (!state_) return;  // moved from, or ran
    // Never run (the executor was destroyed with it queued): drop the items, outside the lock,
    // since dropping one may destroy the queue's owner.
    std::deque<std::function<void()>> dropped;
    {
      std::lock_guard lock(state_->mutex);
      dropped.swap(state_->items);
      state_->draining = false;
    }
  }

  void operator()() {
    const std::shared_ptr<state> s = std::move(state_);
    drain(s);
  }

 private:
  std::shared_ptr<state> state_;
};

ordered_work_queue::ordered_work_queue(asio::any_io_executor executor)
    : executor_(std::move(executor)) {}

void ordered_work_queue::post(std::function<void()> work) {
  {
    std::lock_guard lock(state_->mutex);
    state_->items.push_back(std::move(work));
    if (std::exchange(state_->draining, true)) return;  // the running drain takes it
  }
  asio::post(executor_, drainer(state_));
}

void ordered_work_queue::drain(const std::shared_ptr<state>& s) {
  for (;;) {
    std::function<void()> work;
    {
      std::lock_guard lock(s->mutex);
      if (s->items.empty()) {
        s->draining = false;
        return;
      }
      work = std::move(s->items.front());
      s->items.pop_front();
    }
    work();
  }
}

}  // namespace snapflow
