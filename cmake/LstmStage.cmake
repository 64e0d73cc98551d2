# add_lstm_stage(<series> <NN_slug> [DIR <folder>] [TEST_ONLY]): the one line that adds a stage.
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
function(add_lstm_stage series name)
  cmake_parse_arguments(STAGE "TEST_ONLY" "DIR" "" ${ARGN})
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

  if(NOT STAGE_TEST_ONLY)
    set_property(GLOBAL APPEND PROPERTY LSTM_STAGES ${series}/${name})
  endif()
endfunction()

# lstm_write_stage_registry(): after every add_lstm_stage, writes the library lstm_stage_registry
# whose all_stages() lists every registered stage, series by series in the order of
# CMakeLists.txt (common/harness/stage_registry.h).
function(lstm_write_stage_registry)
  get_property(stages GLOBAL PROPERTY LSTM_STAGES)
  set(STAGE_DECLARATIONS "")
  set(STAGE_ENTRIES "")
  foreach(stage IN LISTS stages)
    string(REPLACE "/" "_" id ${stage})
    string(REGEX REPLACE "/.*" "" series ${stage})
    string(APPEND STAGE_DECLARATIONS
           "namespace stage_${id} {\nstd::unique_ptr<Stage> make();\n}\n")
    string(APPEND STAGE_ENTRIES "      {\"${stage}\", \"${series}\", &stage_${id}::make},\n")
  endforeach()
  configure_file(${CMAKE_SOURCE_DIR}/cmake/stage_registry.cpp.in
                 ${CMAKE_BINARY_DIR}/generated/stage_registry.cpp @ONLY)
  add_library(lstm_stage_registry STATIC ${CMAKE_BINARY_DIR}/generated/stage_registry.cpp)
  target_link_libraries(lstm_stage_registry PUBLIC lstm_harness)
  foreach(stage IN LISTS stages)
    string(REPLACE "/" "_" id ${stage})
    target_link_libraries(lstm_stage_registry PUBLIC lstm_stage_${id})
  endforeach()
endfunction()
