"""Page sets: import, synthesise, split, check. Imports no other stage."""

from quantgate.heldout.check import check_pageset, pageset_stats
from quantgate.io.pageset import PageSet, load_pageset, split_of

__all__ = ["PageSet", "check_pageset", "load_pageset", "pageset_stats", "split_of"]
