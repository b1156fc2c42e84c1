/**
 * @file memory.hpp
 * @brief Where the pages of a range live: one header per concept, included together.
 *
 * - policy.hpp: range policies (bind, interleave, prefer, set_home_node, reset_policy): where
 *   pages go when first touched, and the rules every range call follows.
 * - interleave.hpp: weighted interleave and the weights (bandwidth, the system's).
 * - migration.hpp: move_to and place_blocks: moving pages that exist.
 * - placement.hpp: where, placement, placement_table, data_node: where pages are now.
 * - tiers.hpp: memory tiers: their order, move_to_tier, promote and demote.
 * Next touch (moving a range to whoever touches it first) is next_touch.hpp.
 *
 * @code{.cpp}
 * #include <numaaff/memory.hpp>
 * numaaff::move_to(a.data(), a.size() * sizeof(double), 1);      // phase change: data to node 1
 * std::printf("%s\n", numaaff::where(a.data(), a.size() * sizeof(double)).to_string().c_str());
 * @endcode
 */
#pragma once

#include "interleave.hpp"
#include "migration.hpp"
#include "placement.hpp"
#include "policy.hpp"
#include "tiers.hpp"
