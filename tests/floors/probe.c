/* probe.c - compiled by tests/floors with one floor's include directories
 * and -DDC_PROBE_HEADER="x.h": the floors test expects every upward header
 * to be missing (the build refuses it) and every same or lower floor's
 * header to compile. Never part of the library. */
#include DC_PROBE_HEADER

int dc_floor_probe(void);
int dc_floor_probe(void) { return 0; }
