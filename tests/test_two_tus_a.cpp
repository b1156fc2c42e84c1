// Two translation units include every header and link into one program: an ODR slip (a
// non-inline definition in a header) fails to link, and process-wide state must be one object.
#include <numaaff/numaaff.hpp>

#include <gtest/gtest.h>

const void* topology_address_from_b();
const void* category_address_from_b();
const void* report_address_from_b();

TEST(TwoTranslationUnits, ShareProcessWideState) {
  EXPECT_EQ(&numaaff::topology::system(), topology_address_from_b());
  EXPECT_EQ(&numaaff::error_category(), category_address_from_b());
  EXPECT_EQ(&numaaff::system_report(), report_address_from_b());
}

TEST(TwoTranslationUnits, VersionMatchesTheBuild) {
  EXPECT_STREQ(numaaff::version(), NUMAAFF_EXPECTED_VERSION);
}
