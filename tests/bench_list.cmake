# bench_list(<var> [flag...]): what lstm_bench (BENCH) lists with --benchmark_list_tests and these
# flags, one benchmark name a line; a fatal error if it exits non-zero. For the bench's tests.
function(bench_list out)
  execute_process(COMMAND ${BENCH} ${ARGN} --benchmark_list_tests OUTPUT_VARIABLE listed
                  RESULT_VARIABLE code)
  if(NOT code EQUAL 0)
    list(JOIN ARGN " " flags)
    message(FATAL_ERROR "lstm_bench ${flags} --benchmark_list_tests exited with ${code}")
  endif()
  set(${out} "${listed}" PARENT_SCOPE)
endfunction()
