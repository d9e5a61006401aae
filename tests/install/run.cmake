# Installs dimsum into a scratch prefix (for MODE=find_package), configures,
# builds and runs tests/install/consumer.
set(prefix ${WORK_DIR}/prefix)
set(consumer_build ${WORK_DIR}/${MODE})
file(REMOVE_RECURSE ${consumer_build})
function(run)
  execute_process(COMMAND ${ARGV} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGV}")
  endif()
endfunction()
if(MODE STREQUAL "find_package")
  set(dimsum_build ${WORK_DIR}/dimsum-build)
  run(${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${dimsum_build} -DCMAKE_CXX_COMPILER=${CXX} -DDIMSUM_BUILD_TESTS=OFF
      -DDIMSUM_BUILD_EXAMPLES=OFF -DCMAKE_INSTALL_PREFIX=${prefix})
  run(${CMAKE_COMMAND} --install ${dimsum_build})
  run(${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/install -B ${consumer_build} -DCMAKE_CXX_COMPILER=${CXX}
      -DCMAKE_PREFIX_PATH=${prefix} -DDIMSUM_FROM=find_package)
else()
  run(${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/install -B ${consumer_build} -DCMAKE_CXX_COMPILER=${CXX}
      -DDIMSUM_FROM=add_subdirectory -DDIMSUM_SOURCE_DIR=${SOURCE_DIR})
endif()
run(${CMAKE_COMMAND} --build ${consumer_build})
run(${consumer_build}/consumer)
