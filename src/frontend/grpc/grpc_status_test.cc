#include "frontend/grpc/grpc_status.h"

#include <gtest/gtest.h>

namespace weft {
namespace {

TEST(GrpcStatusTest, EveryCodeMapsToItsGrpcCode) {
  EXPECT_EQ(GrpcCodeFor(StatusCode::kOk), grpc::StatusCode::OK);
  EXPECT_EQ(GrpcCodeFor(StatusCode::kInvalidArgument), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(GrpcCodeFor(StatusCode::kNotFound), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(GrpcCodeFor(StatusCode::kUnavailable), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(GrpcCodeFor(StatusCode::kResourceExhausted), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(GrpcCodeFor(StatusCode::kDeadlineExceeded), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_EQ(GrpcCodeFor(StatusCode::kCancelled), grpc::StatusCode::CANCELLED);
  EXPECT_EQ(GrpcCodeFor(StatusCode::kAborted), grpc::StatusCode::ABORTED);
  EXPECT_EQ(GrpcCodeFor(StatusCode::kUnimplemented), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_EQ(GrpcCodeFor(StatusCode::kInternal), grpc::StatusCode::INTERNAL);
  EXPECT_EQ(GrpcCodeFor(StatusCode::kOutOfMemory), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(GrpcCodeFor(StatusCode::kUnauthenticated), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(GrpcCodeFor(StatusCode::kPermissionDenied), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(GrpcCodeFor(StatusCode::kAlreadyExists), grpc::StatusCode::ALREADY_EXISTS);
}

TEST(GrpcStatusTest, CarriesTheMessage) {
  grpc::Status s = ToGrpcStatus(ResourceExhausted("queue full"));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(s.error_message(), "queue full");
  EXPECT_TRUE(ToGrpcStatus(Status::Ok()).ok());
  EXPECT_EQ(GrpcCodeName(grpc::StatusCode::DEADLINE_EXCEEDED), "DEADLINE_EXCEEDED");
  EXPECT_EQ(GrpcCodeName(grpc::StatusCode::OK), "OK");
}

// Hardening issue, item 6: an error quoting a 100 KB model name went out whole in the grpc-message trailer, past
// the clients' 8 KiB metadata limit, and broke 44 other calls on the channel.
TEST(GrpcStatusTest, MessagesAreBounded) {
  grpc::Status s = ToGrpcStatus(NotFound("unknown model '" + std::string(100000, 'm') + "'"));
  EXPECT_LE(s.error_message().size(), kMaxGrpcMessageBytes + 32);
  EXPECT_NE(s.error_message().find("more bytes)"), std::string::npos);
  EXPECT_EQ(s.error_message().rfind("unknown model 'mmm", 0), 0u);
}

}  // namespace
}  // namespace weft
