# ctest driver (cmake -P): install snapflow into a fresh prefix, build the user program example
# (examples/user-program) against it, and run it under the installed `snapflow local --program`
# (a coordinator and two workers started as `running_totals worker`, the job submitted with
# `running_totals submit`). The build stays in WORK_DIR/build for user_program_tests.
#
# Inputs: SNAPFLOW_BUILD_DIR, PROJECT_DIR, WORK_DIR, CXX, LAUNCHER, EXTRA_CXX_FLAGS.
foreach(var SNAPFLOW_BUILD_DIR PROJECT_DIR WORK_DIR CXX)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "run_user_program.cmake: ${var} is not set")
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
step("build running_totals" ${CMAKE_COMMAND} --build "${WORK_DIR}/build" -j 2)
set(program "${WORK_DIR}/build/running_totals")

# What it submits: a job file naming the program and its fingerprint.
execute_process(COMMAND "${program}" job-file --arg count=5000
                RESULT_VARIABLE rc OUTPUT_VARIABLE job_file ERROR_VARIABLE err TIMEOUT 60)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "running_totals job-file failed (${rc}):\n${job_file}\n${err}")
endif()
foreach(expected "program_fingerprint" "user_process" "two_phase_commit_file_sink")
  string(FIND "${job_file}" "${expected}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "'${expected}' missing from the job file:\n${job_file}")
  endif()
endforeach()

# snapflow local --program: the workers are the program, the job comes from its submit.
set(count 20000)
execute_process(
  COMMAND "${prefix}/bin/snapflow" local --program "${program}" --arg count=${count}
          --arg out=out/local --workers 2 --slots 2 --state-dir "${WORK_DIR}/state"
          --timeout 120 --log-level info
  WORKING_DIRECTORY "${WORK_DIR}"
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 240)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the program's job did not finish (${rc}):\n${out}\n${err}")
endif()
foreach(expected "FINISHED" "from program ${program}" "records: ${count} from the sources")
  string(FIND "${out}" "${expected}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "'${expected}' missing from snapflow local's output:\n${out}\n${err}")
  endif()
endforeach()
string(FIND "${err}" "program running-totals 1.0" at)
if(at EQUAL -1)
  message(FATAL_ERROR "the workers did not register the program:\n${err}")
endif()
file(GLOB committed "${WORK_DIR}/out/local/*")
set(lines 0)
foreach(f IN LISTS committed)
  get_filename_component(name "${f}" NAME)
  if(NOT name MATCHES "^\\.")
    file(STRINGS "${f}" content)
    list(LENGTH content n)
    math(EXPR lines "${lines} + ${n}")
  endif()
endforeach()
if(NOT lines EQUAL count)
  message(FATAL_ERROR "the sink committed ${lines} lines, not ${count}")
endif()
message(STATUS "running_totals under snapflow local: ok")
