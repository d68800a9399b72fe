// Version, git commit and LibTorch version of this build, recorded with every run.
// The values come from a file CMake generates at configure time (build_info.cpp.in), so a new
// commit recompiles one small file instead of everything that includes torch.
#pragma once

namespace experiments {

/// Project version, e.g. "0.1.0".
const char* project_version();
/// Short git commit of the source tree at configure time, or "unknown".
const char* git_commit();
/// LibTorch version this build was configured against, e.g. "1.13.1".
const char* torch_version();

}  // namespace experiments
