"""stamped_copy.py - what the phase-trace scripts (topn_trace.py,
pair_trace.py) share: a fresh copy of a template folder, and one file of the
copy edited at anchors that must each occur once."""
import os
import shutil
import sys


def args(tool, what):
    """The script's two arguments: the folder to copy and the copy."""
    if len(sys.argv) != 3:
        sys.exit("usage: %s %s OUT_DIR" % (tool, what))
    return sys.argv[1], sys.argv[2]


class Stamped:
    """A fresh copy of src at dst (replacing dst) and the text of the first
    of `names` (paths in the copy) that exists; put() edits it, save()
    writes it back."""

    def __init__(self, tool, src, dst, names):
        if os.path.exists(dst):
            shutil.rmtree(dst)
        shutil.copytree(src, dst)
        self.tool = tool
        paths = [os.path.join(dst, n) for n in names if os.path.exists(os.path.join(dst, n))]
        if not paths:
            sys.exit("%s: none of %s in %s" % (tool, ", ".join(names), src))
        self.path = paths[0]
        self.text = open(self.path).read()

    def put(self, anchor, text, after):
        """Inserts text after (or before) anchor; an anchor not found once is
        left alone and named on stderr. Returns whether it was found."""
        if self.text.count(anchor) != 1:
            print("%s: anchor not found once, stamp left out: %r" % (self.tool, anchor[:60]),
                  file=sys.stderr)
            return False
        self.text = self.text.replace(anchor, anchor + text if after else text + anchor)
        return True

    def save(self):
        with open(self.path, "w") as f:
            f.write(self.text)
