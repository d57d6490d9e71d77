# Every dependency comes from a Debian package installed by scripts/setup.
find_package(PkgConfig REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(CLI11 REQUIRED)
find_package(fmt REQUIRED)
find_package(Threads REQUIRED)
pkg_check_modules(PCRE2 REQUIRED IMPORTED_TARGET libpcre2-8)
pkg_check_modules(UTF8PROC REQUIRED IMPORTED_TARGET libutf8proc)
# The HTTP server (Debian's compiled cpp-httplib; its pkg-config file carries the TLS/zlib flags
# the library was built with, which the header must see identically).
pkg_check_modules(HTTPLIB REQUIRED IMPORTED_TARGET cpp-httplib)
# Line editing for `megadecode chat` (Debian libedit-dev; BSD-licensed, unlike GNU readline).
pkg_check_modules(LIBEDIT REQUIRED IMPORTED_TARGET libedit)
if(MD_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
if(MD_BUILD_BENCH)
  find_package(benchmark REQUIRED)
endif()
