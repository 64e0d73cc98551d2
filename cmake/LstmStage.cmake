# add_lstm_stage(<series> <NN_slug> [DIR <folder>] [TEST_ONLY] [VARIANTS <v>...]): the one line
# that adds a stage.
#
# stages/<series>/<NN_slug>/ (or DIR) holds the stage's sources (*.cu, *.cpp, *.h, *.cuh). They
# define, inside the namespace the build names for them,
#   namespace lstm::LSTM_STAGE_NAMESPACE { std::unique_ptr<lstm::Stage> make(); }
# LSTM_STAGE_NAMESPACE is stage_<series>_<NN_slug>, defined on the compile line, so a stage's
# source needs no renaming when it is copied into the next stage: the diff stays the lesson.
# This builds the sources into the library lstm_stage_<series>_<NN_slug>, makes the executable
# lstm_<series>_<NN_slug> from a generated main() that hands the factory to the shared harness
# (common/harness/stage_main.h), and adds the stage, named "<series>/<NN_slug>", to the registry
# that the tests and the benchmark iterate over (unless TEST_ONLY: a stage the tests build to
# exercise the harness, kept out of the registry and the benchmark).
# VARIANTS: each <v> (e.g. bf16) adds one more registry entry, "<series>/<NN_slug>_<v>", made by
# the stage's own factory make_<v>() (declared like make()): the same code in another
# configuration that the harness must know before it makes the data, such as the precision. The
# executable stays one; its own flags choose the variant there.
# The folder's file `parent` names the stage it was copied from (lstm_check_stage_parent below);
# a TEST_ONLY stage may have none.
function(add_lstm_stage series name)
  cmake_parse_arguments(STAGE "TEST_ONLY" "DIR" "VARIANTS" ${ARGN})
  if(NOT series MATCHES "^[a-z][a-z0-9]*$" OR NOT name MATCHES "^[0-9][0-9]_[a-z0-9_]+$")
    message(FATAL_ERROR "add_lstm_stage(${series} ${name}): expected a series like 'forward' "
                        "and a name like '00_naive'")
  endif()
  set(dir ${CMAKE_SOURCE_DIR}/stages/${series}/${name})
  if(STAGE_DIR)
    set(dir ${CMAKE_SOURCE_DIR}/${STAGE_DIR})
  endif()
  if(NOT IS_DIRECTORY ${dir})
    message(FATAL_ERROR "add_lstm_stage(${series} ${name}): no folder ${dir}")
  endif()
  lstm_check_stage_parent(${series}/${name} ${dir} ${STAGE_TEST_ONLY})
  set(id ${series}_${name})
  file(GLOB sources CONFIGURE_DEPENDS ${dir}/*.cu ${dir}/*.cpp)
  add_library(lstm_stage_${id} STATIC ${sources})
  target_link_libraries(lstm_stage_${id} PUBLIC lstm_harness PRIVATE lstm_warnings)
  target_compile_definitions(lstm_stage_${id} PRIVATE LSTM_STAGE_NAMESPACE=stage_${id})
  set_target_properties(lstm_stage_${id} PROPERTIES CUDA_SEPARABLE_COMPILATION OFF)

  set(STAGE_NAME ${series}/${name})
  set(STAGE_SERIES ${series})
  set(STAGE_ID ${id})
  configure_file(${CMAKE_SOURCE_DIR}/cmake/stage_main.cpp.in
                 ${CMAKE_BINARY_DIR}/generated/stage_main_${id}.cpp @ONLY)
  add_executable(lstm_${id} ${CMAKE_BINARY_DIR}/generated/stage_main_${id}.cpp)
  target_link_libraries(lstm_${id} PRIVATE lstm_stage_${id} lstm_warnings)
  set_target_properties(lstm_${id} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)

  foreach(variant IN LISTS STAGE_VARIANTS)
    if(NOT variant MATCHES "^[a-z0-9]+$" OR STAGE_TEST_ONLY)
      message(FATAL_ERROR "add_lstm_stage(${series} ${name}): VARIANTS takes names like 'bf16', "
                          "not '${variant}', and not with TEST_ONLY")
    endif()
  endforeach()
  if(NOT STAGE_TEST_ONLY)
    set_property(GLOBAL APPEND PROPERTY LSTM_STAGES ${series}/${name})
    set_property(GLOBAL PROPERTY LSTM_STAGE_VARIANTS_${id} ${STAGE_VARIANTS})
  endif()
endfunction()

# lstm_write_stage_registry(): after every add_lstm_stage, writes the library lstm_stage_registry
# whose all_stages() lists every registered stage, series by series in the order of
# CMakeLists.txt (common/harness/stage_registry.h), and <build>/stages.txt, the stages'
# executables a line each with their variants (scripts/gpu_check.sh runs them).
function(lstm_write_stage_registry)
  get_property(stages GLOBAL PROPERTY LSTM_STAGES)
  set(STAGE_DECLARATIONS "")
  set(STAGE_ENTRIES "")
  set(STAGE_LIST "")  # <build>/stages.txt: an executable a line, then its variants (gpu_check.sh)
  foreach(stage IN LISTS stages)
    string(REPLACE "/" "_" id ${stage})
    string(REGEX REPLACE "/.*" "" series ${stage})
    get_property(variants GLOBAL PROPERTY LSTM_STAGE_VARIANTS_${id})
    string(REPLACE ";" " " shown_variants "${variants}")
    string(APPEND STAGE_LIST "lstm_${id} ${shown_variants}\n")
    string(APPEND STAGE_DECLARATIONS "namespace stage_${id} {\nstd::unique_ptr<Stage> make();\n")
    string(APPEND STAGE_ENTRIES "      {\"${stage}\", \"${series}\", &stage_${id}::make},\n")
    foreach(variant IN LISTS variants)
      string(APPEND STAGE_DECLARATIONS "std::unique_ptr<Stage> make_${variant}();\n")
      string(APPEND STAGE_ENTRIES
             "      {\"${stage}_${variant}\", \"${series}\", &stage_${id}::make_${variant}},\n")
    endforeach()
    string(APPEND STAGE_DECLARATIONS "}\n")
  endforeach()
  configure_file(${CMAKE_SOURCE_DIR}/cmake/stage_registry.cpp.in
                 ${CMAKE_BINARY_DIR}/generated/stage_registry.cpp @ONLY)
  file(WRITE ${CMAKE_BINARY_DIR}/stages.txt "${STAGE_LIST}")
  add_library(lstm_stage_registry STATIC ${CMAKE_BINARY_DIR}/generated/stage_registry.cpp)
  target_link_libraries(lstm_stage_registry PUBLIC lstm_harness)
  foreach(stage IN LISTS stages)
    string(REPLACE "/" "_" id ${stage})
    target_link_libraries(lstm_stage_registry PUBLIC lstm_stage_${id})
  endforeach()
endfunction()

# lstm_check_stage_parent(<series>/<NN_slug> <folder> <optional>): fails the configuration unless
# the stage's file `parent` is well formed and names stages and files that exist. The file (read
# the same way by scripts/lesson_diff.sh, which shows the lesson and the lesson-size table of
# docs/design.md from it):
#   lines that are blank or start with '#' are left out;
#   the first other line: the stage this one was copied from, <series>/<NN_slug>, or none;
#   each further line: <file here> <series>/<NN_slug>[/<file there>], a file taken from another
#   stage (by the same name unless named).
# Without the file: an error, unless <optional> (a TEST_ONLY stage).
function(lstm_check_stage_parent stage dir optional)
  set(file ${dir}/parent)
  file(RELATIVE_PATH shown ${CMAKE_SOURCE_DIR} ${file})
  if(NOT EXISTS ${file})
    if(NOT optional)
      message(FATAL_ERROR "add_lstm_stage(${stage}): no file ${shown}: it names the stage this "
                          "one was copied from, or none (docs/design.md, \"Series of stages, and "
                          "how to add one\")")
    endif()
    return()
  endif()
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${file})
  set(stage_pattern "[a-z][a-z0-9]*/[0-9][0-9]_[a-z0-9_]+")
  file(READ ${file} text)
  # No list separators or brackets (which would keep a list from splitting) in what is split below.
  string(REPLACE ";" "," text "${text}")
  string(REPLACE "[" "(" text "${text}")
  string(REPLACE "]" ")" text "${text}")
  string(REPLACE "\r" "" text "${text}")
  string(REPLACE "\n" ";" lines "${text}")
  set(number 0)
  set(parent "")
  set(taken "")
  foreach(line IN LISTS lines)
    math(EXPR number "${number} + 1")
    if(line MATCHES "^[ \t]*(#.*)?$")
      continue()
    endif()
    string(REGEX MATCHALL "[^ \t]+" words "${line}")
    list(LENGTH words count)
    set(where "add_lstm_stage(${stage}): ${shown}:${number}")
    if(parent STREQUAL "")
      if(NOT count EQUAL 1 OR NOT (line MATCHES "^[ \t]*none[ \t]*$" OR
                                   line MATCHES "^[ \t]*${stage_pattern}[ \t]*$"))
        message(FATAL_ERROR "${where}: expected the stage this one was copied from "
                            "(<series>/<NN_slug>) or none, not '${line}'")
      endif()
      set(parent ${words})
      if(parent STREQUAL stage)
        message(FATAL_ERROR "${where}: a stage is not its own parent")
      elseif(NOT parent STREQUAL "none" AND NOT IS_DIRECTORY ${CMAKE_SOURCE_DIR}/stages/${parent})
        message(FATAL_ERROR "${where}: no stage folder stages/${parent}")
      endif()
      continue()
    endif()
    list(GET words 0 own)
    if(NOT count EQUAL 2 OR own MATCHES "/")
      message(FATAL_ERROR "${where}: expected <file here> <series>/<NN_slug>[/<file there>], "
                          "not '${line}'")
    endif()
    list(GET words 1 source)
    if(NOT source MATCHES "^(${stage_pattern})(/(.+))?$")
      message(FATAL_ERROR "${where}: expected <file here> <series>/<NN_slug>[/<file there>], "
                          "not '${line}'")
    endif()
    set(source_stage ${CMAKE_MATCH_1})
    set(source_file ${CMAKE_MATCH_3})
    if(source_file STREQUAL "")
      set(source_file ${own})
    endif()
    if(NOT EXISTS ${dir}/${own} OR IS_DIRECTORY ${dir}/${own})
      message(FATAL_ERROR "${where}: no file ${own} in this stage")
    endif()
    if(NOT EXISTS ${CMAKE_SOURCE_DIR}/stages/${source_stage}/${source_file})
      message(FATAL_ERROR "${where}: no file stages/${source_stage}/${source_file}")
    endif()
    if(own IN_LIST taken)
      message(FATAL_ERROR "${where}: ${own} is named twice")
    endif()
    list(APPEND taken ${own})
  endforeach()
  if(parent STREQUAL "")
    message(FATAL_ERROR "add_lstm_stage(${stage}): ${shown} names no stage (write none for the "
                        "first stage of a series)")
  endif()
endfunction()
