# Warnings for numaaff's own targets (tests, examples, benchmarks, tools, the C library):
# never forced on consumers. The options are also a list, for targets that are exported
# (a static numaaff_c would carry a link to this target into its export set).
set(NUMAAFF_WARNING_OPTIONS -Wall -Wextra -Wshadow -Wconversion -Wsign-conversion -Wpedantic
  $<$<BOOL:${NUMAAFF_WERROR}>:-Werror>)
add_library(numaaff_project_warnings INTERFACE)
target_compile_options(numaaff_project_warnings INTERFACE ${NUMAAFF_WARNING_OPTIONS})
