# lstm_stated_limits_test(): the test stated_limits.readmes_agree_with_the_planners. Every
# registered stage whose README has a "**Limits**" line and whose plan.h has
# largest_hidden_that_fits is listed, with the N of "H ≤ N at any batch" (before the next "*"; 0
# where the line has none, which fails), in a generated file that tests/stated_limits.cpp
# includes. tests/stated_limits_stage.cpp asks the stage's planner (host code, in the stage's
# library), compiled in the stage's namespace, an object library per stage. A README edit or a
# planner change reconfigures.
function(lstm_stated_limits_test)
  get_property(stages GLOBAL PROPERTY LSTM_STAGES)
  set(entries "")
  set(libraries "")
  foreach(stage_name IN LISTS stages)
    set(dir ${CMAKE_SOURCE_DIR}/stages/${stage_name})
    if(NOT EXISTS ${dir}/README.md OR NOT EXISTS ${dir}/plan.h)
      continue()
    endif()
    set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${dir}/README.md ${dir}/plan.h)
    file(READ ${dir}/README.md readme)
    file(READ ${dir}/plan.h plan_header)
    if(NOT plan_header MATCHES "int largest_hidden_that_fits\\(" OR NOT readme MATCHES
                                                                     "\\*\\*Limits\\*\\*")
      continue()
    endif()
    set(stated 0)  # a **Limits** line without the figure: the test says so and fails
    if(readme MATCHES "\\*\\*Limits\\*\\*[^*]*H ≤ ([0-9]+) at any batch")
      set(stated ${CMAKE_MATCH_1})
    endif()
    string(REPLACE "/" "_" id ${stage_name})
    add_library(stated_limits_${id} OBJECT stated_limits_stage.cpp)
    target_include_directories(stated_limits_${id} PRIVATE ${dir})
    target_link_libraries(stated_limits_${id} PRIVATE lstm_core lstm_warnings)
    target_compile_definitions(stated_limits_${id} PRIVATE LSTM_STAGE_NAMESPACE=stage_${id})
    string(APPEND entries "LSTM_STATED_LIMIT(${id}, \"${stage_name}\", ${stated})\n")
    list(APPEND libraries stated_limits_${id} lstm_stage_${id})
  endforeach()
  set(generated ${CMAKE_BINARY_DIR}/generated/stated_limits)
  file(CONFIGURE OUTPUT ${generated}/stated_limits_stages.inc CONTENT "${entries}")
  add_executable(stated_limits stated_limits.cpp)
  target_include_directories(stated_limits PRIVATE ${generated})
  target_link_libraries(stated_limits PRIVATE ${libraries} lstm_warnings)
  add_test(NAME stated_limits.readmes_agree_with_the_planners COMMAND stated_limits)
  set_tests_properties(stated_limits.readmes_agree_with_the_planners PROPERTIES LABELS cpu)
endfunction()
