# ctest driver (cmake -P): install snapflow into a fresh prefix, build the out-of-tree worker
# project against it, and run a job with that worker under the installed `snapflow local`
# (a real coordinator and two of the user's workers). Every step is bounded; snapflow local
# reaps its child processes itself, also when its own --timeout cancels the job.
#
# Inputs: SNAPFLOW_BUILD_DIR, PROJECT_DIR, WORK_DIR, CXX, LAUNCHER, EXTRA_CXX_FLAGS.
foreach(var SNAPFLOW_BUILD_DIR PROJECT_DIR WORK_DIR CXX)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "run_out_of_tree_worker.cmake: ${var} is not set")
  endif()
endforeach()

file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
set(prefix "${WORK_DIR}/prefix")

function(step name)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err
                  TIMEOUT 600)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${name} failed (${rc}):\n${out}\n${err}")
  endif()
  message(STATUS "${name}: ok")
endfunction()

step("install" ${CMAKE_COMMAND} --install "${SNAPFLOW_BUILD_DIR}" --prefix "${prefix}")
set(configure_args -S "${PROJECT_DIR}" -B "${WORK_DIR}/build" -G Ninja
    -DCMAKE_BUILD_TYPE=Debug "-DCMAKE_PREFIX_PATH=${prefix}" "-DCMAKE_CXX_COMPILER=${CXX}")
if(LAUNCHER)
  list(APPEND configure_args "-DCMAKE_CXX_COMPILER_LAUNCHER=${LAUNCHER}")
endif()
if(EXTRA_CXX_FLAGS)
  list(APPEND configure_args "-DCMAKE_CXX_FLAGS=${EXTRA_CXX_FLAGS}"
       "-DCMAKE_EXE_LINKER_FLAGS=${EXTRA_CXX_FLAGS}")
endif()
step("configure against the installed package" ${CMAKE_COMMAND} ${configure_args})
step("build my_worker" ${CMAKE_COMMAND} --build "${WORK_DIR}/build" -j 2)

# The example pipeline with the user's operator between the sums and the sink.
set(count 50000)
file(WRITE "${WORK_DIR}/job.toml" "[job]
name = \"out-of-tree\"
parallelism = 2

[checkpointing]
interval_ms = 50

[[operator]]
uid = \"source\"
kind = \"sequence_source\"
params = { count = ${count}, keys = 4 }

[[operator]]
uid = \"sum\"
kind = \"keyed_sum\"
input = \"source\"
partition = \"hash\"

# Only my_worker knows times_ten: the coordinator takes it on the role declared here.
[[operator]]
uid = \"x10\"
kind = \"times_ten\"
role = \"transform\"
input = \"sum\"

[[operator]]
uid = \"sink\"
kind = \"two_phase_commit_file_sink\"
input = \"x10\"
params = { path = \"${WORK_DIR}/out\" }
")
execute_process(
  COMMAND "${prefix}/bin/snapflow" local --worker "${WORK_DIR}/build/my_worker"
          --job "${WORK_DIR}/job.toml" --workers 2 --slots 2 --state-dir "${WORK_DIR}/state"
          --timeout 120 --log-level info
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 240)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the job on my_worker did not finish (${rc}):\n${out}\n${err}")
endif()
foreach(expected "FINISHED" "records: ${count} from the sources")
  string(FIND "${out}" "${expected}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "'${expected}' missing from snapflow local's output:\n${out}\n${err}")
  endif()
endforeach()
string(FIND "${err}" "my_worker: registered operator kinds: times_ten" at)
if(at EQUAL -1)
  message(FATAL_ERROR "the workers were not my_worker:\n${err}")
endif()
message(STATUS "job on my_worker: ok")
file(REMOVE_RECURSE "${WORK_DIR}")
