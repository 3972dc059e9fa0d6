/* consumer.c - links the installed library through its CMake package or
 * pkg-config and checks that the header and the library agree. */
#include <stdio.h>
#include <string.h>

#include <dcptopk.h>

int main(void)
{
    dcptopk_merge_config c;
    size_t n = 0;
    if (dcptopk_version_number() != DCPTOPK_VERSION_NUMBER) {
        fprintf(stderr, "header %d, library %u\n", DCPTOPK_VERSION_NUMBER,
                dcptopk_version_number());
        return 1;
    }
    if (dcptopk_merge_config_named("deepseek-v3.2-dcp8", &c) ||
        dcptopk_config_keys(&c, "sm_90a", NULL, 0, &n) || n == 0) {
        fprintf(stderr, "%s\n", dcptopk_last_error(NULL));
        return 1;
    }
    printf("consumer: dcptopk %s, %zu keys for deepseek-v3.2-dcp8\n",
           dcptopk_version_string(), n);
    return 0;
}
