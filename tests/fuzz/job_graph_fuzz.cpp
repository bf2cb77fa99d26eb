// decode_job_graph and decode_checkpoint_config (graph/job_graph_codec.hpp): a job submission
// from the network. Neither may crash, throw or over-allocate; what they accept must survive
// encode and decode unchanged.
#include "graph/job_graph_codec.hpp"
#include "tests/fuzz/fuzz_target.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace snapflow;
  const std::string_view bytes = fuzz::as_text(data, size);
  if (auto graph = decode_job_graph(bytes)) {
    auto again = decode_job_graph(encode_job_graph(*graph));
    fuzz::check(again.ok(), "the encoding of a decoded job graph does not decode");
    fuzz::check(*again == *graph, "encode and decode changed a job graph");
  }
  if (auto config = decode_checkpoint_config(bytes)) {
    auto again = decode_checkpoint_config(encode_checkpoint_config(*config));
    fuzz::check(again.ok(), "the encoding of a decoded checkpoint config does not decode");
    fuzz::check(*again == *config, "encode and decode changed a checkpoint config");
  }
  return 0;
}
