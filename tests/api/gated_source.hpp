#pragma once

// A gated sequence source for typed jobs run on the local_cluster: the crash a test causes
// lands mid-run, after the checkpoints it waited for.
#include <atomic>
#include <chrono>
#include <memory>

#include "engine/cluster/local_cluster.hpp"
#include "engine/runtime/operator_factory.hpp"
#include "engine/runtime/source_operators.hpp"
#include "graph/operator_registry.hpp"
#include "tests/engine/runtime/runtime_test_support.hpp"

namespace snapflow::api_test {

// A sequence_source that stops after `hold_after` records per subtask until the test opens the
// gate, so the crash lands mid-run, after the checkpoints the test waited for. A custom kind,
// added to a registry and a factory the way a custom worker adds its own.
class gated_source final : public source_operator {
 public:
  gated_source(std::unique_ptr<stream_operator> inner, std::shared_ptr<std::atomic<bool>> open,
               std::int64_t hold_after)
      : inner_(std::move(inner)),
        source_(dynamic_cast<source_operator*>(inner_.get())),
        open_(std::move(open)),
        hold_after_(hold_after) {}

  result<void> open(const operator_context& context,
                    const std::vector<restored_operator_state>& restored) override {
    return inner_->open(context, restored);
  }
  result<emit_result> emit(record_output& out, std::size_t max_records) override {
    std::size_t budget = max_records;
    if (!open_->load()) {
      if (emitted_ >= hold_after_)
        return emit_result{emit_result::status::wait,
                           std::chrono::steady_clock::now() + std::chrono::milliseconds(1)};
      budget = std::min<std::size_t>(budget, static_cast<std::size_t>(hold_after_ - emitted_));
    }
    counting c(out);
    auto r = source_->emit(c, budget);
    emitted_ += c.n;
    return r;
  }
  result<operator_snapshot> snapshot(checkpoint_id id) override { return inner_->snapshot(id); }

 private:
  struct counting : record_output {
    explicit counting(record_output& o) : out(o) {}
    void emit(record r) override {
      ++n;
      out.emit(std::move(r));
    }
    record_output& out;
    std::int64_t n = 0;
  };

  std::unique_ptr<stream_operator> inner_;
  source_operator* source_;
  std::shared_ptr<std::atomic<bool>> open_;
  std::int64_t hold_after_;
  std::int64_t emitted_ = 0;
};

struct gated_kinds {
  operator_registry registry = operator_registry::builtin();
  std::shared_ptr<operator_factory> factory =
      std::make_shared<operator_factory>(operator_factory::builtin());
  std::shared_ptr<std::atomic<bool>> open = std::make_shared<std::atomic<bool>>(false);

  explicit gated_kinds(std::int64_t hold_after) {
    operator_kind kind = *registry.find("sequence_source");
    kind.name = "gated_source";
    registry.add(kind);
    factory->add("gated_source", [open = open, hold_after](const job_vertex& v)
                                     -> result<std::unique_ptr<stream_operator>> {
      job_vertex inner = v;
      inner.kind = "sequence_source";
      auto made = operator_factory::builtin().create(inner);
      if (!made) return made.err();
      return std::unique_ptr<stream_operator>(
          std::make_unique<gated_source>(std::move(made).value(), open, hold_after));
    });
  }

  local_cluster_options options(const testing::temp_folder& dir) const {
    local_cluster_options o;
    o.state_dir = dir.path() / "state";
    o.registry = &registry;
    o.operators = factory;
    return o;
  }
};

}  // namespace snapflow::api_test
