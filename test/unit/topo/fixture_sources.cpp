// The sysfs fixture builder lives in test/fixtures/ (shared test data); test_topo is globbed
// from this folder, so its sources are compiled in here.
#include "test/fixtures/sysfs_builder.cpp"   // NOLINT(bugprone-suspicious-include)
#include "test/fixtures/sysfs_fixtures.cpp"  // NOLINT(bugprone-suspicious-include)
