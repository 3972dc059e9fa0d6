/* trust.h - who may write a folder: the one rule that the compile cache and
 * the file store both apply before they read what a folder holds. */
#ifndef DCPTOPK_TRUST_H
#define DCPTOPK_TRUST_H

#include <stddef.h>
#include <sys/types.h>

#include "base.h"

/* Whether gid is this process's effective group or a supplementary one. */
DC_HIDDEN int dc_trust_in_our_groups(gid_t gid);
/* "its group", "others" or "its group and others": who `mode` lets write. */
DC_HIDDEN const char *dc_trust_writers(mode_t mode);
/* The folders above `real` (a resolved path, not itself checked): each owned
 * by us or root, and writable by group or others only when sticky (as
 * /tmp), so that nobody else can rename what lies below. 0 if so, else -1
 * with the first offending folder and why in `why`. */
DC_HIDDEN int dc_trust_parents(const char *real, char *why, size_t size);

#endif /* DCPTOPK_TRUST_H */
