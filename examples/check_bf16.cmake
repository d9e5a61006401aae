# Trains train_char_transformer --smoke in float32 and with --bf16 (mixed
# precision: bf16 forward and backward, float32 master weights) and checks
# that the held-out loss after the same steps differs by at most 2%.
foreach(mode float32 bf16)
  set(args --smoke --out ${DIR}/${mode})
  if(mode STREQUAL "bf16")
    list(APPEND args --bf16)
  endif()
  execute_process(COMMAND ${EXE} ${args} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "train_char_transformer ${args} failed (${rc}):\n${out}\n${err}")
  endif()
  if(NOT out MATCHES "held out [0-9.]+ -> ([0-9.]+)")
    message(FATAL_ERROR "no held-out loss in the output of train_char_transformer ${args}:\n${out}")
  endif()
  set(held_${mode} ${CMAKE_MATCH_1})
endforeach()
# cmake's math is integer: compare the two losses with python3
execute_process(COMMAND /usr/bin/python3 -c
  "import sys; f, b = float(sys.argv[1]), float(sys.argv[2]); sys.exit(0 if abs(b - f) <= 0.02 * f else 1)"
  ${held_float32} ${held_bf16} RESULT_VARIABLE differ)
if(NOT differ EQUAL 0)
  message(FATAL_ERROR "held-out loss with --bf16 ${held_bf16} is not within 2% of float32's ${held_float32}")
endif()
message(STATUS "held-out loss: float32 ${held_float32}, bf16 ${held_bf16}")
