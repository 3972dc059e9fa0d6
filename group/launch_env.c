/* launch_env.c - what a launcher (torchrun, Open MPI, Slurm) says about this
 * process: its rank and world (dcptopk_launch_env_get) and its job id, read
 * through the settings table. dcptopk_group_create_from_env builds a group
 * from them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "group_int.h"
#include "settings.h"
#include "structs.h"

/* A launcher's variable: 1 and *out when set, 0 when unset; a value that is
 * not a non-negative integer sets *bad and the error (a wrong rank must not
 * run, so this is not the settings table's warn-and-default). */
static int env_int(dc_setting_id id, int32_t *out, int *bad)
{
    const char *name = dc_setting_info(id)->name;
    const char *e = dc_setting_text(id);
    if (!e)
        return 0;
    char *end = NULL;
    long v = strtol(e, &end, 10);
    if (!end || *end || v < 0 || v > 1000000) {
        *bad = 1;
        dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT,
                "%s = \"%s\": not a non-negative integer", name, e);
        return 0;
    }
    *out = (int32_t)v;
    return 1;
}

dcptopk_result dcptopk_launch_env_get(dcptopk_launch_env *dst)
{
    dcptopk_result r = DC_STRUCT_OUT(NULL, "out", dst, LAUNCH_ENV);
    if (r)
        return r;
    /* Filled in full here; the caller gets its struct_size's part. */
    dcptopk_launch_env env = DCPTOPK_LAUNCH_ENV_INIT, *out = &env;
    /* DC_SETTING_COUNT: the launcher has no such variable. */
    static const struct {
        const char *source;
        dc_setting_id rank, size, local_rank, local_size;
    } L[] = {
        {"torchrun", DC_SET_RANK, DC_SET_WORLD_SIZE, DC_SET_LOCAL_RANK,
         DC_SET_LOCAL_WORLD_SIZE},
        {"openmpi", DC_SET_OMPI_RANK, DC_SET_OMPI_SIZE, DC_SET_OMPI_LOCAL_RANK,
         DC_SET_OMPI_LOCAL_SIZE},
        {"slurm", DC_SET_SLURM_PROCID, DC_SET_SLURM_NTASKS,
         DC_SET_SLURM_LOCALID, DC_SETTING_COUNT},
    };
    for (size_t i = 0; i < sizeof L / sizeof L[0]; i++) {
        int bad = 0;
        int32_t rank = -1, size = -1, lr = -1, ls = -1;
        const char *rank_name = dc_setting_info(L[i].rank)->name;
        const char *size_name = dc_setting_info(L[i].size)->name;
        int has_rank = env_int(L[i].rank, &rank, &bad);
        int has_size = env_int(L[i].size, &size, &bad);
        if (bad)
            return DCPTOPK_INVALID_ARGUMENT;
        if (!has_rank && !has_size)
            continue;
        if (!has_rank || !has_size)
            return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT,
                           "%s is set but %s is not",
                           has_rank ? rank_name : size_name,
                           has_rank ? size_name : rank_name);
        if (size < 1 || rank >= size)
            return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT,
                           "%s = %d, %s = %d: the rank must be below the "
                           "size",
                           rank_name, rank, size_name, size);
        env_int(L[i].local_rank, &lr, &bad);
        if (L[i].local_size != DC_SETTING_COUNT)
            env_int(L[i].local_size, &ls, &bad);
        if (bad)
            return DCPTOPK_INVALID_ARGUMENT;
        out->rank = rank;
        out->world_size = size;
        out->local_rank = lr;
        out->local_world_size = ls;
        snprintf(out->source, sizeof out->source, "%s", L[i].source);
        dc_struct_write(dst, dst->struct_size, out, sizeof *out);
        dc_clear(NULL);
        return DCPTOPK_SUCCESS;
    }
    return dc_fail(NULL, DCPTOPK_NOT_FOUND,
                   "no launcher variables: set RANK and WORLD_SIZE (torchrun), "
                   "or run under Open MPI or Slurm");
}

const char *dc_launch_job_id(void)
{
    const dc_setting_id jobs[] = {DC_SET_TORCHELASTIC_RUN_ID,
                                  DC_SET_SLURM_JOB_ID, DC_SET_OMPI_JOB_ID,
                                  DC_SET_JOB_ID};
    for (size_t i = 0; i < sizeof jobs / sizeof jobs[0]; i++) {
        const char *v = dc_setting_text(jobs[i]);
        /* It names store files: short, and no folder in it. */
        if (v && strlen(v) < 48 && !strchr(v, '/'))
            return v;
    }
    return NULL;
}
