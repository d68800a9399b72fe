// Version, git commit and LibTorch version of this build, recorded with every run.
// The version and LibTorch version come from a file CMake generates at configure time
// (build_info.cpp.in); the git commit is read at every build (cmake/git_commit.cmake writes a
// header only when it changed), so a new commit recompiles one small file.
#pragma once

namespace experiments {

/// Project version, e.g. "0.1.0".
const char* project_version();
/// Short git commit of the source tree when the binary was built, with "-dirty" when the tree
/// had uncommitted changes, or "unknown" (no git, or no .git).
const char* git_commit();
/// LibTorch version this build was configured against, e.g. "1.13.1".
const char* torch_version();

}  // namespace experiments
