/*
 * packed.h - the packed merge's room (kernels/packed/): what the top floor
 * needs from its launcher beyond the public entry points it defines.
 */
#ifndef DCPTOPK_PACKED_H
#define DCPTOPK_PACKED_H

#include "base.h"

/* Config -> keys of the packed merge. Same contract as dcptopk_config_keys;
 * `arch` already resolved, the config already checked. */
DC_HIDDEN dcptopk_result dc_packed_config_keys(const dcptopk_merge_config *c,
                                               const char *arch,
                                               dcptopk_key *keys, size_t cap,
                                               size_t *count);

#endif /* DCPTOPK_PACKED_H */
