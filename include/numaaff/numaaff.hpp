/**
 * @file numaaff.hpp
 * @brief Umbrella header: everything numaaff offers without optional bridges.
 *
 * numaaff places threads and memory on NUMA nodes without kernel changes: node-affine thread
 * pools with homenodes, NUMA-aware allocators and migration, and next-touch migration. This
 * header includes every public concept header; the TBB and OpenMP bridges are included
 * separately so that the core never requires them.
 */
#pragma once

#include "allocator.hpp"
#include "config.hpp"
#include "counters.hpp"
#include "data_access.hpp"
#include "errors.hpp"
#include "homenode.hpp"
#include "kind.hpp"
#include "memory.hpp"
#include "next_touch.hpp"
#include "node_status.hpp"
#include "partition.hpp"
#include "system_report.hpp"
#include "task_group.hpp"
#include "thread_pool.hpp"
#include "topology.hpp"
#include "version.hpp"
