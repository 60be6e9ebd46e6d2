# SPDX-License-Identifier: Apache-2.0
# Installs the build's "dev" component to a fresh prefix, then configures,
# builds and runs a consumer that only knows find_package(mlakv) and sets
# no C++ standard of its own; with EXPECT_TOOL, bin/mlakv must be installed too.
file(REMOVE_RECURSE ${WORK_DIR})
function(run)
  execute_process(COMMAND ${ARGV} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGV}")
  endif()
endfunction()
run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${WORK_DIR}/prefix --component dev)
if(EXPECT_TOOL)  # the dev component also installs the command-line tool
  run(${WORK_DIR}/prefix/bin/mlakv --version)
endif()
run(${CMAKE_COMMAND} -S ${CONSUMER_SOURCE} -B ${WORK_DIR}/build -G ${GENERATOR}
    -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix)
run(${CMAKE_COMMAND} --build ${WORK_DIR}/build)
run(${WORK_DIR}/build/consumer)
