#include "engine/runtime/sink_operators.hpp"

#include <cstdio>
#include <mutex>

#include "engine/runtime/operator_factory.hpp"

namespace snapflow {

std::string format_record_line(const record& r) {
  std::string line = std::to_string(r.key);
  line.push_back(',');
  line.append(std::to_string(r.seq));
  line.push_back(',');
  line.append(std::to_string(r.value));
  if (!r.payload.empty()) {
    line.push_back(',');
    line.append(r.payload);
  }
  line.push_back('\n');
  return line;
}

result<void> print_sink::process(const record& r, record_output&) {
  static std::mutex stdout_mutex;
  const std::string line = format_record_line(r);
  std::lock_guard lock(stdout_mutex);
  std::fwrite(line.data(), 1, line.size(), stdout);
  return success();
}

result<void> file_sink::open(const operator_context& context,
                             const std::vector<restored_operator_state>&) {
  auto folder = string_param(*context.vertex, "path");
  if (!folder) return folder.err();
  std::error_code ec;
  std::filesystem::create_directories(*folder, ec);
  if (ec) return error{"file_sink: create " + *folder + ": " + ec.message()};
  const auto file = std::filesystem::path(*folder) / ("part-" + file_safe_uid(context.vertex->uid) +
                                                      "-" + std::to_string(context.subtask_index));
  return file_.open(file, /*append=*/true);
}

result<void> file_sink::process(const record& r, record_output&) {
  return file_.append(format_record_line(r));
}

result<operator_snapshot> file_sink::snapshot(checkpoint_id) {
  if (auto r = file_.flush(); !r) return r.err();
  operator_snapshot s;
  s.async_part = [path = file_.path()] { return fsync_file(path); };
  return s;
}

result<void> file_sink::end_input(record_output&) {
  if (auto r = file_.sync(); !r) return r;
  return file_.close();
}

}  // namespace snapflow
