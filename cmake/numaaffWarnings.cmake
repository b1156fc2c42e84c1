# Warnings for numaaff's own targets (tests, examples, benchmarks): never forced on consumers.
add_library(numaaff_project_warnings INTERFACE)
target_compile_options(numaaff_project_warnings INTERFACE
  -Wall -Wextra -Wshadow -Wconversion -Wsign-conversion -Wpedantic
  $<$<BOOL:${NUMAAFF_WERROR}>:-Werror>)
