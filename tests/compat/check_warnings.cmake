# Compiles old_spellings.cpp (syntax only, deprecation warnings on) and
# checks that each old spelling it uses warns on its own line of that file
# (in the warning, or on clang in the note right after it),
# naming the spelling that replaces it. -DCOMPILER, -DSOURCE, -DINCLUDES
# (a list of include directories).
set(flags -std=c++20 -fsyntax-only -Wdeprecated-declarations -DDIMSUM_FIXTURES_DIR="")
foreach(dir IN LISTS INCLUDES)
  if(dir)
    list(APPEND flags -I${dir})
  endif()
endforeach()
execute_process(COMMAND ${COMPILER} ${flags} ${SOURCE} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "old_spellings.cpp does not compile:\n${out}")
endif()
# Each expected warning: the replacement its text names.
set(expected
  "use dimsum::nn::seeds::char_tokenizer"
  "use dimsum::nn::seeds::char_head"
  "use forward<Time, QT, KT>"
  "use dimsum::nn::seeds::self_attention_v1"
  "use dimsum::nn::seeds::self_attention_v2"
  "use dimsum::nn::seeds::self_attention_trace"
  "use dimsum::nn::seeds::key_position")
get_filename_component(file ${SOURCE} NAME)
set(missing "")
foreach(text IN LISTS expected)
  string(REGEX REPLACE "([][+.*()^$<>])" "\\\\\\1" pattern "${text}")
  # g++: the warning is on the user's line; clang (through the alias of a
  # deprecated function's type): the next note after it shows that line.
  if(NOT out MATCHES "${file}:[0-9]+:[0-9]+: warning: [^\n]*${pattern}" AND
     NOT out MATCHES "warning: [^\n]*${pattern}[^\n]*\n[^\n]*\n[^\n]*\n[^\n]*${file}:[0-9]+:[0-9]+: note: ")
    string(APPEND missing "\n  ${text}")
  endif()
endforeach()
if(missing)
  message(FATAL_ERROR "No deprecation warning on a line of ${file} for:${missing}\nCompiler output:\n${out}")
endif()
message(STATUS "every old spelling warns with its replacement")
