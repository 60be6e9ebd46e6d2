// SPDX-License-Identifier: Apache-2.0
// The whole public surface of mlakv.
#pragma once

#include "mlakv/attention.h"
#include "mlakv/capabilities.h"
#include "mlakv/checks.h"
#include "mlakv/context_parallel.h"
#include "mlakv/error.h"
#include "mlakv/formats.h"
#include "mlakv/mla_kv_cache_writer.h"
#include "mlakv/prefill.h"
#include "mlakv/readers.h"
#include "mlakv/stream.h"
#include "mlakv/tensor_view.h"
#include "mlakv/version.h"
#include "mlakv/vocabulary.h"
#include "mlakv/writers.h"
