#!/usr/bin/env python3
"""pair_trace.py - copies kernels/ and stamps the phases of the copy's
pair_select.cu, for bench_pair's trace (BENCH_PAIR_TRACE=1 with
DCPTOPK_TEMPLATE_DIR set to the copy).

    bench/pair_trace.py KERNELS_DIR OUT_DIR

Thread 0 of each CTA keeps clock64 at the row's start and at each phase
below in shared memory; at the end, behind a barrier, it writes each stamp
less the start over ids[t][1 ..] of its row (slot 0 holds the slot count),
where bench_pair reads them back. The ids are then no longer the select's:
a traced run times and traces, it does not check. A stamp whose anchor is not
found once is left out and named on stderr (the anchors follow the head's
template).
"""
import os

import stamped_copy

SLOTS = 13

# (slot, anchor, after?) in the order of a row's phases: 1 the loads start,
# 2 the load phase's end, 3-5 the radix passes' bin searches (a row may not
# reach all), 10 pass 1's histogram built, 6 the decision, 11 the emit's
# flags, 7 its counts scanned, 8 its list written, 9 the gids loaded, 12
# (SLOTS - 1) the row's end.
STAMPS = [
    (1, "    if (v16)\n        load_phase<true>(hist0, row, dyn_keys);\n", False),
    (2, "        load_phase<false>(hist0, row, dyn_keys);\n    __syncthreads();\n", True),
    (10, "                masked = true;\n", True),
    (6, "    radix_select(sh, cl, row, d, above_mask, inbin_mask, masked);\n", True),
    (11, "    if (kMask)\n        nsel = __popc(selmask);\n", True),
    (7, "    const uint32_t before = block_scan<true>(sh, nsel, &nsel_all) - nsel;\n", True),
    (8, "    // (C) ids and owned rows.", False),
    (9, "    if (want_ids) {\n        int32_t *ids = o.ids + t * o.ids_stride;", False),
]

HEADER = '''
__shared__ long long dc_trace[%d];
#define DC_TRACE(i) do { if (threadIdx.x == 0) dc_trace[i] = clock64(); } while (0)
''' % SLOTS

END = '''    __syncthreads();
    DC_TRACE(%d);
    if (threadIdx.x == 0 && ids_out) {
        ids_out[t * ids_stride] = %d;
        for (int i = 1; i < %d; i++)
            ids_out[t * ids_stride + i] = dc_trace[i] ? (int32_t)(dc_trace[i] - dc_trace[0]) : -1;
    }
''' % (SLOTS - 1, SLOTS, SLOTS)


def main():
    src, dst = stamped_copy.args("pair_trace.py", "KERNELS_DIR")
    st = stamped_copy.Stamped("pair_trace.py", src, dst, [os.path.join("pair", "pair_select.cu")])
    st.text = st.text.replace("namespace ps {\n", HEADER + "namespace ps {\n", 1)
    st.put("    dc::pdl_wait();\n",
           "    if (threadIdx.x == 0)\n        for (int i = 0; i < %d; i++)\n"
           "            dc_trace[i] = 0;\n    DC_TRACE(0);\n" % SLOTS, True)
    st.put("        if (q == 0 && sh.total <= need) {", "        DC_TRACE(3 + q);\n", False)
    for slot, anchor, after in STAMPS:
        st.put(anchor, "    DC_TRACE(%d);\n" % slot, after)
    st.put("    if (kGroup)\n        dc::cluster_wait();\n}\n", END, False)
    st.save()


if __name__ == "__main__":
    main()
