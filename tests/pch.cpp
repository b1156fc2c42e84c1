// The translation unit that makes the tests' shared precompiled header (tests/CMakeLists.txt).
