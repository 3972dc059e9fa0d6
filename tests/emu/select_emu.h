// select_emu.h - select_core.cuh (and common.cuh) compiled for the emulator,
// with the constants the renderer would define for a select config
// (`dcptopk render 'select(topk=2048,local_topk=2048,world_size=8,...)'`):
// the block size comes from the build (DC_EMU_THREADS), as the templates
// take it from packed_abi.h. Included by the tests of select_core.cuh only.
#pragma once

#include "emu_test.h"

#ifndef DC_EMU_THREADS
#error "the build defines DC_EMU_THREADS (the emulated block size)"
#endif

#define DCPTOPK_TOPK 2048
#define DCPTOPK_LOCAL_TOPK 2048
#define DCPTOPK_WORLD_SIZE 8
#define DCPTOPK_BLOCK_SIZE 64
#define DCPTOPK_INTERLEAVE 1
#define DCPTOPK_EMIT_IDS 1
#define DCPTOPK_EXACT 1
#define DCPTOPK_GID_BITS 20
// A host compile takes the ABI header's C side (the launcher's argument
// structs), whose size checks are C11's keyword.
#define _Static_assert static_assert
#include "packed_abi.h"
#undef _Static_assert
#define DCPTOPK_THREADS DC_EMU_THREADS
#include "select_core.cuh"

constexpr int THREADS = dcsel::THREADS;
