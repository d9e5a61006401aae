# Compiles SOURCE (which includes every deprecated <dimsum/dist/*.hpp>)
# with the project's warnings but not as errors: it must compile, and the
# output must hold one deprecation warning per old header, naming the new
# path. Inputs: -DCOMPILER= -DSOURCE= -DINCLUDE= -DHEADERS=<names;...>
separate_arguments(flags UNIX_COMMAND "-std=c++20 -fsyntax-only -Wall -Wextra -I${INCLUDE}")
execute_process(COMMAND ${COMPILER} ${flags} ${SOURCE} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
set(output "${out}${err}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the deprecated includes do not compile:\n${output}")
endif()
foreach(h IN LISTS HEADERS)
  string(REPLACE "." "\\." hre "${h}")
  if(NOT output MATCHES "dimsum: <dimsum/dist/${hre}> is deprecated, include <dimsum/distributed/${hre}>")
    message(FATAL_ERROR "no deprecation warning for <dimsum/dist/${h}>:\n${output}")
  endif()
endforeach()
message("compiled with the deprecation warnings")
