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
}

TEST(GrpcStatusTest, CarriesTheMessage) {
  grpc::Status s = ToGrpcStatus(ResourceExhausted("queue full"));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(s.error_message(), "queue full");
  EXPECT_TRUE(ToGrpcStatus(Status::Ok()).ok());
  EXPECT_EQ(GrpcCodeName(grpc::StatusCode::DEADLINE_EXCEEDED), "DEADLINE_EXCEEDED");
  EXPECT_EQ(GrpcCodeName(grpc::StatusCode::OK), "OK");
}

}  // namespace
}  // namespace weft
