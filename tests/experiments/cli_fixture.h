// Forwards to the shared test support (support/test_support.h: running the `tupe` CLI, shell
// quoting, reading files, the toy corpus) for the runner tests that still include this header;
// other tests include the support header directly.
#pragma once

#include "support/test_support.h"
