/* trust.c - who may write a folder (see trust.h). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "trust.h"

int dc_trust_in_our_groups(gid_t gid)
{
    if (gid == getegid())
        return 1;
    gid_t groups[256];
    int n = getgroups(256, groups);
    for (int i = 0; i < n; i++)
        if (groups[i] == gid)
            return 1;
    return 0;
}

const char *dc_trust_writers(mode_t mode)
{
    if ((mode & S_IWGRP) && (mode & S_IWOTH))
        return "its group and others";
    return (mode & S_IWOTH) ? "others" : "its group";
}

int dc_trust_parents(const char *real, char *why, size_t size)
{
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s", real);
    for (;;) {
        char *slash = strrchr(p, '/');
        if (!slash || (slash == p && p[1] == '\0'))
            return 0;
        if (slash == p)
            p[1] = '\0';
        else
            *slash = '\0';
        struct stat st;
        if (stat(p, &st) != 0) {
            snprintf(why, size, "folder %s: %s", p, strerror(errno));
            return -1;
        }
        if (st.st_uid != geteuid() && st.st_uid != 0) {
            snprintf(why, size, "folder %s above it is owned by uid %u (not "
                     "you or root)", p, (unsigned)st.st_uid);
            return -1;
        }
        if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX)) {
            snprintf(why, size, "folder %s above it is writable by %s and "
                     "not sticky (mode %04o)",
                     p, dc_trust_writers(st.st_mode),
                     (unsigned)(st.st_mode & 07777));
            return -1;
        }
        if (strcmp(p, "/") == 0)
            return 0;
    }
}
