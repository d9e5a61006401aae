# Interrupts train_char_transformer --smoke after 40 of its 80 steps, resumes
# it from the checkpoint, and checks that the model and optimizer files at
# the end are byte for byte those of the uninterrupted smoke run in SMOKE.
file(REMOVE_RECURSE ${DIR})
foreach(args "--stop-after;40" "--resume;${DIR}")
  execute_process(COMMAND ${EXE} --smoke ${args} --out ${DIR} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "train_char_transformer --smoke ${args} failed (${rc}):\n${out}\n${err}")
  endif()
endforeach()
if(NOT out MATCHES "resuming from [^\n]* at step 40")
  message(FATAL_ERROR "the second run did not resume at step 40:\n${out}")
endif()
foreach(file char_transformer.safetensors char_transformer.optimizer.safetensors)
  execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${SMOKE}/${file} ${DIR}/${file} RESULT_VARIABLE differ)
  if(NOT differ EQUAL 0)
    message(FATAL_ERROR "${file}: the resumed run differs from the uninterrupted one")
  endif()
endforeach()
