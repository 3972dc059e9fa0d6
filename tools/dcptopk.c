/* dcptopk.c - the command-line tool (placeholder until the CLI lands). */
#include <stdio.h>

#include "dcptopk.h"

int main(void)
{
    printf("dcptopk %s\n", dcptopk_version_string());
    return 0;
}
