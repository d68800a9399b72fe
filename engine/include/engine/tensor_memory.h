// Live and peak bytes of LibTorch's CPU tensors, counted by a wrapper around LibTorch's CPU
// allocator. Unlike the process's RSS (libraries, BLAS buffers, the allocator's own pages, what
// earlier work left), it is the quantity engine::estimate_step_memory models, counted exactly
// and the same on every run: `tupe bench` reports both, and the estimate's test holds the two
// within 20% for every preset.
#pragma once

#include <cstdint>

namespace engine {

/// Installs the counting wrapper as LibTorch's CPU allocator (once per process; later calls do
/// nothing). Only tensors allocated after the first call are counted: call it before building
/// the model you measure. The wrapper hands every request to the allocator it replaced.
void track_tensor_memory();

/// Bytes of CPU tensor storage allocated since track_tensor_memory() and not yet freed.
int64_t live_tensor_bytes();

/// The highest live_tensor_bytes() since the last reset_peak_tensor_bytes() (or the install).
int64_t peak_tensor_bytes();

/// Sets the peak to the current live bytes.
void reset_peak_tensor_bytes();

}  // namespace engine
