// SPDX-License-Identifier: Apache-2.0
// Everything a user of crossfire's dispatch core needs.
#pragma once

#include "crossfire/args.hpp"
#include "crossfire/backend.hpp"
#include "crossfire/device.hpp"
#include "crossfire/dispatch.hpp"
#include "crossfire/error.hpp"
#include "crossfire/op_table.hpp"
#include "crossfire/ops.hpp"
#include "crossfire/plugin.hpp"
#include "crossfire/tensor.hpp"
