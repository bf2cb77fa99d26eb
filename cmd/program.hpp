#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "common/result.hpp"
#include "engine/api/typed_environment.hpp"
#include "graph/job_graph.hpp"

// A user program: one binary that is both the client that submits a job and the worker that
// runs it (Flink's job jar). Its callables never travel; the coordinator deploys its job only to
// workers started from the same program, which they recognise by the program's fingerprint
// (docs/api.md, "Running a program on a cluster").
//
//   int main(int argc, char** argv) {
//     return snapflow::run_program(argc, argv, {"word-count 1.0"},
//                                  [](snapflow::api::typed_environment& typed,
//                                     const snapflow::program_args& args) { ... });
//   }
//
//   ./word_count submit --coordinator HOST:8081       submits the job, prints its id
//   ./word_count worker --coordinator tcp://HOST:6123  a worker that runs it (worker flags)
//   ./word_count fingerprint | job-file                what it would submit
//
// Link snapflow::program (find_package(snapflow)).

namespace snapflow {

// What the program calls itself: its id and version, part of the fingerprint (a new version
// never runs on workers of an old one).
struct program_info {
  std::string name = "snapflow-program";
  std::string description;  // the first line of --help; a default when blank
};

// The program's own settings, `--arg KEY=VALUE` on the command line of every subcommand. Give
// the worker the same ones as the submission: the fingerprint covers the graph they shape.
class program_args {
 public:
  program_args() = default;
  explicit program_args(std::map<std::string, std::string> values) : values_(std::move(values)) {}

  std::string get(const std::string& key, const std::string& fallback = {}) const;
  // Throws std::invalid_argument naming the key when the value is not an integer.
  std::int64_t get_int(const std::string& key, std::int64_t fallback) const;
  bool contains(const std::string& key) const { return values_.contains(key); }
  const std::map<std::string, std::string>& values() const { return values_; }

 private:
  std::map<std::string, std::string> values_;
};

// Declares the job on `typed` (and through typed.env(): parallelism, checkpointing, name).
// Called once per process, the same way in the submitting client and in every worker.
using job_builder = std::function<void(api::typed_environment& typed, const program_args& args)>;

// The job build_job declares, validated, with its program (name and fingerprint) set.
result<job_graph> build_program_job(const job_builder& build_job, const program_info& info,
                                    const program_args& args);

// The whole program: dispatches on the first argument (submit, worker, fingerprint, job-file,
// --help). Returns the process exit code: 0 on success, 2 for bad options, 1 when the
// coordinator refuses the job or cannot be reached (the reason on stderr); the worker's codes
// are worker_main's.
int run_program(int argc, char** argv, program_info info, job_builder build_job);
// The same for a job that reads no --arg.
int run_program(int argc, char** argv, program_info info,
                std::function<void(api::typed_environment& typed)> build_job);

}  // namespace snapflow
