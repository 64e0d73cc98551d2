# add_lstm_stage(<name>): the one line that adds a stage.
#
# stages/<name>/ holds the stage's sources (*.cu, *.cpp, *.h, *.cuh). They define
#   namespace lstm::stage_<name> { std::unique_ptr<lstm::Stage> make(); }
# This builds them into the library lstm_stage_<name>, makes the executable lstm_<name> from a
# generated main() that hands the factory to the shared harness (common/stage_main.h), and adds
# the stage to the registry that the tests and the benchmark iterate over.
function(add_lstm_stage name)
  set(dir ${CMAKE_SOURCE_DIR}/stages/${name})
  if(NOT IS_DIRECTORY ${dir})
    message(FATAL_ERROR "add_lstm_stage(${name}): no folder ${dir}")
  endif()
  file(GLOB sources CONFIGURE_DEPENDS ${dir}/*.cu ${dir}/*.cpp)
  add_library(lstm_stage_${name} STATIC ${sources})
  target_link_libraries(lstm_stage_${name} PUBLIC lstm_common PRIVATE lstm_warnings)
  set_target_properties(lstm_stage_${name} PROPERTIES CUDA_SEPARABLE_COMPILATION OFF)

  set(STAGE_NAME ${name})
  configure_file(${CMAKE_SOURCE_DIR}/cmake/stage_main.cpp.in
                 ${CMAKE_BINARY_DIR}/generated/stage_main_${name}.cpp @ONLY)
  add_executable(lstm_${name} ${CMAKE_BINARY_DIR}/generated/stage_main_${name}.cpp)
  target_link_libraries(lstm_${name} PRIVATE lstm_stage_${name} lstm_warnings)
  set_target_properties(lstm_${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)

  set_property(GLOBAL APPEND PROPERTY LSTM_STAGES ${name})
endfunction()

# lstm_write_stage_registry(): after every add_lstm_stage, writes the library lstm_stage_registry
# whose all_stages() lists every stage (common/stage_registry.h).
function(lstm_write_stage_registry)
  get_property(stages GLOBAL PROPERTY LSTM_STAGES)
  set(STAGE_DECLARATIONS "")
  set(STAGE_ENTRIES "")
  foreach(name IN LISTS stages)
    string(APPEND STAGE_DECLARATIONS
           "namespace stage_${name} {\nstd::unique_ptr<Stage> make();\n}\n")
    string(APPEND STAGE_ENTRIES "      {\"${name}\", &stage_${name}::make},\n")
  endforeach()
  configure_file(${CMAKE_SOURCE_DIR}/cmake/stage_registry.cpp.in
                 ${CMAKE_BINARY_DIR}/generated/stage_registry.cpp @ONLY)
  add_library(lstm_stage_registry STATIC ${CMAKE_BINARY_DIR}/generated/stage_registry.cpp)
  foreach(name IN LISTS stages)
    target_link_libraries(lstm_stage_registry PUBLIC lstm_stage_${name})
  endforeach()
endfunction()
