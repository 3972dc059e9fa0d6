/* test_log.c - the log function (base/log.c): levels, the caller's callback
 * receives whole lines, stderr gets each line in one piece, DCPTOPK_LOG sets
 * the initial level. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dcptopk.h"
#include "harness.h"
#include "log.h"

typedef struct seen {
    int calls;
    dcptopk_log_level level;
    char line[256];
} seen;

static void on_log(void *user, dcptopk_log_level level, const char *line)
{
    seen *s = user;
    s->calls++;
    s->level = level;
    snprintf(s->line, sizeof s->line, "%s", line);
}

TEST(callback_gets_whole_lines_at_or_below_the_level)
{
    seen s = {0};
    dcptopk_log_set_callback(on_log, &s);
    dcptopk_log_set_level(DCPTOPK_LOG_WARN);
    CHECK_EQ(dcptopk_log_get_level(), DCPTOPK_LOG_WARN);
    dc_log_warn("cache %s: %d", "x", 7);
    CHECK_EQ(s.calls, 1);
    CHECK_EQ(s.level, DCPTOPK_LOG_WARN);
    CHECK_STR_EQ(s.line, "cache x: 7");
    dc_log_info("not shown");
    dc_log_debug("not shown");
    CHECK_EQ(s.calls, 1);
    dcptopk_log_set_level(DCPTOPK_LOG_DEBUG);
    dc_log_debug("shown");
    CHECK_EQ(s.calls, 2);
    CHECK_STR_EQ(s.line, "shown");
    dcptopk_log_set_level(DCPTOPK_LOG_QUIET);
    dc_log_error("not shown");
    CHECK_EQ(s.calls, 2);
    dcptopk_log_set_level((dcptopk_log_level)99);
    CHECK_EQ(dcptopk_log_get_level(), DCPTOPK_LOG_DEBUG);
    dcptopk_log_set_callback(NULL, NULL);
    dcptopk_log_set_level(DCPTOPK_LOG_WARN);
}

/* Runs `level_env` in a child whose stderr is a pipe; returns what it wrote. */
static void child_output(const char *level_env, char *out, size_t cap)
{
    int fd[2];
    CHECK_EQ(pipe(fd), 0);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fd[1], 2);
        close(fd[0]);
        if (level_env)
            setenv("DCPTOPK_LOG", level_env, 1);
        else
            unsetenv("DCPTOPK_LOG");
        dc_log_warn("first %d", 1);
        dc_log_info("second %d", 2);
        _exit(0);
    }
    close(fd[1]);
    size_t n = 0;
    ssize_t r;
    while (n + 1 < cap && (r = read(fd[0], out + n, cap - n - 1)) > 0)
        n += (size_t)r;
    out[n] = '\0';
    close(fd[0]);
    int status = 0;
    waitpid(pid, &status, 0);
}

TEST(stderr_lines_and_the_environment_level)
{
    char out[1024];
    child_output(NULL, out, sizeof out);
    CHECK_STR_EQ(out, "dcptopk: warning: first 1\n");
    child_output("info", out, sizeof out);
    CHECK_STR_EQ(out, "dcptopk: warning: first 1\ndcptopk: info: second 2\n");
    child_output("quiet", out, sizeof out);
    CHECK_STR_EQ(out, "");
    child_output("loud", out, sizeof out);
    CHECK_CONTAINS(out, "ignoring DCPTOPK_LOG=\"loud\"");
    CHECK_CONTAINS(out, "dcptopk: warning: first 1\n");
}

TEST(long_lines_are_cut_but_end_with_a_newline)
{
    char big[5000];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    int fd[2];
    CHECK_EQ(pipe(fd), 0);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fd[1], 2);
        close(fd[0]);
        unsetenv("DCPTOPK_LOG");
        dc_log_warn("%s", big);
        _exit(0);
    }
    close(fd[1]);
    static char out[8192];
    size_t n = 0;
    ssize_t r;
    while (n + 1 < sizeof out && (r = read(fd[0], out + n, sizeof out - n - 1)) > 0)
        n += (size_t)r;
    close(fd[0]);
    waitpid(pid, NULL, 0);
    CHECK(n > 100 && n < 2100);
    CHECK_EQ(out[n - 1], '\n');
}
