#!/usr/bin/env python3
"""topn_trace.py - copies kernels/ (or a flat copy of the templates) and puts
phase stamps into the copy's topn_select.cuh, for bench/topn_ab (its trace of
a cubin with `dc_trace`).

    bench/topn_trace.py TEMPLATES_DIR OUT_DIR

Thread 0 of each CTA writes %globaltimer at the row's start (slot 0) and end
(slot 31), clock64 at the start (slot 1) and at each phase below. A stamp
whose anchor text is not found is left out, and named on stderr: the
anchors follow the head's template, and an edited copy may miss some.
"""
import os

import stamped_copy

# (slot, anchor, after?) in the order of the row's phases
STAMPS = [
    (2, "    clear_counts(sh);\n    __syncthreads();\n", True),
    (7, "        to_keys(kv, list, hist_max, counting, nfull, raw);\n    }\n", True),
    (8, "    topn_keys(ck, sh, own);\n", True),
    (9, "    const TopnBound bd = topn_bound<NSEL>(ck, sh, own);\n", True),
    (10, "    const uint32_t nlist = topn_list(ck, sh, lb);\n", True),
    (11, "    const TopnWindow w = topn_window(ck, sh, own, nlist, lb);\n", True),
    (12, "        t.eq_run = take_all ? 0u : sh.b_eq;\n    }\n", True),
    (13, "    topn_planes<NSEL>(chunk, crank", False),
]

HEADER = '''
extern "C" __device__ unsigned long long dc_trace[16384 * 32];
__device__ __forceinline__ unsigned long long dc_trace_timer()
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
#define DC_TRACE(i, v) do { if (threadIdx.x == 0) dc_trace[blockIdx.x * 32 + (i)] = (v); } while (0)
'''


def main():
    src, dst = stamped_copy.args("topn_trace.py", "TEMPLATES_DIR")
    # A copy of kernels/ keeps the header in its family folder.
    st = stamped_copy.Stamped("topn_trace.py", src, dst,
                              ["topn_select.cuh", os.path.join("topn", "topn_select.cuh")])
    st.text = st.text.replace("namespace dc {\n", HEADER + "namespace dc {\n", 1)
    st.put("    const uint32_t crank = cluster_rank();\n",
           "    DC_TRACE(0, dc_trace_timer());\n    DC_TRACE(1, clock64());\n", True)
    st.put("\n            mbar_wait(&sh.bar[p], 0u);\n", "            if (p < 4)\n                DC_TRACE(3 + p, clock64());\n", True)
    for slot, anchor, after in STAMPS:
        if after is None:  # after the anchor's first line
            first = anchor.split("\n")[0] + "\n"
            if st.put(anchor, "", True):
                st.text = st.text.replace(
                    anchor, first + "    DC_TRACE(%d, clock64());\n" % slot + anchor[len(first):])
        else:
            st.put(anchor, "    DC_TRACE(%d, clock64());\n" % slot, after)
    st.put("    group_wait();\n}\n", "    DC_TRACE(30, clock64());\n    DC_TRACE(31, dc_trace_timer());\n", False)
    st.save()


if __name__ == "__main__":
    main()
