# Writes the current git commit (with "-dirty" for uncommitted changes) into a generated source
# at every build, so that result records name the code that produced them.
set(LSTM_GIT_COMMIT_CPP ${CMAKE_BINARY_DIR}/generated/git_commit.cpp)
add_custom_target(lstm_git_commit
  COMMAND ${CMAKE_COMMAND} -DSOURCE_DIR=${CMAKE_SOURCE_DIR} -DOUTPUT=${LSTM_GIT_COMMIT_CPP}
          -P ${CMAKE_SOURCE_DIR}/cmake/WriteGitCommit.cmake
  BYPRODUCTS ${LSTM_GIT_COMMIT_CPP}
  COMMENT "Recording the git commit"
  VERBATIM)
