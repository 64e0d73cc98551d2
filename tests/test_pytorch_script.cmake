# Script mode: the PyTorch baseline (baselines/pytorch/lstm_pytorch.py) end to end, on any machine.
#
#   cmake -DPYTHON=python3 -DSCRIPT=baselines/pytorch/lstm_pytorch.py \
#         -DFIXTURE=tests/data/pytorch_fixture \
#         -DTRAINING_FIXTURE=tests/data/pytorch_training_fixture -P tests/test_pytorch_script.cmake
#
# First, on every machine: a bad command line exits 2 (a bad flag, --seed with data that come from
# --load, an output path that cannot be written), a size flag that disagrees with the files 1, and
# a --training check against a folder without the gradients 1 (before torch is imported).
# Then what `SCRIPT --load FIXTURE` and `SCRIPT --training --load TRAINING_FIXTURE` must do depends
# on the machine:
#   no numpy                 exit 1, "numpy is required"
#   no torch                 exit 0, "PyTorch is not installed" (nothing was run)
#   torch, no CUDA GPU       exit 0, "no CUDA GPU" (nothing was run)
#   torch and a CUDA GPU     exit 0, "Disposition: Passed" (the fixtures carry y, hy, cy and, for
#                            training, every gradient); the training run's --dump and --json too
# Without numpy, torch or a GPU the fixtures were not checked: after every other check passed, the
# last line says "pytorch_script: SKIPPED (<why>)", which CTest's SKIP_REGULAR_EXPRESSION
# (tests/CMakeLists.txt) reports as skipped, not passed. A failed check stops the script first
# (message(FATAL_ERROR), a non-zero exit), so a failure is never reported as a skip.
foreach(variable PYTHON SCRIPT FIXTURE TRAINING_FIXTURE)
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
expect("help lists --training" 0 "--training.*training pass.*autograd.grad" --help)
expect("help lists --precision" 0 "--precision \\{fp32,fp16,bf16\\}" --help)
expect("bad precision" 2 "argument --precision: invalid choice: 'bogus'" --precision bogus --no-check)
expect("seed with load" 2 "--seed 5 has no effect: the data come from" --load ${FIXTURE} --seed 5)
expect("training: seed with loaded dy, dhy, dcy" 2 "--seed 5 has no effect: .*\\(dy, dhy and dcy too\\)"
       --training --load ${TRAINING_FIXTURE} --seed 5)
expect("seed above 2^64 - 1" 2 "--seed" --training --no-check --seed 18446744073709551616)
expect("dump onto a file" 2 "--dump .*exists and is not a folder" --training --no-check --dump ${SCRIPT})
expect("json onto a folder" 2 "--json .*is a folder" --training --no-check --json ${FIXTURE})
if(have_numpy)
  # FP16 data checked against a reference of float32 inputs would measure the rounding of the
  # inputs: refused (before torch is needed), naming the way to make a fitting folder.
  expect("precision on unrounded data" 1
         "not fp16, so the reference there is not of the fp16 inputs.*lstm_reference --precision fp16"
         --precision fp16 --load ${FIXTURE})
  expect("flag disagrees with the files" 1 "--hidden 5 disagrees with .*h0.npy"
         --load ${FIXTURE} --hidden 5)
  expect("training: flag disagrees with the files" 1 "--layers 2 disagrees with .*h0.npy"
         --training --load ${TRAINING_FIXTURE} --layers 2)
  # The forward fixture has y, hy, cy but no gradients: a training check cannot be made with it.
  expect("training: no gradients to check against" 1 "dx.npy: missing.*--check-dir"
         --training --load ${FIXTURE})
  expect("training: reference of another size" 1 "y.npy: shape \\(6, 3, 13\\), expected \\(5, 3, 11\\)"
         --training --load ${TRAINING_FIXTURE} --check-dir ${FIXTURE})
endif()

if(NOT have_numpy)
  expect("fixture (no numpy)" 1 "numpy is required" --load ${FIXTURE})
  expect("training fixture (no numpy)" 1 "numpy is required" --training --load ${TRAINING_FIXTURE})
  message(STATUS "pytorch_script: SKIPPED (numpy is not installed in ${PYTHON}: the fixtures were not run)")
elseif(NOT have_torch)
  expect("fixture (no torch)" 0 "PyTorch is not installed" --load ${FIXTURE})
  expect("training fixture (no torch)" 0 "PyTorch is not installed" --training --load ${TRAINING_FIXTURE})
  expect("training, dy, dhy, dcy generated (no torch)" 0 "PyTorch is not installed"
         --training --load ${FIXTURE} --seed 7 --no-check)
  message(STATUS "pytorch_script: SKIPPED (PyTorch is not installed in ${PYTHON}: the fixtures were not run)")
elseif(NOT have_gpu)
  expect("fixture (torch, no GPU)" 0 "no CUDA GPU" --load ${FIXTURE})
  expect("training fixture (torch, no GPU)" 0 "no CUDA GPU" --training --load ${TRAINING_FIXTURE})
  message(STATUS "pytorch_script: SKIPPED (no CUDA GPU for PyTorch: the fixtures were not run)")
else()
  expect("fixture (torch and a GPU)" 0 "check y: ok.*check hy: ok.*check cy: ok.*Disposition: Passed"
         --load ${FIXTURE} --iters 3 --warmup 1)
  # The training fixture: y, hy, cy and every gradient (3 layers) from nn.LSTM in float64.
  set(work ${CMAKE_CURRENT_BINARY_DIR}/pytorch_script_work)
  file(REMOVE_RECURSE ${work})
  file(MAKE_DIRECTORY ${work})
  expect("training fixture (torch and a GPU)"
         0 "check y: ok.*check cy: ok.*check dx: ok.*check dh0: ok.*check dc0: ok.*check grad_weight_ih_l0: ok.*check grad_bias_hh_l2: ok.*time pytorch_training .* training fp32 .*of which forward.*backward.*Disposition: Passed"
         --training --load ${TRAINING_FIXTURE} --iters 3 --warmup 1 --dump ${work}/dump
         --json ${work}/record.jsonl)
  foreach(name y hy cy dx dh0 dc0 grad_weight_ih_l0 grad_weight_hh_l1 grad_bias_ih_l2 grad_bias_hh_l2)
    if(NOT EXISTS ${work}/dump/${name}.npy)
      message(FATAL_ERROR "training fixture: --dump wrote no ${name}.npy")
    endif()
  endforeach()
  file(READ ${work}/record.jsonl record)
  foreach(key "\"stage\":\"pytorch_training\"" "\"kind\":\"training\"" "\"phases\":{\"backward\":{"
              "\"forward\":{\"max\"" "\"worst_tensor\"" "\"grad_bias_hh_l2\":{")
    string(FIND "${record}" "${key}" at)
    if(at EQUAL -1)
      message(FATAL_ERROR "training fixture: the JSON record has no ${key}:\n${record}")
    endif()
  endforeach()
  message(STATUS "training fixture: --dump and --json as expected")
  file(REMOVE_RECURSE ${work})
endif()
