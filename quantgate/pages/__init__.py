"""Page sets: import, synthesise, split, check. Imports no other stage."""

from quantgate.io.pageset import PageSet, load_pageset, split_of
from quantgate.pages.check import check_pageset, pageset_stats

__all__ = ["PageSet", "check_pageset", "load_pageset", "pageset_stats", "split_of"]
