#include "engine/runtime/sink_operators.hpp"

#include <charconv>
#include <cstdio>
#include <mutex>

#include "engine/runtime/operator_factory.hpp"
#include "engine/runtime/transform_operators.hpp"

namespace snapflow {

void append_record_line(std::string& out, const record& r) {
  // to_chars through a stack buffer: no temporary string per field (this runs per record).
  const auto put = [&out](auto v) {
    char buf[24];  // an int64 or uint64 takes at most 20
    const auto done = std::to_chars(buf, buf + sizeof buf, v);
    out.append(buf, done.ptr);
  };
  put(r.key);
  out.push_back(',');
  put(r.seq);
  out.push_back(',');
  put(r.value);
  if (!r.payload.empty()) {
    out.push_back(',');
    out.append(r.payload);
  }
  out.push_back('\n');
}

std::string format_record_line(const record& r) {
  std::string line;
  append_record_line(line, r);
  return line;
}

result<void> print_sink::process(const record& r, record_output&) {
  static std::mutex stdout_mutex;
  const std::string line = format_record_line(r);
  std::lock_guard lock(stdout_mutex);
  std::fwrite(line.data(), 1, line.size(), stdout);
  return success();
}

result<std::unique_ptr<stream_operator>> discard_sink::create(const job_vertex& vertex) {
  auto delay = delay_us_per_record_param(vertex);
  if (!delay) return delay.err();
  return std::unique_ptr<stream_operator>(new discard_sink(*delay));
}

result<void> discard_sink::process(const record&, record_output&) {
  delay_record(delay_us_);
  return success();
}

result<void> file_sink::open(const operator_context& context,
                             const std::vector<restored_operator_state>&) {
  auto folder = string_param(*context.vertex, "path");
  if (!folder) return folder.err();
  auto delay = delay_us_per_record_param(*context.vertex);
  if (!delay) return delay.err();
  delay_us_ = *delay;
  std::error_code ec;
  std::filesystem::create_directories(*folder, ec);
  if (ec) return error{"file_sink: create " + *folder + ": " + ec.message()};
  // The job's id in the name: another job writing into the same folder (the same job file run
  // again) gets files of its own, and a restart of this job appends to its own.
  const auto file =
      std::filesystem::path(*folder) / ("part-" + file_safe_job(context.job) + "-" +
                                        file_safe_uid(context.vertex->uid) + "-" +
                                        std::to_string(context.subtask_index));
  return file_.open(file, /*append=*/true);
}

result<void> file_sink::process(const record& r, record_output&) {
  delay_record(delay_us_);
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
