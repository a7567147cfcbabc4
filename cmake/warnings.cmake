# Warnings from STYLE.md; errors when GLIM_WERROR (CI).
set(GLIM_C_WARNINGS -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes
    -Wno-unused-parameter)
if(GLIM_WERROR)
    list(APPEND GLIM_C_WARNINGS -Werror)
endif()
