# CMake helpers of the native kernels, included by the top-level CMakeLists.txt
# and by ffi/ascend/CMakeLists.txt (also when that is built standalone).

# gs_object_library_like_nanobind(<target>): what nanobind_add_module gives
# its own sources (position-independent code, hidden visibility, and in
# optimized builds no stack protector and a section per function), for the
# object libraries linked into the modules. The kernels' own flags, added
# after it, come later on the command line (their -O3 overrides nanobind's
# -Os, as when the kernels were compiled as part of the module).
function(gs_object_library_like_nanobind target)
  set_target_properties(${target} PROPERTIES
    POSITION_INDEPENDENT_CODE ON
    CXX_VISIBILITY_PRESET hidden)
  if(NOT MSVC)
    target_compile_options(${target} PRIVATE
      $<$<OR:$<CONFIG:Release>,$<CONFIG:MinSizeRel>>:-fno-stack-protector>)
    if(NOT APPLE)
      target_compile_options(${target} PRIVATE
        $<$<OR:$<CONFIG:Release>,$<CONFIG:MinSizeRel>,$<CONFIG:RelWithDebInfo>>:-ffunction-sections>
        $<$<OR:$<CONFIG:Release>,$<CONFIG:MinSizeRel>,$<CONFIG:RelWithDebInfo>>:-fdata-sections>)
    endif()
  endif()
endfunction()

# gs_add_link_check(<name> <object library> [libraries...]): a shared library
# of the object library's objects linked with -Wl,--no-undefined, built with
# ALL and never installed, so that a symbol the kernels use but nothing
# defines (say, a function only the x86-64 AVX2 files define, called on
# aarch64) fails the build instead of the import. The Python modules cannot
# be linked that way: they leave the Py* symbols to the interpreter.
function(gs_add_link_check name objects)
  add_library(${name} SHARED $<TARGET_OBJECTS:${objects}>)
  set_target_properties(${name} PROPERTIES LINKER_LANGUAGE CXX)
  if(ARGN)
    target_link_libraries(${name} PRIVATE ${ARGN})
  endif()
  if(NOT APPLE AND NOT WIN32)
    target_link_options(${name} PRIVATE -Wl,--no-undefined)
  endif()
endfunction()
