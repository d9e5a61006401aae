# Runs `${MPIEXEC} ... ${PROGRAM} ${MODE}` and passes when it exits non-zero
# with output matching EXPECT (a regex) within MAX_SECONDS (if given): a
# failing rank must end the job with a clear message, and CTest's TIMEOUT
# catches a hang.
# Inputs: -DMPIEXEC= -DNP= -DPROGRAM= -DMODE= -DEXPECT= [-DMAX_SECONDS=]
string(TIMESTAMP started "%s")
execute_process(COMMAND ${MPIEXEC} --allow-run-as-root --oversubscribe -np ${NP} -x OMP_NUM_THREADS=1 ${PROGRAM} ${MODE}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
string(TIMESTAMP ended "%s")
math(EXPR took "${ended} - ${started}")
set(output "${out}${err}")
if(rc EQUAL 0)
  message(FATAL_ERROR "the job exited 0; it must fail:\n${output}")
endif()
if(NOT output MATCHES "${EXPECT}")
  message(FATAL_ERROR "the output does not match '${EXPECT}':\n${output}")
endif()
if(MAX_SECONDS AND took GREATER MAX_SECONDS)
  message(FATAL_ERROR "the job took ${took} s, more than ${MAX_SECONDS} s:\n${output}")
endif()
message("exit ${rc} after ${took} s, output matched '${EXPECT}'")
