# Runs bench/hop-report on TRACE (with ARGS, space-separated, when given) and compares its
# output with EXPECTED; SKIPPED is the message its malformed lines must produce on stderr.
separate_arguments(args UNIX_COMMAND "${ARGS}")
execute_process(COMMAND ${PYTHON} ${SCRIPT} ${TRACE} ${args} OUTPUT_VARIABLE actual
                ERROR_VARIABLE errors RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "hop-report exited with ${rc}: ${errors}")
endif()
file(READ ${EXPECTED} expected)
if(NOT actual STREQUAL expected)
  message(FATAL_ERROR "hop-report printed:\n${actual}\nexpected:\n${expected}")
endif()
# The sample's malformed lines are skipped, and said so, without changing the table.
string(FIND "${errors}" "${SKIPPED}" found)
if(found EQUAL -1)
  message(FATAL_ERROR "hop-report did not report the malformed lines (${SKIPPED}): ${errors}")
endif()
