#pragma once

#include <gtest/gtest.h>

#include <utility>

#include "test_server.h"

namespace weft::testing {

// A test suite whose tests share one TestServer: started before the first test with `Suite::ServerOptions()`,
// stopped after the last. Starting a server per test would load the repository again each time.
template <typename Suite>
class SharedServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto started = TestServer::Start(Suite::ServerOptions());
    ASSERT_TRUE(started.ok()) << started.status().ToString();
    server_ = std::move(started).value().release();
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override { ASSERT_NE(server_, nullptr); }

  static inline TestServer* server_ = nullptr;
};

}  // namespace weft::testing
