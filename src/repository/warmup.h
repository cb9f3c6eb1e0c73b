#pragma once

#include "base/status.h"
#include "repository/repository.h"

namespace weft {

// Runs the config's model_warmup samples on every instance of `version`, directly (not through a scheduler: the
// version is not serving yet, so nothing else calls these instances). Inputs are generated per sample: zeros,
// random data (a fixed seed per sample and input, so that a failure reproduces), or the contents of
// <model dir>/warmup/<file>, whose size must equal the byte size of the sample's dims (BYTES: a valid sequence of
// 4-byte little-endian lengths and bytes, with as many elements as the dims hold). As in Triton, random data for a
// BYTES input is empty elements, a sample's inputs are repeated batch_size times along the batch dimension, and a
// sample of batch_size 0 is skipped. Inputs go to Execute as a request's would: in config order, batch dimension
// first when the model batches, reshaped to the input's `reshape`. Each sample runs max(1, count) times on each
// instance, samples in config order. Ok when there are no samples.
//
// Every file of every sample is measured before the first execution, so a missing or wrong-sized file fails the
// warm-up before any instance has run; each is read with a read of exactly its measured size. Errors name the
// sample and, for an execution, the instance: "warm-up 'sample0' on instance 1: <the backend's error>" (the
// backend's code), Internal when an execution returns the wrong number of outputs, NotFound for a missing file,
// InvalidArgument for a wrong one. Files are named relative to the model directory ("warmup/x.bin"): load errors
// reach clients.
//
// Blocks until every execution has returned. Call it from one thread per version, before the version serves: it
// calls the instances, which ModelInstance allows from one thread at a time.
Status WarmUpVersion(const LoadedVersion& version);

}  // namespace weft
