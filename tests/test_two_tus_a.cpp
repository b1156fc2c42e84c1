// Two translation units include every header and link into one program: an ODR slip (a
// non-inline definition in a header) fails to link, and process-wide state must be one object.
// task_group.hpp and thread_pool.hpp include each other: this unit includes task_group.hpp
// first, the other thread_pool.hpp, and both run a group.
#include <numaaff/task_group.hpp>
#include <numaaff/numaaff.hpp>

#include <gtest/gtest.h>

#include <atomic>

const void* topology_address_from_b();
const void* category_address_from_b();
const void* report_address_from_b();
int group_sum_from_b(numaaff::thread_pool& pool);

TEST(TwoTranslationUnits, ShareProcessWideState) {
  EXPECT_EQ(&numaaff::topology::system(), topology_address_from_b());
  EXPECT_EQ(&numaaff::error_category(), category_address_from_b());
  EXPECT_EQ(&numaaff::system_report(), report_address_from_b());
}

TEST(TwoTranslationUnits, TaskGroupsFromEitherIncludeOrder) {
  numaaff::thread_pool pool;
  std::atomic<int> sum{0};
  numaaff::task_group g(pool);
  for (int i = 1; i <= 4; ++i) g.run([&sum, i] { sum += i; });
  g.wait();
  EXPECT_EQ(sum.load(), 10);
  EXPECT_EQ(group_sum_from_b(pool), 10);
}

TEST(TwoTranslationUnits, VersionMatchesTheBuild) {
  EXPECT_STREQ(numaaff::version(), NUMAAFF_EXPECTED_VERSION);
}
