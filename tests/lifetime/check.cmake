# Runs one lifetime case: without DIMSUM_SHOULD_WARN the file compiles with
# -Wall -Wextra -Werror (no false alarm); with it the compile fails under
# -Werror=dangling and the output matches every `// EXPECT: <regex>` line.
# Inputs: -DCOMPILER= -DSOURCE= -DINCLUDE=
separate_arguments(flags UNIX_COMMAND "-std=c++20 -fsyntax-only -Wall -Wextra -Werror -Werror=dangling -I${INCLUDE}")

execute_process(COMMAND ${COMPILER} ${flags} ${SOURCE}
                RESULT_VARIABLE ok_result OUTPUT_VARIABLE ok_out ERROR_VARIABLE ok_err)
if(NOT ok_result EQUAL 0)
  message(FATAL_ERROR "the case does not compile cleanly without DIMSUM_SHOULD_WARN:\n${ok_out}${ok_err}")
endif()

execute_process(COMMAND ${COMPILER} ${flags} -DDIMSUM_SHOULD_WARN ${SOURCE}
                RESULT_VARIABLE ko_result OUTPUT_VARIABLE ko_out ERROR_VARIABLE ko_err)
set(output "${ko_out}${ko_err}")
if(ko_result EQUAL 0)
  message(FATAL_ERROR "the case compiled with DIMSUM_SHOULD_WARN and -Werror=dangling; it must not")
endif()
file(STRINGS ${SOURCE} expects REGEX "^// EXPECT: ")
if(NOT expects)
  message(FATAL_ERROR "the case has no // EXPECT: line")
endif()
foreach(line IN LISTS expects)
  string(REGEX REPLACE "^// EXPECT: " "" regex "${line}")
  if(NOT output MATCHES "${regex}")
    message(FATAL_ERROR "the diagnostic does not match '${regex}':\n${output}")
  endif()
endforeach()
message("${output}")
