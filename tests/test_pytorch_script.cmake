# Script mode: the PyTorch baseline (baselines/pytorch/lstm_pytorch.py) end to end, on any machine.
#
#   cmake -DPYTHON=python3 -DSCRIPT=baselines/pytorch/lstm_pytorch.py \
#         -DFIXTURE=tests/data/pytorch_fixture -P tests/test_pytorch_script.cmake
#
# First, on every machine: a bad command line exits 2, a size flag that disagrees with the files 1.
# Then what `SCRIPT --load FIXTURE` must do depends on the machine:
#   no numpy                 exit 1, "numpy is required"
#   no torch                 exit 0, "PyTorch is not installed" (nothing was run)
#   torch, no CUDA GPU       exit 0, "no CUDA GPU" (nothing was run)
#   torch and a CUDA GPU     exit 0, "Disposition: Passed" (the fixture carries y, hy, cy)
# Without numpy, torch or a GPU the fixture was not checked: after every other check passed, the last
# line says "pytorch_script: SKIPPED (<why>)", which CTest's SKIP_REGULAR_EXPRESSION
# (tests/CMakeLists.txt) reports as skipped, not passed. A failed check stops the script first
# (message(FATAL_ERROR), a non-zero exit), so a failure is never reported as a skip.
foreach(variable PYTHON SCRIPT FIXTURE)
  if(NOT DEFINED ${variable})
    message(FATAL_ERROR "pass -D${variable}=...")
  endif()
endforeach()

function(python_succeeds code result_variable)
  execute_process(COMMAND ${PYTHON} -c "${code}" RESULT_VARIABLE code_result OUTPUT_QUIET
                  ERROR_QUIET)
  if(code_result EQUAL 0)
    set(${result_variable} TRUE PARENT_SCOPE)
  else()
    set(${result_variable} FALSE PARENT_SCOPE)
  endif()
endfunction()

# expect(<what> <exit code> <regex> <arguments of SCRIPT>...)
function(expect what expected_code expected_regex)
  execute_process(COMMAND ${PYTHON} ${SCRIPT} ${ARGN} RESULT_VARIABLE code OUTPUT_VARIABLE out
                  ERROR_VARIABLE err)
  set(text "${out}${err}")
  if(NOT code STREQUAL "${expected_code}")
    message(FATAL_ERROR "${what}: exit code ${code}, expected ${expected_code}; output:\n${text}")
  endif()
  if(NOT text MATCHES "${expected_regex}")
    message(FATAL_ERROR "${what}: output does not match '${expected_regex}':\n${text}")
  endif()
  message(STATUS "${what}: exit code ${code} and output as expected")
endfunction()

python_succeeds("import numpy" have_numpy)
python_succeeds("import torch" have_torch)
set(have_gpu FALSE)
if(have_torch)
  python_succeeds("import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)" have_gpu)
endif()
message(STATUS "${PYTHON}: numpy ${have_numpy}, torch ${have_torch}, CUDA GPU ${have_gpu}")

expect("help" 0 "--hidden.*--input-size.*--batch.*--seq.*--layers.*--iters.*--warmup.*--seed.*--no-check.*--load.*--check-dir.*--dump.*--json"
       --help)
expect("zero hidden" 2 "--hidden" --hidden 0 --no-check)
expect("negative batch" 2 "--batch" --batch -4 --no-check)
expect("no data to check against" 2 "--load DIR.*or --no-check" --hidden 64)
if(have_numpy)
  expect("flag disagrees with the files" 1 "--hidden 5 disagrees with .*h0.npy"
         --load ${FIXTURE} --hidden 5)
endif()

if(NOT have_numpy)
  expect("fixture (no numpy)" 1 "numpy is required" --load ${FIXTURE})
  message(STATUS "pytorch_script: SKIPPED (numpy is not installed in ${PYTHON}: the fixture was not run)")
elseif(NOT have_torch)
  expect("fixture (no torch)" 0 "PyTorch is not installed" --load ${FIXTURE})
  message(STATUS "pytorch_script: SKIPPED (PyTorch is not installed in ${PYTHON}: the fixture was not run)")
elseif(NOT have_gpu)
  expect("fixture (torch, no GPU)" 0 "no CUDA GPU" --load ${FIXTURE})
  message(STATUS "pytorch_script: SKIPPED (no CUDA GPU for PyTorch: the fixture was not run)")
else()
  expect("fixture (torch and a GPU)" 0 "check y: ok.*check hy: ok.*check cy: ok.*Disposition: Passed"
         --load ${FIXTURE} --iters 3 --warmup 1)
endif()
