execute_process(COMMAND ${PYTHON} ${SCRIPT} ${TRACE} OUTPUT_VARIABLE actual ERROR_VARIABLE errors
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "hop-report exited with ${rc}: ${errors}")
endif()
file(READ ${EXPECTED} expected)
if(NOT actual STREQUAL expected)
  message(FATAL_ERROR "hop-report printed:\n${actual}\nexpected:\n${expected}")
endif()
# The sample's two malformed lines are skipped, and said so, without changing the table.
string(FIND "${errors}" "skipped 2 line(s)" found)
if(found EQUAL -1)
  message(FATAL_ERROR "hop-report did not report the malformed lines: ${errors}")
endif()
