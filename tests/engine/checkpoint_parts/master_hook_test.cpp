#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <vector>

#include "engine/checkpoint/master_hook.hpp"

using namespace snapflow;

namespace {

// Records what it was asked to restore; snapshots its name.
class fake_hook final : public master_hook {
 public:
  explicit fake_hook(std::string name, bool fail_restore = false)
      : name_(std::move(name)), fail_restore_(fail_restore) {}

  std::string name() const override { return name_; }
  void snapshot(checkpoint_id id, std::int64_t,
                std::function<void(result<std::string>)> done) override {
    done(name_ + "@" + std::to_string(id));
  }
  result<void> restore(checkpoint_id id, std::string_view state) override {
    restored.emplace_back(id, std::string(state));
    if (fail_restore_) return error{"bad state"};
    return success();
  }

  std::vector<std::pair<checkpoint_id, std::string>> restored;

 private:
  std::string name_;
  bool fail_restore_;
};

}  // namespace

TEST_CASE("master hook registry refuses blank and duplicate names") {
  master_hook_registry registry;
  auto blank = registry.add(std::make_shared<fake_hook>(""));
  REQUIRE_FALSE(blank.ok());
  CHECK_THAT(blank.err().message, Catch::Contains("blank"));
  CHECK_FALSE(registry.add(std::make_shared<fake_hook>("  \t")).ok());

  REQUIRE(registry.add(std::make_shared<fake_hook>("offsets")).ok());
  auto duplicate = registry.add(std::make_shared<fake_hook>("offsets"));
  REQUIRE_FALSE(duplicate.ok());
  CHECK_THAT(duplicate.err().message, Catch::Contains("offsets"));
  CHECK(registry.size() == 1);
  REQUIRE(registry.find("offsets") != nullptr);
  CHECK(registry.find("offsets")->name() == "offsets");
  CHECK(registry.find("other") == nullptr);

  std::string snapshot;
  registry.find("offsets")->snapshot(3, 0, [&](result<std::string> r) { snapshot = *r; });
  CHECK(snapshot == "offsets@3");
}

TEST_CASE("master hook registry restores each hook with its own state") {
  master_hook_registry registry;
  auto a = std::make_shared<fake_hook>("a");
  auto b = std::make_shared<fake_hook>("b");
  auto c = std::make_shared<fake_hook>("c");
  for (const auto& h : {a, b, c}) REQUIRE(registry.add(h).ok());
  CHECK(registry.hooks().size() == 3);

  REQUIRE(registry.restore(9, {{"a", "state-a"}, {"c", "state-c"}}).ok());
  CHECK(a->restored == std::vector<std::pair<checkpoint_id, std::string>>{{9, "state-a"}});
  CHECK(b->restored.empty());
  CHECK(c->restored == std::vector<std::pair<checkpoint_id, std::string>>{{9, "state-c"}});
}

TEST_CASE("master hook registry refuses state for an unknown hook unless allowed") {
  master_hook_registry registry;
  auto a = std::make_shared<fake_hook>("a");
  REQUIRE(registry.add(a).ok());
  const std::map<std::string, std::string> states = {{"a", "x"}, {"gone", "y"}};
  auto refused = registry.restore(4, states);
  REQUIRE_FALSE(refused.ok());
  CHECK_THAT(refused.err().message, Catch::Contains("gone"));
  CHECK(a->restored.empty());  // checked before anything is restored

  REQUIRE(registry.restore(4, states, true).ok());
  CHECK(a->restored.size() == 1);
}

TEST_CASE("master hook registry reports the hook that fails to restore") {
  master_hook_registry registry;
  REQUIRE(registry.add(std::make_shared<fake_hook>("broken", true)).ok());
  auto r = registry.restore(2, {{"broken", "x"}});
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.err().message, Catch::Contains("broken"));
  CHECK_THAT(r.err().message, Catch::Contains("bad state"));
}
