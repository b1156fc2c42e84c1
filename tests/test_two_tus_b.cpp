#include <numaaff/numaaff.hpp>

const void* topology_address_from_b() { return &numaaff::topology::system(); }
const void* category_address_from_b() { return &numaaff::error_category(); }
const void* report_address_from_b() { return &numaaff::system_report(); }
