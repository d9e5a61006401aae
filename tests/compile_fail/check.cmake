# Runs one compile-fail case (STYLE.md's ok/ko pattern):
#   1. without DIMSUM_SHOULD_FAIL the file must compile;
#   2. with it the compile must fail and the output must match every
#      `// EXPECT: <regex>` line of the file (and, for the compiler in use,
#      every `// EXPECT-GCC:` or `// EXPECT-CLANG:` line);
#   3. the output must hold exactly one `error:` line (one mistake, one error).
# Inputs: -DCOMPILER= -DSOURCE= -DINCLUDE= -DKIND=GCC|CLANG [-DREPORT=file] [-DCHECK_OK=OFF] [-DLARGE_HEAP=ON]
#         [-DPCH=precompiled header -DPCH_HEADER=the header it was built from]
separate_arguments(flags UNIX_COMMAND "-std=c++20 -fsyntax-only -Wall -Wextra -Werror -I${INCLUDE}")
# g++ collecting garbage only above 1 GiB (CMakeLists.txt: DIMSUM_GCC_LARGE_HEAP).
if(KIND STREQUAL "GCC" AND LARGE_HEAP)
  list(APPEND flags --param=ggc-min-expand=100 --param=ggc-min-heapsize=1048576)
endif()

# The precompiled pch.hpp (CMakeLists.txt), when it was built: g++ finds the
# .gch beside PCH_HEADER (-Winvalid-pch makes a stale one an error rather
# than a silent slow parse); clang reads it with -include-pch.
if(PCH AND EXISTS "${PCH}")
  if(KIND STREQUAL "CLANG")
    list(APPEND flags -include-pch ${PCH})
  else()
    list(APPEND flags -Winvalid-pch -include ${PCH_HEADER})
  endif()
endif()

# CHECK_OK=OFF skips step 1 (scripts/test's clang stage: the gcc stage ran it).
if(NOT DEFINED CHECK_OK OR CHECK_OK)
  execute_process(COMMAND ${COMPILER} ${flags} ${SOURCE}
                  RESULT_VARIABLE ok_result OUTPUT_VARIABLE ok_out ERROR_VARIABLE ok_err)
  if(NOT ok_result EQUAL 0)
    message(FATAL_ERROR "the case does not compile without DIMSUM_SHOULD_FAIL:\n${ok_out}${ok_err}")
  endif()
endif()

execute_process(COMMAND ${COMPILER} ${flags} -DDIMSUM_SHOULD_FAIL ${SOURCE}
                RESULT_VARIABLE ko_result OUTPUT_VARIABLE ko_out ERROR_VARIABLE ko_err)
set(output "${ko_out}${ko_err}")
if(ko_result EQUAL 0)
  message(FATAL_ERROR "the case compiled with DIMSUM_SHOULD_FAIL; it must not")
endif()

file(STRINGS ${SOURCE} expects REGEX "^// EXPECT(-${KIND})?: ")
if(NOT expects)
  message(FATAL_ERROR "the case has no // EXPECT: line")
endif()
foreach(line IN LISTS expects)
  string(REGEX REPLACE "^// EXPECT(-${KIND})?: " "" regex "${line}")
  if(NOT output MATCHES "${regex}")
    message(FATAL_ERROR "the diagnostic does not match '${regex}':\n${output}")
  endif()
endforeach()

# One mistake, one error: count the lines that report an error (not the notes
# and not clang's "N errors generated." summary).
# (A ';' would split a CMake list item: messages contain them.)
string(REPLACE ";" "," flat_output "${output}")
string(REGEX MATCHALL "[^\n]*error:[^\n]*" error_lines "${flat_output}")
set(n_errors 0)
foreach(line IN LISTS error_lines)
  if(NOT line MATCHES "errors? generated")
    math(EXPR n_errors "${n_errors} + 1")
  endif()
endforeach()
if(NOT n_errors EQUAL 1)
  message(FATAL_ERROR "the mistake gives ${n_errors} errors; it must give exactly one:\n${output}")
endif()

# The first error line and the size of the diagnostic, for the report.
string(REGEX MATCH "[^\n]*error:[^\n]*" first_error "${output}")
string(REGEX MATCHALL "\n" newlines "${output}")
list(LENGTH newlines n_lines)
message("first error: ${first_error}")
message("diagnostic lines: ${n_lines}")
if(REPORT)
  get_filename_component(case ${SOURCE} NAME_WE)
  file(WRITE ${REPORT} "${case}\t${KIND}\t${n_errors}\t${n_lines}\t${first_error}\n")
endif()
