#include "trace/trace_context.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <thread>
#include <vector>

namespace weft {
namespace {

constexpr std::string_view kParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

TEST(TraceContextTest, ParsesTheSpecsExample) {
  auto context = ParseTraceContext(kParent, "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE");
  ASSERT_TRUE(context.has_value());
  EXPECT_EQ(HexOf(context->trace_id), "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_EQ(HexOf(context->parent_span_id), "00f067aa0ba902b7");
  EXPECT_TRUE(context->sampled);
  EXPECT_EQ(context->trace_state, "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE");
}

TEST(TraceContextTest, ReadsTheSampledFlagOnly) {
  for (const auto& [flags, sampled] : std::initializer_list<std::pair<std::string_view, bool>>{
           {"00", false}, {"01", true}, {"02", false}, {"03", true}, {"ff", true}, {"fe", false}}) {
    auto context = ParseTraceContext(std::string(kParent.substr(0, 53)) + std::string(flags), "");
    ASSERT_TRUE(context.has_value()) << flags;
    EXPECT_EQ(context->sampled, sampled) << flags;
  }
}

TEST(TraceContextTest, TrimsSpacesAndTabs) {
  auto context = ParseTraceContext(" \t" + std::string(kParent) + "\t ", "\t a=1 , b=2 ");
  ASSERT_TRUE(context.has_value());
  EXPECT_EQ(HexOf(context->parent_span_id), "00f067aa0ba902b7");
  EXPECT_EQ(context->trace_state, "a=1 , b=2");
}

TEST(TraceContextTest, RefusesInvalidTraceparents) {
  const std::string p(kParent);
  for (const std::string& bad : std::vector<std::string>{
           "",
           "   ",
           p.substr(0, 54),                                                 // one short
           p + "0",                                                         // version 00 is exactly 55
           p + "-",                                                         // even with a dash, for 00
           "ff" + p.substr(2),                                              // version ff is forbidden
           "0g" + p.substr(2),                                              // version not hex
           "0A" + p.substr(2),                                              // uppercase version
           "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",       // uppercase trace id
           "00-4bf92f3577b34da6a3ce929d0e0e4736-00F067AA0BA902B7-01",       // uppercase parent id
           "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0A",       // uppercase flags
           "00-00000000000000000000000000000000-00f067aa0ba902b7-01",       // zero trace id
           "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",       // zero parent id
           "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",       // wrong separator
           "00-4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7-01",       //
           "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7_01",       //
           "00-4bf92f3577b34da6a3ce929d0e0e473-600f067aa0ba902b7-01",       // fields shifted
           "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0",        // flags too short
           "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01 x",     // trailing junk
           "00-4bf92f3577b3 da6a3ce929d0e0e4736-00f067aa0ba902b7-01",       // a space inside
           "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x",      // later version: 56th must be '-'
           "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0",        // later version: too short
           "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01.what",  //
           std::string("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\0", 56),  // NUL
       }) {
    EXPECT_FALSE(ParseTraceContext(bad, "a=1").has_value()) << "'" << bad << "'";
  }
}

TEST(TraceContextTest, ReadsALaterVersionsFirstFields) {
  auto context = ParseTraceContext("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-the-future-holds", "");
  ASSERT_TRUE(context.has_value());
  EXPECT_EQ(HexOf(context->trace_id), "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_TRUE(context->sampled);
  EXPECT_TRUE(ParseTraceContext("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", "").has_value());
}

// The traceparent survives an invalid tracestate, which is dropped.
std::string StateOf(std::string_view tracestate) {
  auto context = ParseTraceContext(kParent, tracestate);
  EXPECT_TRUE(context.has_value()) << tracestate;
  return context ? context->trace_state : "<no context>";
}

TEST(TraceContextTest, KeepsAValidTracestateAsReceived) {
  for (const std::string& good : std::vector<std::string>{
           "",
           "a=1",
           "a=1,b=2",
           "a=1,,b=2",          // empty members are skipped
           "a=1, ,\t,b=2",      // and so are members of OWS only
           ",a=1,",             //
           "foo_bar-baz*/9=x",  // every key character
           "tenant@system=x",   // multi-tenant key
           "0tenant@s=x",       // a tenant may start with a digit
           "a= value with spaces inside!~",
           "a=" + std::string(256, 'v'),
           std::string(256, 'k') + "=1",
           std::string(241, 't') + "@" + std::string(14, 's') + "=1",
       }) {
    EXPECT_EQ(StateOf(good), good) << good;
  }
}

TEST(TraceContextTest, DropsAnInvalidTracestate) {
  for (const std::string& bad : std::vector<std::string>{
           "a",                                 // no '='
           "=1",                                // no key
           "a=",                                // no value
           "A=1",                               // uppercase key
           "1a=1",                              // a simple key starts with a letter
           "a b=1",                             // space in a key
           "a =1",                              //
           "a=1=2",                             // '=' in a value
           "a=\x7f",                            // not printable
           "a=\tb",                             // tab inside a value
           "a=1,a=2",                           // a key twice
           "@s=1",                              // no tenant
           "t@=1",                              // no system
           "t@1s=1",                            // a system starts with a letter
           "t@s@x=1",                           // two '@'
           "a=" + std::string(257, 'v'),        // value too long
           std::string(257, 'k') + "=1",        // key too long
           std::string(242, 't') + "@s=1",      // tenant too long
           "t@" + std::string(15, 's') + "=1",  // system too long
           "a=\xc3\xa9",                        // not ASCII
       }) {
    EXPECT_EQ(StateOf(bad), "") << bad;
  }
}

TEST(TraceContextTest, LimitsTracestateToThirtyTwoMembersAnd512Characters) {
  std::string state;
  for (int i = 0; i < 32; ++i) state += (i ? ",k" : "k") + std::to_string(i) + "=v";
  EXPECT_EQ(StateOf(state), state);
  EXPECT_EQ(StateOf(state + ",,"), state + ",,");
  EXPECT_EQ(StateOf(state + ",k32=v"), "");
  std::string longest = "a=" + std::string(254, 'x') + ",b=" + std::string(253, 'y');
  ASSERT_EQ(longest.size(), 512u);
  EXPECT_EQ(StateOf(longest), longest);
  EXPECT_EQ(StateOf(longest + ","), "");
  EXPECT_EQ(StateOf("  " + longest + "  "), longest);  // the limit is on what is kept
}

TEST(TraceContextTest, FormatsWhatItParses) {
  const TraceId trace = {0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6,
                         0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36};
  const SpanId span = {0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7};
  EXPECT_EQ(FormatTraceparent(trace, span, true), kParent);
  EXPECT_EQ(FormatTraceparent(trace, span, false), "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00");
  auto back = ParseTraceContext(FormatTraceparent(trace, span, false), "");
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->trace_id, trace);
  EXPECT_EQ(back->parent_span_id, span);
  EXPECT_FALSE(back->sampled);
}

TEST(TraceContextTest, HexIsLowercaseTwoDigitsEach) {
  const uint8_t bytes[] = {0x00, 0x0f, 0xa0, 0xff};
  EXPECT_EQ(HexOf(bytes), "000fa0ff");
  EXPECT_EQ(HexOf({}), "");
}

TEST(TraceContextTest, NewIdsAreNonZeroAndDistinctAcrossThreads) {
  std::set<TraceId> traces;
  std::set<SpanId> spans;
  for (int i = 0; i < 1000; ++i) {
    TraceId t = NewTraceId();
    SpanId s = NewSpanId();
    EXPECT_NE(t, TraceId{});
    EXPECT_NE(s, SpanId{});
    traces.insert(t);
    spans.insert(s);
  }
  // Each thread seeds its own generator: another thread's ids are not this one's.
  std::vector<TraceId> other;
  std::thread([&other] {
    for (int i = 0; i < 1000; ++i) other.push_back(NewTraceId());
  }).join();
  traces.insert(other.begin(), other.end());
  EXPECT_EQ(traces.size(), 2000u);
  EXPECT_EQ(spans.size(), 1000u);
  // Every id formats into a traceparent that parses back.
  const TraceId t = NewTraceId();
  const SpanId s = NewSpanId();
  auto context = ParseTraceContext(FormatTraceparent(t, s, true), "");
  ASSERT_TRUE(context.has_value());
  EXPECT_EQ(context->trace_id, t);
  EXPECT_EQ(context->parent_span_id, s);
}

}  // namespace
}  // namespace weft
