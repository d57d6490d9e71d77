# Project-wide warning policy: strict, and fatal in CI (MD_WERROR).
function(md_set_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor
                                           -Wcast-align -Wunused -Wimplicit-fallthrough)
  if(MD_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()
