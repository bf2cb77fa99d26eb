// Running totals per shop, exactly once: a typed job over a struct of our own, keyed state in
// a keyed process function, committed by the two-phase-commit file sink. The same binary submits
// the job (`running_totals submit`) and runs its workers (`running_totals worker`).
#include <cstdint>
#include <string>

#include "cmd/program.hpp"
#include "engine/api/typed_api.hpp"

namespace api = snapflow::api;

namespace {

// What the source produces: sale number `seq` of shop `shop`, worth `amount`.
struct sale {
  std::int64_t shop = 0;
  std::int64_t seq = 0;
  std::int64_t amount = 0;
  MSGPACK_DEFINE_MAP(shop, seq, amount);
};

// A shop's total after one of its sales.
struct shop_total {
  std::int64_t shop = 0;
  std::int64_t seq = 0;
  std::int64_t total = 0;
  MSGPACK_DEFINE_MAP(shop, seq, total);
};

// --arg count=N (sales), shops=N, rate=N (sales per second per source, 0: as fast as it goes),
// out=FOLDER (under the workers' --data-root), interval_ms=N (checkpoint interval).
void build(api::typed_environment& typed, const snapflow::program_args& args) {
  const std::int64_t count = args.get_int("count", 100'000);
  const std::int64_t shops = args.get_int("shops", 16);
  snapflow::stream_environment& env = typed.env();
  env.set_job_name("running-totals");
  env.set_parallelism(2);
  env.enable_checkpointing(std::chrono::milliseconds(args.get_int("interval_ms", 50)));

  auto sequence = env.add_source("sequence_source",
                                 {{"count", std::to_string(count)},
                                  {"rate", std::to_string(args.get_int("rate", 0))}});
  sequence.uid("sales-source");
  typed
      .from_sequence(sequence,
                     [shops](std::int64_t n) { return sale{n % shops, n, n}; }, "sales")
      .uid("sales")
      .key_by([](const sale& s) { return s.shop; })
      .process<shop_total>(
          [](const sale& s, api::keyed_process_context<std::int64_t>& ctx,
             api::collector<shop_total>& out) {
            auto total = ctx.get_state<std::int64_t>("total");
            const std::int64_t now = total.value().value_or(0) + s.amount;
            total.update(now);
            out.collect(shop_total{s.shop, s.seq, now});
          },
          "totals")
      .uid("totals")
      // The sink writes `key,seq,value` lines: the shop, the sale and the shop's total.
      .to_records([](const shop_total& t) {
        return snapflow::record{static_cast<std::uint64_t>(t.shop), t.seq, t.total, {}};
      })
      .uid("to-records")
      .add_sink("two_phase_commit_file_sink", {{"path", args.get("out", "out/running-totals")}})
      .uid("sink");
}

}  // namespace

int main(int argc, char** argv) {
  return snapflow::run_program(argc, argv, {"running-totals 1.0", "running totals per shop"},
                               build);
}
