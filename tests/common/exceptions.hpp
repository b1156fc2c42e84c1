// What a call throws, as text: tests check that an error message names the input or the call.
#pragma once

#include <string>

namespace numaaff_test {

/// The what() of the `Exception` that `call()` throws; "no exception" when it returns. Any
/// other exception propagates, so the test fails on it.
template <class Exception, class Call>
std::string what_of(Call&& call) {
  try {
    call();
  } catch (const Exception& e) {
    return e.what();
  }
  return "no exception";
}

}  // namespace numaaff_test
