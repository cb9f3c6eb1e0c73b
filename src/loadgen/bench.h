#pragma once

#include <ostream>

#include "base/result.h"
#include "loadgen/bench_options.h"
#include "loadgen/bench_report.h"

namespace weft {

// Runs one benchmark: checks the options, reaches the server, builds the request (from the model's metadata, or
// the --input-data file), drives the load on options.threads io threads and reports. Blocks the caller for about
// warmup + duration (or the time the request count takes), and never longer than that + request_timeout + 1 s.
// Writes a progress line to `progress` about once a second (null: none).
// Errors: InvalidArgument for options that do not fit together or with the model, or an unreadable input file;
// Unimplemented for an https URL; NotFound when the server does not know the model; Unavailable when the server
// cannot be reached. Whatever the server answers during
// the run is in the report, not an error.
Result<BenchReport> RunBench(const BenchOptions& options, std::ostream* progress);

// `weft bench`: RunBench, then the table (or JSON) on `out`, errors on `err`. The exit code: 0 when the run
// completed, whatever the server answered; 1 when the server could not be reached at all (before the run, or
// every request failed to connect) or does not know the model; 2 when the options are wrong.
int RunBenchCommand(const BenchOptions& options, std::ostream& out, std::ostream& err);

}  // namespace weft
