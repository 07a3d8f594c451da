// Umbrella header of the rlx public API.
#pragma once
#include "rlx/attrs.h"
#include "rlx/compiled_graph.h"
#include "rlx/dtype.h"
#include "rlx/error.h"
#include "rlx/graph.h"
#include "rlx/options.h"
#include "rlx/shape.h"
#include "rlx/text.h"
#include "rlx/version.h"
