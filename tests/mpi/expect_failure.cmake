# Runs `${MPIEXEC} ... ${PROGRAM} ${MODE}` and passes when it exits non-zero
# with output matching EXPECT (a regex): a failing rank must end the job
# with a clear message, and CTest's TIMEOUT catches a hang.
# Inputs: -DMPIEXEC= -DNP= -DPROGRAM= -DMODE= -DEXPECT=
execute_process(COMMAND ${MPIEXEC} --allow-run-as-root --oversubscribe -np ${NP} -x OMP_NUM_THREADS=1 ${PROGRAM} ${MODE}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
set(output "${out}${err}")
if(rc EQUAL 0)
  message(FATAL_ERROR "the job exited 0; it must fail:\n${output}")
endif()
if(NOT output MATCHES "${EXPECT}")
  message(FATAL_ERROR "the output does not match '${EXPECT}':\n${output}")
endif()
message("exit ${rc}, output matched '${EXPECT}'")
