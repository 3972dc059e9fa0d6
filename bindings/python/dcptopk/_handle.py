"""The lifecycle every object that owns a C handle shares: close() frees it
once, `with` closes it, and so does the garbage collector.

Nothing here imports torch or loads the library.
"""


class Handle:
    """Base of the binding's handle objects. A subclass keeps its C handle
    in `_h` and frees it in `_release(h)`; `what` names it in the error of a
    call on a closed one."""

    what = "handle"
    _h = None
    # False for handles whose peers may still reach them when this process
    # exits (a group's communicator, its peer memory): freeing them from the
    # garbage collector at exit could wait on ranks that have gone.
    _free_on_gc = True

    def _release(self, h):
        """Frees h; h is None when the object holds no handle (closed, or
        never had one). Called once per close()."""

    def close(self):
        """Frees the handle; a second close does nothing."""
        h, self._h = self._h, None
        self._release(h)

    def _live(self):
        """The handle, or a ValueError when the object was closed."""
        if not self._h:
            raise ValueError(f"{self.what}: closed")
        return self._h

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        if not self._free_on_gc:
            return
        try:
            self.close()
        except Exception:   # the interpreter may be shutting down
            pass
