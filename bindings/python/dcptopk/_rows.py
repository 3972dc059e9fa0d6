"""The physical-rows output of a select (RowsOutput) and the C rows map
(dcptopk_rows_map) a launch takes it as.

Nothing here imports torch: the tensors come from the caller.
"""
from . import _checks
from ._lib import RowsMap


class RowsOutput:
    """The physical-rows output of a select (the rows map): for row t, the
    selected tokens this rank owns as block_table[req_id[t], l // B] *
    stride_rows + l % B, compacted into rows_out[t] (-1 after), their number
    in counts_out[t]. B is the config's block_size."""

    def __init__(self, req_id, block_table, rows_out, counts_out, stride_rows):
        self.req_id, self.block_table = req_id, block_table
        self.rows_out, self.counts_out, self.stride_rows = rows_out, counts_out, stride_rows

    def tensors(self):
        return self.req_id, self.block_table, self.rows_out, self.counts_out

    def _rows_map(self, cfg, rows, dev):
        p = _checks.rows_map(cfg, rows, dev, self.req_id, self.block_table, self.rows_out,
                             self.counts_out, self.stride_rows)
        return rows_map_struct(p, self.req_id, self.block_table, self.rows_out, self.counts_out)


def rows_map_struct(plan, req_id, block_table, rows_out, counts_out):
    """The C rows map of a checked plan (_checks.rows_map); an empty map
    (no rows output) when plan is None."""
    m = RowsMap()
    if plan is None:
        return m
    m.req_id, m.block_table = req_id.data_ptr(), block_table.data_ptr()
    m.block_table_stride = plan["block_table_stride"]
    m.block_table_cols, m.num_reqs = plan["block_table_cols"], plan["num_reqs"]
    m.stride_rows = plan["stride_rows"]
    m.rows_out, m.rows_out_stride = rows_out.data_ptr(), plan["rows_out_stride"]
    m.counts_out = counts_out.data_ptr()
    return m


__all__ = ["RowsOutput"]
